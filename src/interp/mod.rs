//! The reference interpreter: the definition of what a graph means.
//!
//! It favours obvious correctness over speed: every value is materialized, selectors gather
//! element by element, kernels run as plain loop nests over their index space. f32 arithmetic
//! is computed in f64 and rounded after every operation, which is exactly IEEE f32 arithmetic
//! for + - * / and sqrt; reductions accumulate in index order.

mod kernel;
mod scalar;
mod scatter;
mod store;
mod views;

use crate::diag::{codes, Diagnostic, Span};
use crate::ir::graph::{GenKind, Graph, NodeKind};
use crate::ir::instance::Scalar;
use crate::ir::{Module, TensorType, ValueId};
use crate::verify::GraphFacts;
use std::collections::HashMap;
pub use store::Value;
use store::{for_each_coord, NoMemory};
use tapc_runtime::Tensor;

/// Runs graph `g` of `m` with `sources` bound by source name; returns every sink by name,
/// in the order the sinks appear. Each value is freed after its last use, and a buffer that
/// cannot be allocated is an E0102 diagnostic on the node that needed it.
pub fn run(
    m: &Module,
    g: &Graph,
    facts: &GraphFacts,
    sources: &HashMap<String, Tensor>,
) -> Result<Vec<(String, Tensor)>, Diagnostic> {
    let _ = m;
    let last_use = last_uses(g);
    let mut vals: Vec<Option<Value>> = vec![None; g.values.len()];
    let mut sinks = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let oom = |e: NoMemory, what: String| out_of_memory(e, what, n.span);
        let value_name = || {
            n.results
                .first()
                .map_or("this node".into(), |v| format!("`%{}`", g.value(*v).name))
        };
        let out: Vec<Value> = match &n.kind {
            NodeKind::Source { name, ty, .. } => vec![bind_source(name, ty, sources, n.span)?],
            NodeKind::Generator(gen) => {
                vec![generate(&gen.kind, &gen.ty).map_err(|e| oom(e, value_name()))?]
            }
            NodeKind::View(v) => {
                let args: Vec<&Value> = v.operands().iter().map(|&a| get(&vals, a)).collect();
                let ty = g.ty(n.results[0]).expect("verified").clone();
                vec![views::eval(v, &args, ty).map_err(|e| oom(e, value_name()))?]
            }
            NodeKind::Apply(a) => {
                let inst = &facts.instances[&i];
                let args: Vec<&Value> = a.args.iter().map(|v| get(&vals, *v)).collect();
                kernel::eval_instance(inst, &args)
                    .ok_or_else(|| {
                        Diagnostic::error(
                            codes::NO_KERNEL,
                            format!("`@{}` is an extern op without a reference kernel", a.op),
                        )
                        .primary(a.op_span, "cannot be interpreted")
                        .note(
                            "add kernel statements to the extern op so the interpreter can evaluate it",
                        )
                    })?
                    .map_err(|e| match e {
                        kernel::Failure::NoMemory(e) => {
                            oom(e, format!("the results of `@{}`", a.op))
                        }
                        kernel::Failure::Gather(msg) => {
                            let what = format!("apply `@{}` -> {}", a.op, value_name());
                            Diagnostic::error(codes::RUNTIME, format!("{what} failed: {msg}"))
                                .primary(n.span, "in this apply")
                        }
                    })?
            }
            NodeKind::Sink { name, value, .. } => {
                // The last use moves the value out instead of copying it.
                let data = if last_use[value.index()] == i {
                    vals[value.index()].take().expect("defined above").data
                } else {
                    store::try_clone(&get(&vals, *value).data)
                        .map_err(|e| oom(e, format!("sink @{name}")))?
                };
                let shape = g.ty(*value).expect("verified").shape.clone();
                let shape = shape.iter().map(|&d| d as usize).collect();
                sinks.push((name.clone(), Tensor { shape, data }));
                vec![]
            }
            NodeKind::Sequence { .. } | NodeKind::Pin { .. } => vec![],
            NodeKind::Grad { .. } => return Err(crate::diag::grad_not_lowered(n.span)),
            NodeKind::Scatter(sc) => {
                let [b, x, u] = sc.operands().map(|v| get(&vals, v));
                let text = crate::print::scatter_text(g, sc);
                let idx_name = format!("%{}", g.value(sc.idx).name);
                let r = scatter::eval(sc, &text, &idx_name, b, x, u).map_err(|e| match e {
                    scatter::Failure::NoMemory(e) => oom(e, value_name()),
                    scatter::Failure::Index(msg) => Diagnostic::error(
                        codes::RUNTIME,
                        format!("scatter -> {} failed: {msg}", value_name()),
                    )
                    .primary(n.span, "in this scatter"),
                })?;
                vec![r]
            }
        };
        for (v, val) in n.results.iter().zip(out) {
            vals[v.index()] = Some(val);
        }
        for v in n
            .kind
            .operands()
            .into_iter()
            .chain(n.results.iter().copied())
        {
            if last_use[v.index()] == i {
                vals[v.index()] = None;
            }
        }
    }
    Ok(sinks)
}

fn get(vals: &[Option<Value>], v: ValueId) -> &Value {
    vals[v.index()]
        .as_ref()
        .expect("verified graphs define values before use")
}

/// The last node that reads each value (its defining node if nothing does).
fn last_uses(g: &Graph) -> Vec<usize> {
    let mut last: Vec<usize> = g.values.iter().map(|v| v.node).collect();
    for (i, n) in g.nodes.iter().enumerate() {
        for v in n.kind.operands() {
            last[v.index()] = last[v.index()].max(i);
        }
    }
    last
}

fn out_of_memory(e: NoMemory, what: String, span: Span) -> Diagnostic {
    Diagnostic::error(
        codes::RUNTIME,
        format!(
            "out of memory: the interpreter cannot allocate {} bytes for {what}",
            e.bytes
        ),
    )
    .primary(span, "needs this buffer")
    .note("the interpreter keeps every live value in memory; the native backend (`tapc run` without `--interp`) plans and frees buffers")
}

fn bind_source(
    name: &str,
    ty: &TensorType,
    sources: &HashMap<String, Tensor>,
    span: Span,
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
    let data =
        store::try_clone(&t.data).map_err(|e| out_of_memory(e, format!("source @{name}"), span))?;
    Ok(Value {
        ty: ty.clone(),
        data,
    })
}

/// A tensor as an interpreter value (a copy of its data).
pub fn from_tensor(t: &Tensor) -> Value {
    Value {
        ty: TensorType::new(t.dtype(), t.shape.iter().map(|&d| d as i64).collect()),
        data: t.data.clone(),
    }
}

/// An interpreter value as a tensor (a copy of its data).
pub fn to_tensor(v: &Value) -> Tensor {
    Tensor {
        shape: v.ty.shape.iter().map(|&d| d as usize).collect(),
        data: v.data.clone(),
    }
}

fn generate(kind: &GenKind, ty: &TensorType) -> Result<Value, NoMemory> {
    let mut data = store::with_capacity(ty.dtype, ty.elements())?;
    for_each_coord(&ty.shape, |c| {
        let s = match *kind {
            GenKind::Zeros => Scalar::I(0),
            GenKind::Ones => Scalar::I(1),
            GenKind::Full(l) => Scalar::from(l),
            GenKind::Iota { axis } => Scalar::I(c[axis]),
            GenKind::Rand { seed } => scalar::random(seed, c, ty.dtype),
        };
        store::push(&mut data, s.cast(ty.dtype));
    });
    Ok(Value {
        ty: ty.clone(),
        data,
    })
}
