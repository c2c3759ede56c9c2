//! The reference interpreter: the definition of what a graph means.
//!
//! It favours obvious correctness over speed: every value is materialized, selectors gather
//! element by element, kernels run as plain loop nests over their index space. f32 arithmetic
//! is computed in f64 and rounded after every operation, which is exactly IEEE f32 arithmetic
//! for + - * / and sqrt; reductions accumulate in index order.

mod kernel;
mod scalar;
mod views;

use crate::diag::{codes, Diagnostic};
use crate::ir::graph::{GenKind, Graph, NodeKind};
use crate::ir::instance::Scalar;
use crate::ir::{DType, Literal, Module, TensorType};
use crate::verify::GraphFacts;
use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

/// A materialized value: type plus elements in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub ty: TensorType,
    pub data: Vec<Scalar>,
}

/// Runs graph `g` of `m` with `sources` bound by source name; returns every sink by name,
/// in the order the sinks appear.
pub fn run(
    m: &Module,
    g: &Graph,
    facts: &GraphFacts,
    sources: &HashMap<String, Tensor>,
) -> Result<Vec<(String, Tensor)>, Diagnostic> {
    let mut vals: Vec<Option<Value>> = vec![None; g.values.len()];
    let mut sinks = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let get = |v: crate::ir::ValueId| {
            vals[v.index()]
                .as_ref()
                .expect("verified graphs define values before use")
        };
        let out: Vec<Value> = match &n.kind {
            NodeKind::Source { name, ty } => vec![bind_source(name, ty, sources, n.span)?],
            NodeKind::Generator(gen) => vec![generate(&gen.kind, &gen.ty)],
            NodeKind::View(v) => {
                let args: Vec<&Value> = v.args().into_iter().map(get).collect();
                let ty = g.ty(n.results[0]).expect("verified").clone();
                vec![views::eval(v, &args, ty)]
            }
            NodeKind::Apply(a) => {
                let inst = &facts.instances[&i];
                let args: Vec<&Value> = a.args.iter().map(|v| get(*v)).collect();
                kernel::eval_instance(inst, &args).ok_or_else(|| {
                    Diagnostic::error(
                        codes::NO_KERNEL,
                        format!("`@{}` is an extern op without a reference kernel", a.op),
                    )
                    .primary(a.op_span, "cannot be interpreted")
                    .note(
                        "add kernel statements to the extern op so the interpreter can evaluate it",
                    )
                })?
            }
            NodeKind::Sink { name, value } => {
                sinks.push((name.clone(), to_tensor(get(*value))));
                vec![]
            }
            NodeKind::Sequence { .. } | NodeKind::Pin { .. } => vec![],
        };
        let _ = m;
        for (v, val) in n.results.iter().zip(out) {
            vals[v.index()] = Some(val);
        }
    }
    Ok(sinks)
}

fn bind_source(
    name: &str,
    ty: &TensorType,
    sources: &HashMap<String, Tensor>,
    span: crate::diag::Span,
) -> Result<Value, Diagnostic> {
    let t = sources.get(name).ok_or_else(|| {
        Diagnostic::error(codes::RUNTIME, format!("no input bound for source @{name}"))
            .primary(span, "this source needs a tensor")
            .note(format!("pass `--input {name}=FILE.npy`"))
    })?;
    let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    if t.dtype() != ty.dtype || shape != ty.shape {
        return Err(Diagnostic::error(
            codes::RUNTIME,
            format!(
                "input for source @{name}: expected {ty}, found {}",
                t.shape_string()
            ),
        )
        .primary(span, "declared here"));
    }
    Ok(from_tensor(t))
}

pub fn from_tensor(t: &Tensor) -> Value {
    let data = match &t.data {
        Data::F32(v) => v.iter().map(|&x| Scalar::F(x as f64)).collect(),
        Data::F64(v) => v.iter().map(|&x| Scalar::F(x)).collect(),
        Data::I32(v) => v.iter().map(|&x| Scalar::I(x as i64)).collect(),
        Data::I64(v) => v.iter().map(|&x| Scalar::I(x)).collect(),
        Data::Bool(v) => v.iter().map(|&x| Scalar::B(x)).collect(),
    };
    Value {
        ty: TensorType::new(t.dtype(), t.shape.iter().map(|&d| d as i64).collect()),
        data,
    }
}

pub fn to_tensor(v: &Value) -> Tensor {
    let data = match v.ty.dtype {
        DType::F32 => Data::F32(v.data.iter().map(|s| s.as_f64() as f32).collect()),
        DType::F64 => Data::F64(v.data.iter().map(|s| s.as_f64()).collect()),
        DType::I32 => Data::I32(v.data.iter().map(|s| s.as_i64() as i32).collect()),
        DType::I64 => Data::I64(v.data.iter().map(|s| s.as_i64()).collect()),
        DType::Bool => Data::Bool(v.data.iter().map(|s| s.as_bool()).collect()),
    };
    Tensor {
        shape: v.ty.shape.iter().map(|&d| d as usize).collect(),
        data,
    }
}

/// Row-major coordinates of every element of `shape`, in order.
pub(crate) fn for_each_coord(shape: &[i64], mut f: impl FnMut(&[i64])) {
    if shape.iter().any(|&d| d <= 0) {
        return;
    }
    let mut c = vec![0i64; shape.len()];
    loop {
        f(&c);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            c[d] += 1;
            if c[d] < shape[d] {
                break;
            }
            c[d] = 0;
        }
    }
}

fn generate(kind: &GenKind, ty: &TensorType) -> Value {
    let mut data = Vec::with_capacity(ty.elements().max(0) as usize);
    let lit = |l: Literal| match l {
        Literal::Int(v) => Scalar::I(v),
        Literal::Float(v) => Scalar::F(v),
        Literal::Bool(b) => Scalar::B(b),
    };
    for_each_coord(&ty.shape, |c| {
        let s = match *kind {
            GenKind::Zeros => Scalar::I(0),
            GenKind::Ones => Scalar::I(1),
            GenKind::Full(l) => lit(l),
            GenKind::Iota { axis } => Scalar::I(c[axis]),
            GenKind::Rand { seed } => scalar::random(seed, c, ty.dtype),
        };
        data.push(s.cast(ty.dtype));
    });
    Value {
        ty: ty.clone(),
        data,
    }
}
