//! Op definitions: ports with symbolic shapes, kernels (tensor comprehensions) and explicit
//! signatures (`extern op`), plus the [`Stub`] of an op with errors. Everything here is
//! symbolic; [`super::instance`] binds it to the concrete shapes of one apply.

use crate::diag::Span;
use tapc_runtime::DType;

#[derive(Clone, Debug, PartialEq)]
pub struct OpDef {
    pub name: String,
    pub params: Vec<String>,
    pub inputs: Vec<PortDef>,
    pub outputs: Vec<PortDef>,
    pub body: OpBody,
    pub span: Span,
    pub name_span: Span,
}

impl OpDef {
    pub fn is_extern(&self) -> bool {
        matches!(self.body, OpBody::Extern(_))
    }
    pub fn kernel(&self) -> Option<&[Stmt]> {
        match &self.body {
            OpBody::Kernel(k) => Some(k),
            OpBody::Extern(e) if !e.kernel.is_empty() => Some(&e.kernel),
            OpBody::Extern(_) => None,
        }
    }
    pub fn ports(&self) -> impl Iterator<Item = &PortDef> {
        self.inputs.iter().chain(&self.outputs)
    }
}

/// The known header of an op with errors (an error in its body, a port that did not lower, or
/// a header that did not parse): lowering makes one, and the verifier checks the op's applies
/// against what is known and types them from it.
#[derive(Clone, Debug)]
pub struct Stub {
    pub name: String,
    pub name_span: Span,
    /// `None` when the parameter list did not parse.
    pub params: Option<Vec<String>>,
    /// Per position, the port if it is known; `None` when not even their number is known.
    pub inputs: Option<Vec<Option<PortDef>>>,
    /// The same for the outputs.
    pub outputs: Option<Vec<Option<PortDef>>>,
    /// The op with its failed kernel statements poisoned ([`POISONED`]), when its header is
    /// sound and every statement kept its target: checked on its own like any op.
    pub kernel: Option<OpDef>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PortDef {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<Dim>,
    pub span: Span,
}

/// One dimension of a port shape: an integer expression, or `..S` (any number of dims).
#[derive(Clone, Debug, PartialEq)]
pub enum Dim {
    Expr(IExpr),
    Variadic(String, Span),
}

/// An integer expression over names (shape symbols, op parameters, index variables).
/// `/` is floor division and `%` its remainder, as in Python.
#[derive(Clone, Debug, PartialEq)]
pub enum IExpr {
    Int(i64, Span),
    Name(String, Span),
    Neg(Box<IExpr>, Span),
    Bin(IOp, Box<IExpr>, Box<IExpr>, Span),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl IExpr {
    pub fn span(&self) -> Span {
        match self {
            IExpr::Int(_, s) | IExpr::Name(_, s) | IExpr::Neg(_, s) | IExpr::Bin(_, _, _, s) => *s,
        }
    }

    /// Evaluates with every name looked up by `lookup`; `Err(name)` for the first unknown name,
    /// `Ok(None)` on division by zero or overflow.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<i64>) -> Result<Option<i64>, String> {
        Ok(match self {
            IExpr::Int(v, _) => Some(*v),
            IExpr::Name(n, _) => Some(lookup(n).ok_or_else(|| n.clone())?),
            IExpr::Neg(e, _) => e.eval(lookup)?.and_then(i64::checked_neg),
            IExpr::Bin(op, a, b, _) => {
                let (a, b) = (a.eval(lookup)?, b.eval(lookup)?);
                match (a, b) {
                    (Some(a), Some(b)) => op.apply(a, b),
                    _ => None,
                }
            }
        })
    }

    /// Calls `f` on every name in the expression.
    pub fn visit_names(&self, f: &mut dyn FnMut(&str, Span)) {
        match self {
            IExpr::Int(..) => {}
            IExpr::Name(n, s) => f(n, *s),
            IExpr::Neg(e, _) => e.visit_names(f),
            IExpr::Bin(_, a, b, _) => {
                a.visit_names(f);
                b.visit_names(f);
            }
        }
    }
}

impl IOp {
    pub fn apply(self, a: i64, b: i64) -> Option<i64> {
        match self {
            IOp::Add => a.checked_add(b),
            IOp::Sub => a.checked_sub(b),
            IOp::Mul => a.checked_mul(b),
            IOp::Div => floor_div(a, b),
            IOp::Rem => floor_mod(a, b),
        }
    }
    pub fn symbol(self) -> &'static str {
        match self {
            IOp::Add => "+",
            IOp::Sub => "-",
            IOp::Mul => "*",
            IOp::Div => "/",
            IOp::Rem => "%",
        }
    }
}

/// Python's `//`: rounds toward negative infinity; `None` on division by zero or overflow.
pub fn floor_div(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    Some(if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// Python's `%`: the result has the sign of the divisor; `None` only on division by zero.
/// Computed from the truncated remainder, never as `a - q·b`, which can overflow.
pub fn floor_mod(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    // `wrapping_rem` only wraps for `MIN % -1`, whose remainder is 0.
    let r = a.wrapping_rem(b);
    Some(if r != 0 && (r < 0) != (b < 0) {
        r + b
    } else {
        r
    })
}

#[derive(Clone, Debug, PartialEq)]
pub enum OpBody {
    Kernel(Vec<Stmt>),
    Extern(ExternSig),
}

/// An explicit signature: index space, one projection per port, marginal costs, and optionally
/// a reference kernel (so that the interpreter can evaluate the op).
#[derive(Clone, Debug, PartialEq)]
pub struct ExternSig {
    pub index: Vec<(String, IExpr)>,
    pub projections: Vec<ExternProjection>,
    pub costs: Vec<(String, Vec<(String, IExpr)>)>,
    pub kernel: Vec<Stmt>,
    pub index_span: Span,
    /// The first `cost { ... }` statement (empty when there is none).
    pub cost_span: Span,
}

/// The message when the projection of `port` (with `dims` dims) has not one start and one
/// shape entry per dim. Lowering checks it in every extern op (it needs no sizes); an apply
/// checks it again with the same message, so that the two are one diagnostic.
pub fn projection_entries_error(
    port: &str,
    dims: usize,
    start: usize,
    shape: usize,
) -> Option<String> {
    (start != dims || shape != dims).then(|| {
        format!("the projection of `{port}` must have {dims} entries (it has {start} start and {shape} shape entries)")
    })
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExternProjection {
    pub port: String,
    pub start: Vec<IExpr>,
    pub shape: Vec<IExpr>,
    pub span: Span,
}

/// `target[indices] = value`
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub target: String,
    pub indices: Vec<IndexVar>,
    pub value: KExpr,
    pub span: Span,
    pub target_span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum IndexVar {
    Var(String, Span),
    Variadic(String, Span),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Index {
    Expr(IExpr),
    Variadic(String, Span),
    /// A gathered index: an integer loaded from another input, plus an affine offset
    /// (`E[ids[b, s], h]`, `x[i, idx[i, j] + 1]`; docs/teg.md §5).
    Gather(Gather),
}

/// What an index may be (the note of E0031 wherever it is reported).
pub const INDEX_RULE: &str = "an index is built from integers, index variables, symbols, + and -, and * / % by constants; the only index computed from data is a gather: an integer loaded from another input plus an affine offset, `E[ids[i], j]`";

/// `tensor[indices] + offset` as the index of an access: the inner indices are affine.
#[derive(Clone, Debug, PartialEq)]
pub struct Gather {
    pub tensor: String,
    pub indices: Vec<IExpr>,
    /// `+ e` or `- e` after the load, as written (`k + ids[i]` is kept as `ids[i] + k`).
    pub offset: Option<(IOp, IExpr)>,
    pub span: Span,
    pub tensor_span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct KExpr {
    pub kind: KExprKind,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Max,
    Min,
    Prod,
    /// The sum divided by the number of points (floats only); the verifier lowers it to a `Sum`
    /// and a division, so no later stage sees it.
    Mean,
    /// The i64 index (the reduction variable's value) of the first greatest element, a NaN
    /// counting as greatest (numpy's `argmax`); one reduction variable.
    ArgMax,
    /// The same for the least element (numpy's `argmin`).
    ArgMin,
}

impl Reduction {
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Max => "max",
            Reduction::Min => "min",
            Reduction::Prod => "prod",
            Reduction::Mean => "mean",
            Reduction::ArgMax => "argmax",
            Reduction::ArgMin => "argmin",
        }
    }

    /// `argmax` or `argmin`: the result is an index, not a combination of the values.
    pub fn is_arg(self) -> bool {
        matches!(self, Reduction::ArgMax | Reduction::ArgMin)
    }
    pub fn from_name(s: &str) -> Option<Reduction> {
        Some(match s {
            "sum" => Reduction::Sum,
            "max" => Reduction::Max,
            "min" => Reduction::Min,
            "prod" => Reduction::Prod,
            "mean" => Reduction::Mean,
            "argmax" => Reduction::ArgMax,
            "argmin" => Reduction::ArgMin,
            _ => return None,
        })
    }
}

/// Scalar functions callable in kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Exp,
    Log,
    Sqrt,
    Tanh,
    Abs,
    Sin,
    Cos,
    Erf,
    Atan,
    Asin,
    Acos,
    Pow,
    Floor,
    Ceil,
    Max,
    Min,
    Select,
    /// The number of set bits of an integer's two's complement at its dtype's width.
    Popcount,
    Cast(DType),
}

impl Func {
    pub fn from_name(s: &str) -> Option<Func> {
        Some(match s {
            "exp" => Func::Exp,
            "log" => Func::Log,
            "sqrt" => Func::Sqrt,
            "tanh" => Func::Tanh,
            "abs" => Func::Abs,
            "sin" => Func::Sin,
            "cos" => Func::Cos,
            "erf" => Func::Erf,
            "atan" => Func::Atan,
            "asin" => Func::Asin,
            "acos" => Func::Acos,
            "pow" => Func::Pow,
            "floor" => Func::Floor,
            "ceil" => Func::Ceil,
            "max" => Func::Max,
            "min" => Func::Min,
            "select" => Func::Select,
            "popcount" => Func::Popcount,
            other => Func::Cast(DType::from_name(other)?),
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Func::Exp => "exp",
            Func::Log => "log",
            Func::Sqrt => "sqrt",
            Func::Tanh => "tanh",
            Func::Abs => "abs",
            Func::Sin => "sin",
            Func::Cos => "cos",
            Func::Erf => "erf",
            Func::Atan => "atan",
            Func::Asin => "asin",
            Func::Acos => "acos",
            Func::Pow => "pow",
            Func::Floor => "floor",
            Func::Ceil => "ceil",
            Func::Max => "max",
            Func::Min => "min",
            Func::Select => "select",
            Func::Popcount => "popcount",
            Func::Cast(d) => d.name(),
        }
    }
    pub fn arity(self) -> usize {
        match self {
            Func::Max | Func::Min | Func::Pow => 2,
            Func::Select => 3,
            _ => 1,
        }
    }
}

/// A binary operator of kernel expressions. The IR owns it; the syntax tree has its own
/// surface enum, which lowering maps onto this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    /// Bitwise `&`, `|`, `^` of integers.
    BitAnd,
    BitOr,
    BitXor,
    /// `<<` and `>>` of integers (`>>` is arithmetic for signed dtypes); see docs/teg.md §12
    /// for shift amounts outside `0..width`.
    Shl,
    Shr,
}

impl BinOp {
    /// `& | ^ << >>`: integer operands, a result of their dtype.
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr
        )
    }
}

/// A unary operator of kernel expressions (`-x`, `!x`, `~x`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
    /// Bitwise complement of an integer.
    BitNot,
}

/// The tensor a kernel statement whose value failed to lower reads instead (not a valid name):
/// the verifier then fails the statement silently, like one whose error was already reported.
pub const POISONED: &str = "<poisoned>";

#[derive(Clone, Debug, PartialEq)]
pub enum KExprKind {
    Int(i64),
    Float(f64),
    Bool(bool),
    /// An index variable, shape symbol or parameter used as a value.
    Name(String),
    Access(String, Vec<Index>),
    Reduce(Reduction, Vec<IndexVar>, Box<KExpr>),
    Call(Func, Vec<KExpr>),
    Unary(UnOp, Box<KExpr>),
    Binary(BinOp, Box<KExpr>, Box<KExpr>),
}
