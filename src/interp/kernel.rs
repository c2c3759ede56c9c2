//! Evaluating one apply instance: a loop nest per kernel statement over its index box, with
//! every load linearized up front into one affine offset into its buffer.

use super::scalar;
use super::store::{self, NoMemory, Value};
use crate::ir::instance::{Affine, CExpr, CKind, CStmt, GatherLoad, Instance, Scalar, Src, Target};
use crate::ir::kernel::{Func, Reduction};
use crate::ir::DType;
use tapc_runtime::Data;

/// A kernel expression ready to run: constants typed, loads linearized.
enum P {
    Const(Scalar),
    Var(usize, DType),
    Load(Src, Affine),
    /// Input `k` at the affine offset plus, per gathered dimension, its stride times the
    /// coordinate of its loaded index; the access for messages.
    Gather(usize, Affine, Vec<Gathered>, Box<GatherLoad>),
    Reduce(Reduction, Vec<(usize, i64, i64)>, Box<P>, DType),
    /// `argmax` (true) or `argmin` over one variable `(v, lo, hi)`; the body's dtype.
    Arg(bool, (usize, i64, i64), Box<P>, DType),
    /// The dtype of the first argument, then the result's.
    Call(Func, Vec<P>, DType, DType),
    Unary(crate::ir::kernel::UnOp, Box<P>, DType),
    /// The operands' dtype.
    Binary(crate::ir::kernel::BinOp, Box<P>, Box<P>, DType),
}

/// A gathered dimension: `(dimension, stride, size, its index load)`.
type Gathered = (usize, i64, i64, P);

/// Why an apply could not be evaluated.
pub enum Failure {
    NoMemory(NoMemory),
    /// A gathered index out of range (the message).
    Gather(String),
}

impl From<NoMemory> for Failure {
    fn from(e: NoMemory) -> Failure {
        Failure::NoMemory(e)
    }
}

fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Offset = Σ stride·(index − base): one affine function of the index variables.
fn linearize(index: &[Affine], shape: &[i64], base: &[i64]) -> Affine {
    let st = strides(shape);
    let mut out = Affine::default();
    for ((a, s), b) in index.iter().zip(st).zip(base) {
        let shifted = a
            .clone()
            .add(&Affine::constant(*b), -1)
            .expect("verified offsets fit i64");
        out = out
            .add(&shifted.scale(s).expect("verified offsets fit i64"), 1)
            .expect("verified offsets fit i64");
    }
    out
}

struct Ctx<'a> {
    inst: &'a Instance,
    args: &'a [&'a Value],
}

impl Ctx<'_> {
    fn temp_geometry(&self, t: usize) -> (Vec<i64>, Vec<i64>) {
        let vars = &self.inst.temps[t].vars;
        let base = vars.iter().map(|&v| self.inst.vars[v].range.0).collect();
        let shape = vars.iter().map(|&v| self.inst.extent(v)).collect();
        (shape, base)
    }

    fn prepare(&self, e: &CExpr) -> P {
        match &e.kind {
            CKind::Const(s) => P::Const(s.cast(e.dtype)),
            CKind::Var(v) => P::Var(*v, e.dtype),
            CKind::Load { src, index, .. } => {
                let lin = match src {
                    Src::Input(k) => {
                        linearize(index, &self.args[*k].ty.shape, &self.inst.origins[*k])
                    }
                    Src::Temp(t) => {
                        let (shape, base) = self.temp_geometry(*t);
                        linearize(index, &shape, &base)
                    }
                };
                P::Load(src.clone(), lin)
            }
            CKind::Gather(g) => self.prepare_gather(g),
            CKind::Reduce { kind, vars, body } if kind.is_arg() => {
                let v = vars[0];
                let (lo, hi) = self.inst.vars[v].range;
                let max = *kind == Reduction::ArgMax;
                P::Arg(max, (v, lo, hi), Box::new(self.prepare(body)), body.dtype)
            }
            CKind::Reduce { kind, vars, body } => {
                let vs = vars
                    .iter()
                    .map(|&v| (v, self.inst.vars[v].range.0, self.inst.vars[v].range.1))
                    .collect();
                P::Reduce(*kind, vs, Box::new(self.prepare(body)), e.dtype)
            }
            CKind::Call(f, args) => {
                let a0 = args.first().map_or(e.dtype, |a| a.dtype);
                P::Call(
                    *f,
                    args.iter().map(|a| self.prepare(a)).collect(),
                    a0,
                    e.dtype,
                )
            }
            CKind::Unary(op, a) => P::Unary(*op, Box::new(self.prepare(a)), e.dtype),
            CKind::Binary(op, a, b) => P::Binary(
                *op,
                Box::new(self.prepare(a)),
                Box::new(self.prepare(b)),
                a.dtype,
            ),
        }
    }
}

impl Ctx<'_> {
    /// A gather: the affine dimensions linearized (a gathered one's affine part is its offset,
    /// added to the loaded index before it wraps), the gathered ones with their strides.
    fn prepare_gather(&self, g: &GatherLoad) -> P {
        let shape = &self.args[g.input].ty.shape;
        let st = strides(shape);
        let mut affine = g.index.clone();
        let mut dims = Vec::new();
        for (d, b) in g.gathered() {
            affine[d] = Affine::constant(self.inst.origins[g.input][d]);
            dims.push((d, st[d], shape[d], self.prepare(b)));
        }
        let lin = linearize(&affine, shape, &self.inst.origins[g.input]);
        P::Gather(g.input, lin, dims, Box::new(g.clone()))
    }
}

struct Env<'a> {
    vars: Vec<i64>,
    args: &'a [&'a Value],
    temps: &'a [Data],
    /// The first out-of-range gathered index met.
    fault: Option<String>,
    names: &'a [String],
}

/// A gather's element, or a zero with `env.fault` set when an index is out of range.
fn eval_gather(k: usize, lin: &Affine, dims: &[Gathered], g: &GatherLoad, env: &mut Env) -> Scalar {
    let mut off = lin.eval(&env.vars);
    for (d, stride, size, p) in dims {
        let v = eval_p(p, env).as_i64();
        match g.coordinate(*d, v, &env.vars, *size) {
            Some(c) => off += c * stride,
            None => {
                let at = v.saturating_add(g.index[*d].eval(&env.vars));
                if env.fault.is_none() {
                    env.fault = Some(g.fault(&env.names[k], *d, at, *size));
                }
                return Scalar::I(0).cast(env.args[k].ty.dtype);
            }
        }
    }
    env.args[k].get(off as usize)
}

fn eval_p(p: &P, env: &mut Env) -> Scalar {
    match p {
        P::Const(s) => *s,
        P::Var(v, d) => Scalar::I(env.vars[*v]).cast(*d),
        P::Load(src, lin) => {
            let off = lin.eval(&env.vars) as usize;
            match src {
                Src::Input(k) => env.args[*k].get(off),
                Src::Temp(t) => store::get(&env.temps[*t], off),
            }
        }
        P::Gather(k, lin, dims, g) => eval_gather(*k, lin, dims, g, env),
        P::Reduce(kind, vars, body, d) => {
            let mut acc = scalar::identity(*kind, *d);
            reduce_loop(vars, 0, env, &mut |env| {
                let x = eval_p(body, env);
                acc = scalar::combine(*kind, acc, x, *d);
            });
            acc
        }
        P::Arg(max, (v, lo, hi), body, d) => {
            let mut best = (scalar::identity(Reduction::Max, *d), *lo);
            if !*max {
                best.0 = scalar::identity(Reduction::Min, *d);
            }
            for i in *lo..*hi {
                env.vars[*v] = i;
                let x = eval_p(body, env);
                if scalar::arg_takes(x, best.0, *d, *max) {
                    best = (x, i);
                }
            }
            Scalar::I(best.1)
        }
        P::Call(f, args, a0, d) => {
            let vals: Vec<Scalar> = args.iter().map(|a| eval_p(a, env)).collect();
            scalar::call(*f, &vals, *a0, *d)
        }
        P::Unary(op, a, d) => {
            let x = eval_p(a, env);
            scalar::unary(*op, x, *d)
        }
        P::Binary(op, a, b, d) => {
            let x = eval_p(a, env);
            let y = eval_p(b, env);
            scalar::binary(*op, x, y, *d)
        }
    }
}

fn reduce_loop(vars: &[(usize, i64, i64)], k: usize, env: &mut Env, f: &mut dyn FnMut(&mut Env)) {
    if k == vars.len() {
        return f(env);
    }
    let (v, lo, hi) = vars[k];
    for i in lo..hi {
        env.vars[v] = i;
        reduce_loop(vars, k + 1, env, f);
    }
}

/// Runs the instance; `None` if it has no kernel (an extern op without a reference kernel).
pub fn eval_instance(inst: &Instance, args: &[&Value]) -> Option<Result<Vec<Value>, Failure>> {
    let stmts = inst.stmts.as_ref()?;
    Some(eval_stmts(inst, stmts, args))
}

fn eval_stmts(inst: &Instance, stmts: &[CStmt], args: &[&Value]) -> Result<Vec<Value>, Failure> {
    let cx = Ctx { inst, args };
    let names: Vec<String> = inst
        .signature
        .inputs
        .iter()
        .map(|p| p.name.clone())
        .collect();
    let mut outputs: Vec<Value> = Vec::with_capacity(inst.outputs.len());
    for t in &inst.outputs {
        outputs.push(Value {
            ty: t.clone(),
            data: store::with_capacity(t.dtype, 0)?,
        });
    }
    let mut temps: Vec<Data> = Vec::new();
    for st in stmts {
        let p = cx.prepare(&st.value);
        let box_: Vec<(usize, i64, i64)> = st
            .vars
            .iter()
            .map(|&v| (v, inst.vars[v].range.0, inst.vars[v].range.1))
            .collect();
        let size: i64 = box_.iter().map(|b| b.2 - b.1).product();
        let dtype = match st.target {
            Target::Output(k) => inst.outputs[k].dtype,
            Target::Temp(t) => inst.temps[t].dtype,
        };
        let mut out = store::with_capacity(dtype, size)?;
        {
            let mut env = Env {
                vars: vec![0; inst.vars.len()],
                args,
                temps: &temps,
                fault: None,
                names: &names,
            };
            reduce_loop(&box_, 0, &mut env, &mut |env| {
                store::push(&mut out, eval_p(&p, env))
            });
            if let Some(msg) = env.fault {
                return Err(Failure::Gather(msg));
            }
        }
        match st.target {
            Target::Output(k) => outputs[k].data = out,
            Target::Temp(_) => temps.push(out),
        }
    }
    Ok(outputs)
}
