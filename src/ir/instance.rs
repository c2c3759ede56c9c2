//! An op bound to one apply: symbols and ranks bound from the argument types, the kernel lowered
//! to concrete affine accesses over numbered index variables, and the derived signature.
//!
//! The instance is what the verifier checks, what the interpreter runs and what later passes
//! shard; one derivation serves all of them. Errors come back as [`InstanceError`]s that the
//! verifier turns into diagnostics.

use super::kernel::{floor_div, floor_mod, BinOp, Func, Reduction, UnOp};
use super::types::{Literal, TensorType};
use crate::diag::Span;
use tapc_runtime::DType;

/// An affine function of the index variables: `Σ coeff·var + constant`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Affine {
    pub terms: Vec<(usize, i64)>,
    pub constant: i64,
}

impl Affine {
    pub fn constant(c: i64) -> Affine {
        Affine {
            terms: vec![],
            constant: c,
        }
    }
    pub fn var(v: usize) -> Affine {
        Affine {
            terms: vec![(v, 1)],
            constant: 0,
        }
    }
    pub fn coeff(&self, v: usize) -> i64 {
        self.terms.iter().filter(|t| t.0 == v).map(|t| t.1).sum()
    }
    pub fn is_constant(&self) -> bool {
        self.terms.iter().all(|t| t.1 == 0)
    }
    pub fn add(mut self, other: &Affine, sign: i64) -> Option<Affine> {
        for &(v, c) in &other.terms {
            match self.terms.iter_mut().find(|t| t.0 == v) {
                Some(t) => t.1 = t.1.checked_add(c.checked_mul(sign)?)?,
                None => self.terms.push((v, c.checked_mul(sign)?)),
            }
        }
        self.terms.retain(|t| t.1 != 0);
        self.constant = self
            .constant
            .checked_add(other.constant.checked_mul(sign)?)?;
        Some(self)
    }
    pub fn scale(mut self, k: i64) -> Option<Affine> {
        for t in &mut self.terms {
            t.1 = t.1.checked_mul(k)?;
        }
        self.terms.retain(|t| t.1 != 0);
        self.constant = self.constant.checked_mul(k)?;
        Some(self)
    }
    /// The inclusive range `[min, max]` over a box of variable ranges (half-open `[lo, hi)`).
    /// Saturates at the i64 range, so a huge index is reported as out of bounds, never wraps.
    pub fn range(&self, boxes: &[(i64, i64)]) -> (i64, i64) {
        let (mut lo, mut hi) = (self.constant as i128, self.constant as i128);
        for &(v, c) in &self.terms {
            let (a, b) = boxes[v];
            let (x, y) = (c as i128 * a as i128, c as i128 * (b as i128 - 1));
            lo += x.min(y);
            hi += x.max(y);
        }
        (saturate(lo), saturate(hi))
    }
    pub fn eval(&self, env: &[i64]) -> i64 {
        self.terms
            .iter()
            .fold(self.constant, |acc, &(v, c)| acc + c * env[v])
    }
}

fn saturate(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// One port's index projection: the block of the port touched by index point `p` starts at
/// `matrix · p + offset` and has shape `shape`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Projection {
    pub matrix: Vec<Vec<i64>>,
    pub offset: Vec<i64>,
    pub shape: Vec<i64>,
}

impl Projection {
    pub fn start(&self, point: &[i64]) -> Vec<i64> {
        self.matrix
            .iter()
            .zip(&self.offset)
            .map(|(row, o)| row.iter().zip(point).map(|(a, p)| a * p).sum::<i64>() + o)
            .collect()
    }

    /// The image of the index box `[lo, hi)` per dim: the half-open range of every dimension of
    /// the port that the box touches (every corner of the box is considered, so any signs work).
    pub fn image(&self, range: &[(i64, i64)]) -> Vec<(i64, i64)> {
        self.matrix
            .iter()
            .zip(&self.offset)
            .zip(&self.shape)
            .map(|((row, o), s)| {
                let (mut lo, mut hi) = (*o as i128, *o as i128);
                for (a, &(l, h)) in row.iter().zip(range) {
                    let (x, y) = (*a as i128 * l as i128, *a as i128 * (h as i128 - 1));
                    lo += x.min(y);
                    hi += x.max(y);
                }
                (saturate(lo), saturate(hi + *s as i128))
            })
            .collect()
    }
}

/// A port's name and projection.
#[derive(Clone, Debug, PartialEq)]
pub struct PortSig {
    pub name: String,
    pub ty: TensorType,
    pub projection: Projection,
}

/// The signature of an instance: index space, one projection per port, costs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Signature {
    pub index: Vec<(String, i64)>,
    pub inputs: Vec<PortSig>,
    pub outputs: Vec<PortSig>,
    /// Marginal cost per step along each index dimension, per resource (e.g. `flops`).
    pub marginal: Vec<(String, Vec<(String, i64)>)>,
    pub flops_per_point: f64,
    pub bytes_per_point: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Var {
    pub name: String,
    /// Half-open range of the variable: the shard's sub-range for parallel variables.
    pub range: (i64, i64),
}

impl Var {
    /// How many values the variable takes.
    pub fn extent(&self) -> i64 {
        self.range.1 - self.range.0
    }
}

/// A value of the interpreter's scalar domain. Floats are held as f64 and rounded to the
/// dtype after every operation, so f32 arithmetic is exactly IEEE f32 arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    F(f64),
    I(i64),
    B(bool),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Src {
    Input(usize),
    Temp(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct CExpr {
    pub kind: CKind,
    pub dtype: DType,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CKind {
    Const(Scalar),
    /// An index variable's value.
    Var(usize),
    /// `index[d]` is the affine index of dimension `d`; `texts` keep each index's span and source form for messages.
    Load {
        src: Src,
        index: Vec<Affine>,
        texts: Vec<(Span, String)>,
    },
    /// A load whose indices may be gathered (see [`GatherLoad`]).
    Gather(Box<GatherLoad>),
    Reduce {
        kind: Reduction,
        vars: Vec<usize>,
        body: Box<CExpr>,
    },
    Call(Func, Vec<CExpr>),
    Unary(UnOp, Box<CExpr>),
    Binary(BinOp, Box<CExpr>, Box<CExpr>),
}

/// A load of input `input` at coordinate `index[d]` in each dimension `d` without an entry in
/// `by`, and `by[d] + index[d]` (a negative coordinate wrapped once by the dimension's size,
/// then checked against it at run time) in each dimension with one. Every `by` value is an
/// integer load of another input at affine indices.
#[derive(Clone, Debug, PartialEq)]
pub struct GatherLoad {
    pub input: usize,
    pub index: Vec<Affine>,
    pub by: Vec<Option<CExpr>>,
    /// The access as written, and each index's span and text, for messages.
    pub text: String,
    pub texts: Vec<(Span, String)>,
}

impl GatherLoad {
    /// The gathered dimensions with their index loads.
    pub fn gathered(&self) -> impl Iterator<Item = (usize, &CExpr)> {
        self.by
            .iter()
            .enumerate()
            .filter_map(|(d, b)| b.as_ref().map(|b| (d, b)))
    }

    /// The coordinate of dimension `d` of size `size` for the loaded index `v`, or `None` when
    /// it is out of range (docs/teg.md §12).
    pub fn coordinate(&self, d: usize, v: i64, env: &[i64], size: i64) -> Option<i64> {
        wrap_index(v.checked_add(self.index[d].eval(env))?, size)
    }

    /// The message of an out-of-range gathered index (the interpreter's and the runtime's).
    pub fn fault(&self, input: &str, d: usize, value: i64, size: i64) -> String {
        tapc_runtime::fault::gather_message(&self.text, input, d, &self.texts[d].1, value, size)
    }
}

/// A gathered coordinate `c` of a dimension of `size`: negative ones wrap once (numpy).
pub fn wrap_index(c: i64, size: i64) -> Option<i64> {
    let c = if c < 0 { c.checked_add(size)? } else { c };
    (0..size).contains(&c).then_some(c)
}

#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Output(usize),
    Temp(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct CStmt {
    pub target: Target,
    /// The parallel variables indexing the target, in its dimension order.
    pub vars: Vec<usize>,
    pub value: CExpr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Temp {
    pub name: String,
    pub dtype: DType,
    pub vars: Vec<usize>,
}

/// An op bound to the argument types of one apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub inputs: Vec<TensorType>,
    pub outputs: Vec<TensorType>,
    /// Index variables: the `parallel` first ones form the op's index space.
    pub vars: Vec<Var>,
    pub parallel: usize,
    pub temps: Vec<Temp>,
    /// The lowered kernel; `None` for an extern op without a reference kernel.
    pub stmts: Option<Vec<CStmt>>,
    /// Per input: the global coordinate of the input's element 0 (non-zero only in shards).
    pub origins: Vec<Vec<i64>>,
    pub signature: Signature,
    /// Whether the apply carried an explicit sub-range (a shard).
    pub sharded: bool,
}

impl Instance {
    pub fn range(&self) -> Vec<(i64, i64)> {
        self.vars[..self.parallel].iter().map(|v| v.range).collect()
    }
    pub fn points(&self) -> i64 {
        self.vars[..self.parallel]
            .iter()
            .fold(1i64, |acc, v| acc.saturating_mul(v.extent()))
    }
    /// The extent of variable `v`.
    pub fn extent(&self, v: usize) -> i64 {
        self.vars[v].extent()
    }
}

/// Calls `f` on every load in `e`.
pub fn visit_loads(e: &CExpr, f: &mut dyn FnMut(Src, &[Affine])) {
    walk(
        e,
        &mut |e, _| {
            if let CKind::Load { src, index, .. } = &e.kind {
                f(src.clone(), index);
            }
        },
        &mut vec![],
    );
}

/// Pre-order walk of `e` that also passes the reduction variables enclosing each node (`red`
/// holds those around `e` itself).
pub fn walk(e: &CExpr, f: &mut dyn FnMut(&CExpr, &[usize]), red: &mut Vec<usize>) {
    f(e, red);
    match &e.kind {
        CKind::Reduce { vars, body, .. } => {
            let n = red.len();
            red.extend(vars);
            walk(body, f, red);
            red.truncate(n);
        }
        CKind::Call(_, args) => args.iter().for_each(|a| walk(a, f, red)),
        CKind::Gather(g) => g.gathered().for_each(|(_, a)| walk(a, f, red)),
        CKind::Unary(_, a) => walk(a, f, red),
        CKind::Binary(_, a, b) => {
            walk(a, f, red);
            walk(b, f, red);
        }
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } => {}
    }
}

// Scalar helpers live here so the interpreter and constant folding share one definition.
/// An attribute constant as a scalar of the interpreter's domain (its own kind: the consumer
/// casts it to the dtype).
impl From<Literal> for Scalar {
    fn from(l: Literal) -> Scalar {
        match l {
            Literal::Int(v) => Scalar::I(v),
            Literal::Float(v) => Scalar::F(v),
            Literal::Bool(b) => Scalar::B(b),
        }
    }
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::F(v) => v,
            Scalar::I(v) => v as f64,
            Scalar::B(b) => f64::from(u8::from(b)),
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::F(v) => v as i64,
            Scalar::I(v) => v,
            Scalar::B(b) => i64::from(b),
        }
    }
    pub fn as_bool(self) -> bool {
        match self {
            Scalar::F(v) => v != 0.0,
            Scalar::I(v) => v != 0,
            Scalar::B(b) => b,
        }
    }
    /// Converts to `dtype` with the semantics of a cast (`f32(x)`) from a signed integer, a
    /// float or a bool: floats round to nearest even, float to int truncates toward zero and
    /// saturates (NaN is 0), ints wrap. A `u64` value is held as its bits (`Scalar::I`), so
    /// converting one uses [`Scalar::cast_from`].
    pub fn cast(self, dtype: DType) -> Scalar {
        match dtype {
            DType::Bool => Scalar::B(self.as_bool()),
            d if d.is_float() => Scalar::F(round_float(self.as_f64(), d)),
            d => Scalar::I(match self {
                Scalar::F(v) => saturate_int(v, d),
                other => wrap_int(other.as_i64(), d),
            }),
        }
    }

    /// Whether this literal value keeps its meaning as a `d`: an integer within the range of
    /// an integer dtype, a finite number that stays finite in a float dtype (docs/teg.md §5.1).
    pub fn fits(self, d: DType) -> bool {
        match (self, d.int_range()) {
            (Scalar::I(v), Some((lo, hi))) => (lo..=hi).contains(&(v as i128)),
            (Scalar::F(v), _) if d.is_float() => !v.is_finite() || round_float(v, d).is_finite(),
            (Scalar::I(v), _) if d.is_float() => round_float(v as f64, d).is_finite(),
            _ => true,
        }
    }

    /// [`Scalar::cast`] of a value of dtype `from` (the only difference: a `u64` converts
    /// to a float by its unsigned value, through f64 like every integer).
    pub fn cast_from(self, from: DType, to: DType) -> Scalar {
        match self {
            Scalar::I(v) if from == DType::U64 && to.is_float() => {
                Scalar::F(round_float(v as u64 as f64, to))
            }
            s => s.cast(to),
        }
    }
}

/// `v` rounded to the float dtype `d` (to nearest, ties to even). f16 and bf16 are rounded
/// once from the f64 value (through f32 rounded to odd, which is then exact to round again).
pub fn round_float(v: f64, d: DType) -> f64 {
    match d {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f32(f32_round_odd(v)).to_f64(),
        DType::BF16 => half::bf16::from_f32(f32_round_odd(v)).to_f64(),
        _ => v,
    }
}

/// `v` rounded to f32 toward zero with the last bit set when inexact ("round to odd"): it keeps
/// enough to round again to 16 bits as if rounding `v` directly (f32 has 24 ≥ 11 + 2 bits).
pub fn f32_round_odd(v: f64) -> f32 {
    let r = v as f32;
    if r.is_nan() || r as f64 == v {
        return r;
    }
    let mut bits = r.to_bits();
    if (r as f64).abs() > v.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// `v` wrapped (two's complement) to the integer dtype `d`, as a scalar integer (a `u64` as
/// its bits).
pub fn wrap_int(v: i64, d: DType) -> i64 {
    match d {
        DType::I8 => v as i8 as i64,
        DType::U8 => v as u8 as i64,
        DType::I16 => v as i16 as i64,
        DType::U16 => v as u16 as i64,
        DType::I32 => v as i32 as i64,
        DType::U32 => v as u32 as i64,
        _ => v,
    }
}

/// `v` truncated toward zero and saturated to the integer dtype `d` (NaN is 0), as Rust's `as`.
pub fn saturate_int(v: f64, d: DType) -> i64 {
    match (d, d.int_range()) {
        (DType::U64, _) => v as u64 as i64,
        // Every bound of a narrower dtype is exact in f64; `clamp` keeps NaN, `as` makes it 0.
        (_, Some((lo, hi))) if d.bits() < 64 => v.clamp(lo as f64, hi as f64) as i64,
        _ => v as i64,
    }
}

/// Integer arithmetic with the TEG semantics: wrapping, floor division, `x / 0 == 0`.
pub fn int_binop(op: BinOp, a: i64, b: i64) -> i64 {
    match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => floor_div(a, b).unwrap_or(if b == 0 { 0 } else { a.wrapping_neg() }),
        BinOp::Rem => floor_mod(a, b).unwrap_or(0),
        _ => unreachable!("comparisons and logic are not arithmetic"),
    }
}

/// Why an integer expression is not an affine function of the index variables.
pub enum AffineError {
    Unknown(String, Span),
    NonAffine(&'static str),
}

/// Converts `e` to an affine function; `lookup` resolves names to variables or constants.
pub fn affine_of(
    e: &super::kernel::IExpr,
    lookup: &dyn Fn(&str) -> Option<Affine>,
) -> Result<Affine, AffineError> {
    use super::kernel::{IExpr, IOp};
    let overflow = AffineError::NonAffine("divides by zero or overflows");
    match e {
        IExpr::Int(v, _) => Ok(Affine::constant(*v)),
        IExpr::Name(n, s) => lookup(n).ok_or_else(|| AffineError::Unknown(n.clone(), *s)),
        IExpr::Neg(a, _) => affine_of(a, lookup)?.scale(-1).ok_or(overflow),
        IExpr::Bin(op, a, b, _) => {
            let (x, y) = (affine_of(a, lookup)?, affine_of(b, lookup)?);
            match op {
                IOp::Add => x.add(&y, 1),
                IOp::Sub => x.add(&y, -1),
                IOp::Mul if y.is_constant() => x.scale(y.constant),
                IOp::Mul if x.is_constant() => y.scale(x.constant),
                IOp::Mul => return Err(AffineError::NonAffine("a product of index variables")),
                IOp::Div | IOp::Rem if x.is_constant() && y.is_constant() => {
                    op.apply(x.constant, y.constant).map(Affine::constant)
                }
                IOp::Div | IOp::Rem => {
                    return Err(AffineError::NonAffine("division of an index variable"))
                }
            }
            .ok_or(overflow)
        }
    }
}
