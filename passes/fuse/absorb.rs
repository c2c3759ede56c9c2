//! Producer→consumer composition of [`FKernel`]s ([`absorb`]): the producer's statements run
//! first in the fused kernel, and its output either becomes a temporary indexed by the
//! consumer's parallel variables ([`Absorb::Temp`]) or is substituted into the consumer's
//! loads of it ([`Absorb::Inline`]). Each source kernel is a [`Side`] (where its loads go in
//! the fused kernel), and a [`Mapper`] copies its expressions into the fused numbering.
//!
//! Inputs of the fused kernel are the producer's, then the consumer's except the absorbed
//! value; temporaries are the producer's, then its output (Temp mode), then the consumer's.

use super::affine::{as_var, shifted, substitute, Res};
use super::kernel::{affine_value, ident_ok, FInput, FKernel};
use crate::ir::graph::ValueId;
use crate::ir::instance::{Affine, CExpr, CKind, CStmt, Src, Target, Temp, Var};
use crate::ir::kernel::Func;
use std::collections::HashMap;
use tapc_runtime::DType;

/// How the producer's output enters the consumer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Absorb {
    /// The output statement becomes a temporary indexed by the consumer's variables
    /// (`sigma[d]`: the consumer variable indexing the producer output's dim `d`).
    Temp,
    /// The output expression replaces each load (producer temporaries, if any, become
    /// consumer temporaries through `sigma`).
    Inline,
}

/// Composes producer `p` (single output, bound to value `v`) into consumer `c`.
/// `sigma` maps the producer's output dims to consumer parallel variables; it is required when
/// the producer has temporaries or for [`Absorb::Temp`]. `temp_name` names the new temporary.
pub fn absorb(
    c: &FKernel,
    p: &FKernel,
    v: ValueId,
    mode: Absorb,
    sigma: Option<&[usize]>,
    temp_name: &str,
) -> Res<FKernel> {
    let out_stmt = producer_output(p, mode, sigma)?;
    let out_vars = &p.stmts[out_stmt].vars;
    let (producer, mut inputs) = producer_side(p, c);
    let lo: Vec<i64> = out_vars.iter().map(|&pv| p.vars[pv].range.0).collect();
    let mut consumer = consumer_side(c, v, &lo, &mut inputs)?;
    let mut parts = Parts {
        vars: c.vars.clone(),
        temps: Vec::new(),
        temp_names: Vec::new(),
        stmts: Vec::new(),
    };
    let par_img = parts.producer_images(p, c, out_vars, sigma)?;
    parts.producer(&producer, &par_img, out_stmt)?;
    if mode == Absorb::Temp {
        let s = sigma.ok_or("no placement for the temporary")?;
        let t = parts.output_temp(&producer, &par_img, &p.stmts[out_stmt], s, temp_name)?;
        for k in c.ports_of(v) {
            consumer.inputs[k] = InputImg::Src(Src::Temp(t));
        }
    }
    consumer.temps = (0..c.temps.len()).map(|t| t + parts.temps.len()).collect();
    let spec = InlineSpec {
        side: &producer,
        out: &p.stmts[out_stmt].value,
        out_vars,
    };
    parts.consumer(&consumer, &spec)?;
    let mut fk = FKernel {
        vars: parts.vars,
        parallel: c.parallel,
        temps: parts.temps,
        stmts: parts.stmts,
        inputs,
        outputs: c.outputs.clone(),
        temp_names: parts.temp_names,
        range: c.range.clone(),
    };
    fk.merge_ports();
    Ok(fk)
}

/// The statement assigning the producer's single output, once the producer is known to fit:
/// its output is indexed by all of its parallel variables, and `sigma` is given when needed.
fn producer_output(p: &FKernel, mode: Absorb, sigma: Option<&[usize]>) -> Res<usize> {
    if p.outputs.len() != 1 {
        return Err("the producer has several outputs");
    }
    let out_stmt = p
        .stmts
        .iter()
        .position(|s| s.target == Target::Output(0))
        .ok_or("the producer never assigns its output")?;
    let rank = p.stmts[out_stmt].vars.len();
    if rank != p.outputs[0].ty.rank() || rank != p.parallel {
        return Err("output rank");
    }
    if (mode == Absorb::Temp || !p.temps.is_empty()) && sigma.is_none() {
        return Err("the producer's variables do not map onto the consumer's");
    }
    Ok(out_stmt)
}

/// The producer as a side of the fused kernel, and the fused inputs so far (the producer's).
/// In an unsharded consumer, the producer's loads are rebased to element coordinates.
fn producer_side<'a>(p: &'a FKernel, c: &FKernel) -> (Side<'a>, Vec<FInput>) {
    let mut inputs: Vec<FInput> = p.inputs.clone();
    let offsets = p
        .inputs
        .iter()
        .map(|i| match c.range {
            Some(_) => vec![0; i.origin.len()],
            None => i.origin.iter().map(|o| -o).collect(),
        })
        .collect();
    if c.range.is_none() {
        for i in &mut inputs {
            i.origin = vec![0; i.origin.len()];
        }
    }
    let side = Side {
        k: p,
        inputs: (0..p.inputs.len())
            .map(|k| InputImg::Src(Src::Input(k)))
            .collect(),
        offsets,
        temps: (0..p.temps.len()).collect(),
    };
    (side, inputs)
}

/// The consumer as a side of the fused kernel: its loads of `v` (the producer's output, whose
/// variables start at `lo`) inline the producer, its other inputs are appended to `inputs`.
/// Its temporaries' numbers are set once the producer's are known.
fn consumer_side<'a>(
    c: &'a FKernel,
    v: ValueId,
    lo: &[i64],
    inputs: &mut Vec<FInput>,
) -> Res<Side<'a>> {
    let vports = c.ports_of(v);
    // A load `v[a]` reads the producer's output at its global coordinate `a - origin + lo`
    // (origin: the consumer's window on `v`; lo: the producer's range).
    let mut side = Side {
        k: c,
        inputs: Vec::with_capacity(c.inputs.len()),
        offsets: Vec::with_capacity(c.inputs.len()),
        temps: Vec::new(),
    };
    for (k, inp) in c.inputs.iter().enumerate() {
        if vports.contains(&k) {
            side.inputs.push(InputImg::Inline);
            if inp.origin.len() != lo.len() {
                return Err("output rank");
            }
            side.offsets
                .push(lo.iter().zip(&inp.origin).map(|(l, o)| l - o).collect());
        } else {
            side.inputs.push(InputImg::Src(Src::Input(inputs.len())));
            side.offsets.push(vec![0; inp.origin.len()]);
            inputs.push(inp.clone());
        }
    }
    Ok(side)
}

/// Where loads of a source input go.
enum InputImg {
    Src(Src),
    /// Substitute the producer's output expression.
    Inline,
}

/// One source kernel as the fused kernel sees it: where each of its input loads goes, the
/// offset added to each input's load indices, and the fused number of each of its temporaries.
struct Side<'a> {
    k: &'a FKernel,
    inputs: Vec<InputImg>,
    offsets: Vec<Vec<i64>>,
    temps: Vec<usize>,
}

/// The producer's output expression, substituted where the consumer loads it.
struct InlineSpec<'a> {
    side: &'a Side<'a>,
    out: &'a CExpr,
    out_vars: &'a [usize],
}

/// The fused kernel's variables, temporaries and statements, as the composition adds them.
struct Parts {
    vars: Vec<Var>,
    temps: Vec<Temp>,
    temp_names: Vec<String>,
    stmts: Vec<CStmt>,
}

impl Parts {
    /// The images of the producer's parallel variables: the consumer variables `sigma` maps
    /// its output dims to (which must have the same ranges; a consumer variable without a
    /// printable name takes the producer's), or none without `sigma`.
    fn producer_images(
        &mut self,
        p: &FKernel,
        c: &FKernel,
        out_vars: &[usize],
        sigma: Option<&[usize]>,
    ) -> Res<Vec<Affine>> {
        let Some(s) = sigma else {
            return Ok(vec![]);
        };
        let mut img = vec![Affine::constant(0); p.parallel];
        for (d, &pv) in out_vars.iter().enumerate() {
            if s.get(d)
                .is_none_or(|&x| x >= c.parallel || c.vars[x].range != p.vars[pv].range)
            {
                return Err("a producer variable has no consumer variable with its range");
            }
            img[pv] = Affine::var(s[d]);
            let cv = &mut self.vars[s[d]];
            if !ident_ok(&cv.name) && ident_ok(&p.vars[pv].name) {
                cv.name = p.vars[pv].name.clone();
            }
        }
        Ok(img)
    }

    /// The producer's temporaries and the statements that assign them (all but its output
    /// statement `out_stmt`), over the consumer's variables through `par_img`.
    fn producer(&mut self, side: &Side, par_img: &[Affine], out_stmt: usize) -> Res<()> {
        let p = side.k;
        let over = |vars: &[usize]| -> Vec<usize> {
            vars.iter()
                .map(|&x| as_var(&par_img[x]).unwrap_or(x))
                .collect()
        };
        for (t, tmp) in p.temps.iter().enumerate() {
            self.temps.push(Temp {
                name: tmp.name.clone(),
                dtype: tmp.dtype,
                vars: over(&tmp.vars),
            });
            self.temp_names.push(p.temp_names[t].clone());
        }
        for (s, st) in p.stmts.iter().enumerate() {
            if s == out_stmt {
                continue;
            }
            let value =
                Mapper::new(side, par_img.to_vec(), &mut self.vars, None).copy(&st.value)?;
            let Target::Temp(t) = st.target else {
                return Err("unexpected producer output");
            };
            self.stmts.push(CStmt {
                target: Target::Temp(t),
                vars: over(&st.vars),
                value,
            });
        }
        Ok(())
    }

    /// The producer's output statement `st` as a new temporary named `name`, indexed by the
    /// consumer variables `sigma` gives its dims; its number.
    fn output_temp(
        &mut self,
        side: &Side,
        par_img: &[Affine],
        st: &CStmt,
        sigma: &[usize],
        name: &str,
    ) -> Res<usize> {
        let value = Mapper::new(side, par_img.to_vec(), &mut self.vars, None).copy(&st.value)?;
        let vars: Vec<usize> = (0..st.vars.len()).map(|d| sigma[d]).collect();
        let t = self.temps.len();
        self.temps.push(Temp {
            name: name.to_string(),
            dtype: value.dtype,
            vars: vars.clone(),
        });
        self.temp_names.push(name.to_string());
        self.stmts.push(CStmt {
            target: Target::Temp(t),
            vars,
            value,
        });
        Ok(t)
    }

    /// The consumer's temporaries and statements, its loads of the producer's output inlined
    /// as `spec` says (or read from the output temporary its side now names).
    fn consumer(&mut self, side: &Side, spec: &InlineSpec) -> Res<()> {
        let c = side.k;
        for (t, tmp) in c.temps.iter().enumerate() {
            self.temps.push(tmp.clone());
            self.temp_names.push(c.temp_names[t].clone());
        }
        let ident: Vec<Affine> = (0..c.parallel).map(Affine::var).collect();
        for st in &c.stmts {
            let mut m = Mapper::new(side, ident.clone(), &mut self.vars, Some(spec));
            // Consumer reduction variables keep their numbers (they are already in `vars`).
            m.red = (c.parallel..c.vars.len()).map(|x| (x, x)).collect();
            let value = m.copy(&st.value)?;
            self.stmts.push(CStmt {
                target: match st.target {
                    Target::Output(k) => Target::Output(k),
                    Target::Temp(t) => Target::Temp(side.temps[t]),
                },
                vars: st.vars.clone(),
                value,
            });
        }
        Ok(())
    }
}

/// Copies an expression of a source kernel into the fused kernel's numbering.
struct Mapper<'a, 'b> {
    side: &'a Side<'a>,
    /// Images of the source's parallel variables.
    par_img: Vec<Affine>,
    /// Source reduction variable → fused variable (allocated on first sight).
    red: HashMap<usize, usize>,
    vars: &'b mut Vec<Var>,
    inline: Option<&'a InlineSpec<'a>>,
}

impl<'a, 'b> Mapper<'a, 'b> {
    fn new(
        side: &'a Side<'a>,
        par_img: Vec<Affine>,
        vars: &'b mut Vec<Var>,
        inline: Option<&'a InlineSpec<'a>>,
    ) -> Mapper<'a, 'b> {
        Mapper {
            side,
            par_img,
            red: HashMap::new(),
            vars,
            inline,
        }
    }

    fn img(&self, v: usize) -> Res<Affine> {
        if v < self.par_img.len() {
            Ok(self.par_img[v].clone())
        } else {
            self.red
                .get(&v)
                .map(|&x| Affine::var(x))
                .ok_or("variable out of scope")
        }
    }

    fn index(&self, index: &[Affine]) -> Res<Vec<Affine>> {
        index
            .iter()
            .map(|a| substitute(a, &|v| self.img(v)))
            .collect()
    }

    fn copy(&mut self, e: &CExpr) -> Res<CExpr> {
        let kind = match &e.kind {
            CKind::Gather(_) => return Err("a kernel with a gathered index"),
            CKind::Const(s) => CKind::Const(*s),
            CKind::Var(v) => return self.var(*v, e.dtype),
            CKind::Load { src, index, .. } => {
                let index = self.index(index)?;
                match src {
                    Src::Temp(t) => CKind::Load {
                        src: Src::Temp(self.side.temps[*t]),
                        index,
                        texts: vec![],
                    },
                    Src::Input(k) => {
                        let index = shifted(&index, &self.side.offsets[*k], 1)?;
                        return self.load_input(*k, index, e.dtype);
                    }
                }
            }
            CKind::Reduce { kind, vars, body } => CKind::Reduce {
                kind: *kind,
                vars: vars.iter().map(|&v| self.reduction_var(v)).collect(),
                body: Box::new(self.copy(body)?),
            },
            CKind::Call(f, args) => {
                CKind::Call(*f, args.iter().map(|a| self.copy(a)).collect::<Res<_>>()?)
            }
            CKind::Unary(op, a) => CKind::Unary(*op, Box::new(self.copy(a)?)),
            CKind::Binary(op, a, b) => {
                CKind::Binary(*op, Box::new(self.copy(a)?), Box::new(self.copy(b)?))
            }
        };
        Ok(CExpr {
            kind,
            dtype: e.dtype,
        })
    }

    /// Variable `v` used as a value: its image, cast from an integer expression when it is
    /// not a single variable.
    fn var(&self, v: usize, dtype: DType) -> Res<CExpr> {
        let a = self.img(v)?;
        Ok(match as_var(&a) {
            Some(x) => CExpr {
                kind: CKind::Var(x),
                dtype,
            },
            None => CExpr {
                kind: CKind::Call(Func::Cast(dtype), vec![affine_value(&a)?]),
                dtype,
            },
        })
    }

    /// The fused number of source reduction variable `v`, allocated on first sight.
    fn reduction_var(&mut self, v: usize) -> usize {
        if let Some(&x) = self.red.get(&v) {
            return x;
        }
        self.vars.push(self.side.k.vars[v].clone());
        let x = self.vars.len() - 1;
        self.red.insert(v, x);
        x
    }

    /// A load of source input `k` at `index` (fused numbering, offset applied).
    fn load_input(&mut self, k: usize, index: Vec<Affine>, dtype: DType) -> Res<CExpr> {
        match &self.side.inputs[k] {
            InputImg::Src(s) => Ok(CExpr {
                kind: CKind::Load {
                    src: s.clone(),
                    index,
                    texts: vec![],
                },
                dtype,
            }),
            InputImg::Inline => {
                let spec = self.inline.ok_or("no producer to inline")?;
                self.inline_at(spec, &index, dtype)
            }
        }
    }

    /// The producer's output expression at the point `index` (already in fused numbering).
    fn inline_at(&mut self, spec: &InlineSpec, index: &[Affine], dtype: DType) -> Res<CExpr> {
        let mut par = vec![Affine::constant(0); spec.side.k.parallel];
        for (d, &pv) in spec.out_vars.iter().enumerate() {
            par[pv] = index.get(d).cloned().ok_or("index rank")?;
        }
        let e = Mapper::new(spec.side, par, &mut *self.vars, None).copy(spec.out)?;
        if e.dtype != dtype {
            return Err("dtype of the inlined expression");
        }
        Ok(e)
    }
}
