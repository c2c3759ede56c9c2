//! Stage two of the import: the generic node list lowered to TEG, one function per ONNX
//! operator (each checks the opset where the operator's meaning changed). Values whose
//! contents are known at import time (initializers, `Constant`, and everything computed from
//! them or from static shapes: the shape glue) are folded here and only materialized (as a
//! weight source or a `full` generator) where an operator reads them as data.

mod attention;
mod einsum;
mod emit;
mod ew;
mod fold;
mod index;
mod linalg;
mod loss;
mod nn;
mod norm;
mod resize;
mod space;
mod views;

pub use emit::{ident, D};

use super::model::{dtype_of, error, Attr, Dim, Model, Node};
use crate::diag::{codes, Code, Diagnostic};
use emit::Emitter;
use std::collections::HashMap;
use std::path::Path;
use tapc_runtime::{DType, Tensor};

/// A value during lowering.
#[derive(Clone, Debug)]
pub enum Val {
    /// Known at import time.
    Const(Tensor),
    /// Computed by the TEG graph.
    Data(D),
}

impl Val {
    pub fn dtype(&self) -> DType {
        match self {
            Val::Const(t) => t.dtype(),
            Val::Data(d) => d.dtype,
        }
    }
    pub fn shape(&self) -> &[usize] {
        match self {
            Val::Const(t) => &t.shape,
            Val::Data(d) => &d.shape,
        }
    }
}

type R<T> = Result<T, Diagnostic>;

/// The lowering state.
pub struct Cx<'m> {
    pub path: &'m Path,
    vals: HashMap<String, Val>,
    /// Constants already materialized, by ONNX name.
    mat: HashMap<String, D>,
    /// Initializer names (materialized as weight sources).
    inits: std::collections::HashSet<String>,
    /// Declared types of intermediate values and outputs, checked against the inferred ones.
    annotations: HashMap<String, super::model::ValueInfo>,
    pub e: Emitter,
}

/// What the lowering produced.
pub struct Lowered {
    pub teg: String,
    pub weights: Vec<(String, Tensor)>,
}

/// Lowers `m` with the dims `shapes` gives for its inputs' dynamic dimensions.
pub fn lower(m: &Model, shapes: &HashMap<String, Vec<usize>>) -> R<Lowered> {
    let mut cx = Cx {
        path: &m.path,
        vals: HashMap::new(),
        mat: HashMap::new(),
        inits: m
            .graph
            .initializers
            .iter()
            .map(|(n, _)| n.clone())
            .collect(),
        annotations: m
            .graph
            .value_info
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(m.graph.outputs.iter().map(|o| (o.name.clone(), o.clone())))
            .collect(),
        e: Emitter::default(),
    };
    for (name, t) in &m.graph.initializers {
        cx.vals.insert(name.clone(), Val::Const(t.clone()));
    }
    for inp in &m.graph.inputs {
        let (dtype, shape) = input_type(m, inp, shapes)?;
        let src = ident(&inp.name);
        let d =
            cx.e.stmt(&inp.name, &format!("source @{src}"), dtype, shape);
        cx.vals.insert(inp.name.clone(), Val::Data(d));
    }
    for n in &m.graph.nodes {
        lower_node(&mut cx, n)?;
    }
    for out in &m.graph.outputs {
        let d = cx.data_named(&out.name, "graph output")?;
        let sink = ident(&out.name);
        cx.e.line(format!("  sink @{sink} {}", d.v()));
    }
    let header = format!(
        "Imported from {} by `tapc import` (opset {}).",
        m.path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        m.opsets.get("").copied().unwrap_or(0)
    );
    let graph = ident(&m.graph.name);
    Ok(Lowered {
        teg: cx.e.finish(&header, &graph),
        weights: std::mem::take(&mut cx.e.weights),
    })
}

/// A graph input's dtype and static shape (`--input-shape` fills or overrides dims).
fn input_type(
    m: &Model,
    inp: &super::model::ValueInfo,
    shapes: &HashMap<String, Vec<usize>>,
) -> R<(DType, Vec<usize>)> {
    let code = inp.elem_type.unwrap_or(0);
    let dtype = dtype_of(code).ok_or_else(|| {
        error(
            codes::ONNX_UNSUPPORTED_FORM,
            &m.path,
            format!(
                "graph input `{}` has ONNX element type {code}, which TEG has no dtype for",
                inp.name
            ),
        )
    })?;
    if let Some(s) = shapes.get(&inp.name) {
        if let Some(dims) = &inp.dims {
            let agrees = dims.len() == s.len()
                && dims
                    .iter()
                    .zip(s)
                    .all(|(d, &v)| !matches!(d, Dim::Known(k) if *k as usize != v));
            if !agrees {
                return Err(error(
                    codes::ONNX_INPUT_SHAPE,
                    &m.path,
                    format!(
                        "`--input-shape {}={}` does not fit the input's declared dims [{}]",
                        inp.name,
                        join(s),
                        shown_dims(dims)
                    ),
                ));
            }
        }
        return checked(m, inp, dtype, s.clone());
    }
    let Some(dims) = &inp.dims else {
        return Err(error(
            codes::ONNX_SHAPE,
            &m.path,
            format!("graph input `{}` has no declared shape", inp.name),
        )
        .note(format!(
            "give it one: `--input-shape {}=d0,d1,...`",
            inp.name
        )));
    };
    let mut shape = Vec::new();
    for d in dims {
        match d {
            Dim::Known(v) => shape.push(*v as usize),
            _ => {
                let what = match d {
                    Dim::Param(p) => format!("dimension `{p}`"),
                    _ => "an unknown dimension".into(),
                };
                return Err(error(
                    codes::ONNX_SHAPE,
                    &m.path,
                    format!(
                        "graph input `{}` has {what}; TEG needs static shapes",
                        inp.name
                    ),
                )
                .note(format!(
                    "give its dims: `--input-shape {}=d0,d1,...`",
                    inp.name
                )));
            }
        }
    }
    checked(m, inp, dtype, shape)
}

/// `shape` if its element count fits a `usize` (E0124 otherwise).
fn checked(
    m: &Model,
    inp: &super::model::ValueInfo,
    dtype: DType,
    shape: Vec<usize>,
) -> R<(DType, Vec<usize>)> {
    match tapc_runtime::checked_numel(&shape) {
        Some(_) => Ok((dtype, shape)),
        None => Err(error(
            codes::ONNX_SHAPE,
            &m.path,
            format!(
                "graph input `{}` has dims {shape:?}, too many elements to address",
                inp.name
            ),
        )),
    }
}

fn shown_dims(dims: &[Dim]) -> String {
    let d: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Known(v) => v.to_string(),
            Dim::Param(p) => p.clone(),
            Dim::Unknown => "?".into(),
        })
        .collect();
    d.join(", ")
}

fn join(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// A lowering function: the node's output values, in order.
type Lower = fn(&mut Cx, &Node) -> R<Vec<Val>>;

/// The lowering of `op_type` in the default domain.
fn lowering(op_type: &str) -> Option<Lower> {
    ew::lowering(op_type)
        .or_else(|| linalg::lowering(op_type))
        .or_else(|| nn::lowering(op_type))
        .or_else(|| views::lowering(op_type))
        .or_else(|| resize::lowering(op_type))
        .or_else(|| index::lowering(op_type))
        .or_else(|| norm::lowering(op_type))
        .or_else(|| space::lowering(op_type))
        .or_else(|| loss::lowering(op_type))
        .or_else(|| attention::lowering(op_type))
        .or_else(|| einsum::lowering(op_type))
}

fn lower_node(cx: &mut Cx, n: &Node) -> R<()> {
    if !n.chain.is_empty() {
        return lower_chain(cx, n);
    }
    let outs = if !n.domain.is_empty() {
        return Err(unsupported_op(cx, n));
    } else if let Some(v) = fold::fold(cx, n)? {
        v
    } else if let Some(f) = lowering(&n.op_type) {
        f(cx, n)?
    } else if fold::FOLD_ONLY.contains(&n.op_type.as_str()) {
        return Err(cx.unsupported(
            n,
            "its inputs are computed at run time; it is imported only as shape glue on constants",
        ));
    } else {
        return Err(unsupported_op(cx, n));
    };
    for (name, v) in n.outputs.iter().zip(outs) {
        if !name.is_empty() {
            check_annotation(cx, n, name, &v)?;
            cx.vals.insert(name.clone(), v);
        }
    }
    Ok(())
}

/// A chain node of the import's simplification: one elementwise apply, or its nodes one by one.
fn lower_chain(cx: &mut Cx, n: &Node) -> R<()> {
    match ew::chain(cx, n)? {
        Some(d) => {
            let v = Val::Data(d);
            check_annotation(cx, n, &n.outputs[0], &v)?;
            cx.vals.insert(n.outputs[0].clone(), v);
            Ok(())
        }
        None => n.chain.iter().try_for_each(|s| lower_node(cx, s)),
    }
}

/// E0126 when the model annotates `name` (`value_info` or a graph output) with static dims or
/// a dtype that differ from what the import inferred.
fn check_annotation(cx: &Cx, n: &Node, name: &str, v: &Val) -> R<()> {
    let Some(info) = cx.annotations.get(name) else {
        return Ok(());
    };
    if let Some(t) = info.elem_type.and_then(dtype_of) {
        if t != v.dtype() {
            return Err(cx.invalid(
                n,
                format!(
                    "the model declares `{name}` {}, the import infers {}",
                    t.name(),
                    v.dtype().name()
                ),
            ));
        }
    }
    let Some(dims) = &info.dims else {
        return Ok(());
    };
    let fits = dims.len() == v.shape().len()
        && dims
            .iter()
            .zip(v.shape())
            .all(|(d, &s)| !matches!(d, Dim::Known(k) if *k as usize != s));
    if !fits {
        return Err(cx.invalid(
            n,
            format!(
                "the model declares `{name}` with dims [{}], the import infers {:?}",
                shown_dims(dims),
                v.shape()
            ),
        ));
    }
    Ok(())
}

/// E0122 for an operator no lowering knows.
fn unsupported_op(cx: &Cx, n: &Node) -> Diagnostic {
    let domain = if n.domain.is_empty() {
        "ai.onnx"
    } else {
        &n.domain
    };
    error(
        codes::ONNX_UNSUPPORTED_OP,
        cx.path,
        format!(
            "unsupported ONNX operator `{}` (domain `{domain}`, opset {}) at node `{}`",
            n.op_type, n.opset, n.name
        ),
    )
    .note("docs/import.md lists the operators `tapc import` lowers")
}

impl Cx<'_> {
    /// A diagnostic with `code` about node `n`.
    pub fn err(&self, code: Code, n: &Node, msg: impl std::fmt::Display) -> Diagnostic {
        error(
            code,
            self.path,
            format!("{} node `{}` (opset {}): {msg}", n.op_type, n.name, n.opset),
        )
    }
    /// E0123: a form of the operator the importer does not lower.
    pub fn unsupported(&self, n: &Node, msg: impl std::fmt::Display) -> Diagnostic {
        self.err(codes::ONNX_UNSUPPORTED_FORM, n, msg)
    }
    /// E0126: the node is not valid ONNX.
    pub fn invalid(&self, n: &Node, msg: impl std::fmt::Display) -> Diagnostic {
        self.err(codes::ONNX_INVALID, n, msg)
    }

    /// Input `i` of `n`; `None` when omitted.
    pub fn opt(&self, n: &Node, i: usize) -> R<Option<&Val>> {
        match n.input(i) {
            None => Ok(None),
            Some(name) => self.vals.get(name).map(Some).ok_or_else(|| {
                self.invalid(n, format!("input `{name}` is not defined before the node"))
            }),
        }
    }
    /// Input `i` of `n`, which must be present.
    pub fn val(&self, n: &Node, i: usize) -> R<&Val> {
        self.opt(n, i)?
            .ok_or_else(|| self.invalid(n, format!("input {i} is missing")))
    }
    /// Input `i` as a constant, `None` when omitted; E0123 when it is computed at run time.
    pub fn konst(&self, n: &Node, i: usize, what: &str) -> R<Option<&Tensor>> {
        match self.opt(n, i)? {
            None => Ok(None),
            Some(Val::Const(t)) => Ok(Some(t)),
            Some(Val::Data(_)) => Err(self.unsupported(
                n,
                format!(
                    "its {what} (input {i}) is computed at run time; TEG needs it known at import"
                ),
            )),
        }
    }
    /// Input `i` as constant integers, `None` when omitted.
    pub fn ints_in(&self, n: &Node, i: usize, what: &str) -> R<Option<Vec<i64>>> {
        Ok(self
            .konst(n, i, what)?
            .map(|t| super::elem::to_i64s(&t.data)))
    }
    /// Input `i` of `n` as a TEG value (a constant is materialized).
    pub fn data(&mut self, n: &Node, i: usize) -> R<D> {
        let name = n
            .input(i)
            .ok_or_else(|| self.invalid(n, format!("input {i} is missing")))?
            .to_string();
        if !self.vals.contains_key(&name) {
            return Err(self.invalid(n, format!("input `{name}` is not defined before the node")));
        }
        self.data_named(&name, &n.name)
    }

    /// The value named `name` as a TEG value; `user` is for the message when it is undefined.
    fn data_named(&mut self, name: &str, user: &str) -> R<D> {
        match self.vals.get(name) {
            Some(Val::Data(d)) => Ok(d.clone()),
            Some(Val::Const(t)) => {
                if let Some(d) = self.mat.get(name) {
                    return Ok(d.clone());
                }
                let t = t.clone();
                let d = self.materialize(name, &t);
                self.mat.insert(name.to_string(), d.clone());
                Ok(d)
            }
            None => Err(error(
                codes::ONNX_INVALID,
                self.path,
                format!("value `{name}` ({user}) is not computed by any node"),
            )),
        }
    }

    /// A constant as a TEG value: an initializer or a non-uniform constant is a weight source;
    /// a uniform computed constant is a `full` generator.
    pub fn materialize(&mut self, name: &str, t: &Tensor) -> D {
        let v = super::elem::to_f64s(&t.data);
        let uniform = v
            .first()
            .filter(|f| f.is_finite() && v.iter().all(|x| x.to_bits() == f.to_bits()));
        if let (false, Some(&f)) = (self.inits.contains(name), uniform) {
            if t.dtype().is_float() || t.dtype() == DType::Bool || f.abs() < 9.0e15 {
                let rhs = format!("full {}", emit::lit(f, t.dtype()).replace(['(', ')'], ""));
                return self.e.stmt(name, &rhs, t.dtype(), t.shape.clone());
            }
        }
        let src = self.e.fresh(name);
        self.e.weights.push((src.clone(), t.clone()));
        let d = D {
            name: src.clone(),
            dtype: t.dtype(),
            shape: t.shape.clone(),
        };
        self.e.line(format!(
            "  %{src} = source @{src} : {}",
            emit::ty(d.dtype, &d.shape)
        ));
        d
    }

    /// `d` broadcast to `shape` (numpy rules; a view), or `d` when it has that shape.
    pub fn broadcast(&mut self, d: &D, shape: &[usize], hint: &str) -> D {
        if d.shape == shape {
            return d.clone();
        }
        let rhs = format!("broadcast {} {}", d.v(), emit::list(shape));
        self.e.stmt(hint, &rhs, d.dtype, shape.to_vec())
    }

    /// `d` reshaped to `shape` (a view), or `d` when it has that shape.
    pub fn reshape(&mut self, d: &D, shape: &[usize], hint: &str) -> D {
        if d.shape == shape {
            return d.clone();
        }
        let rhs = format!("reshape {} {}", d.v(), emit::list(shape));
        self.e.stmt(hint, &rhs, d.dtype, shape.to_vec())
    }

    /// `d` seen as `[outer, D, inner]` around its axis `a` (a view).
    pub fn around_axis(&mut self, d: &D, a: usize, hint: &str) -> D {
        let outer = d.shape[..a].iter().product();
        let inner = d.shape[a + 1..].iter().product();
        self.reshape(d, &[outer, d.shape[a], inner], hint)
    }

    /// `d` transposed by `perm` (a view), or `d` for the identity.
    pub fn transpose(&mut self, d: &D, perm: &[usize], hint: &str) -> D {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return d.clone();
        }
        let shape = perm.iter().map(|&p| d.shape[p]).collect();
        let rhs = format!("transpose {} {}", d.v(), emit::list(perm));
        self.e.stmt(hint, &rhs, d.dtype, shape)
    }
}

/// Attribute getters.
impl Node {
    pub fn int(&self, name: &str, default: i64) -> i64 {
        match self.attr(name) {
            Some(Attr::Int(v)) => *v,
            _ => default,
        }
    }
    pub fn float(&self, name: &str, default: f32) -> f32 {
        match self.attr(name) {
            Some(Attr::Float(v)) => *v,
            _ => default,
        }
    }
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        match self.attr(name) {
            Some(Attr::Floats(v)) => Some(v.clone()),
            _ => None,
        }
    }
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        match self.attr(name) {
            Some(Attr::Ints(v)) => Some(v.clone()),
            _ => None,
        }
    }
    pub fn string(&self, name: &str) -> Option<String> {
        match self.attr(name) {
            Some(Attr::Str(v)) => Some(v.clone()),
            _ => None,
        }
    }
}

/// Numpy broadcasting of two shapes (`None` when they do not broadcast).
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() >= r {
            s[i + s.len() - r]
        } else {
            1
        }
    };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// A possibly negative axis of a rank-`r` value made non-negative (`None` when out of range).
pub fn axis(a: i64, r: usize) -> Option<usize> {
    let a = if a < 0 { a + r as i64 } else { a };
    (0..r as i64).contains(&a).then_some(a as usize)
}
