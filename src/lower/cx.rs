//! The lowering context shared by op and graph lowering: where diagnostics go, and the pieces
//! both need (dtypes, integer expressions, checked literals, concrete types, the operator map
//! from the syntax tree's surface enums onto the IR's).

use super::literal;
use crate::diag::{codes, Code, Diagnostic, Diagnostics, Span};
use crate::ir::kernel::{BinOp, IExpr, IOp, Stub, UnOp, INDEX_RULE};
use crate::ir::types::checked_elements;
use crate::ir::{DType, TensorType};
use crate::syntax::ast::{self, ExprKind};

pub(super) struct Cx<'d> {
    pub(super) diags: &'d mut Diagnostics,
    /// The known header of the op last lowered (see `Lowered::stubs`).
    pub(super) stub: Option<Stub>,
}

/// An error with its primary label.
pub(super) fn err(
    code: Code,
    msg: impl Into<String>,
    span: Span,
    label: impl Into<String>,
) -> Diagnostic {
    Diagnostic::error(code, msg).primary(span, label)
}

/// The IR operator of a surface binary operator.
pub(super) fn binop(op: ast::BinOp) -> BinOp {
    match op {
        ast::BinOp::Plus => BinOp::Add,
        ast::BinOp::Minus => BinOp::Sub,
        ast::BinOp::Star => BinOp::Mul,
        ast::BinOp::Slash => BinOp::Div,
        ast::BinOp::Percent => BinOp::Rem,
        ast::BinOp::Less => BinOp::Lt,
        ast::BinOp::LessEq => BinOp::Le,
        ast::BinOp::Greater => BinOp::Gt,
        ast::BinOp::GreaterEq => BinOp::Ge,
        ast::BinOp::EqEq => BinOp::Eq,
        ast::BinOp::NotEq => BinOp::Ne,
        ast::BinOp::AndAnd => BinOp::And,
        ast::BinOp::OrOr => BinOp::Or,
        ast::BinOp::Amp => BinOp::BitAnd,
        ast::BinOp::Pipe => BinOp::BitOr,
        ast::BinOp::Caret => BinOp::BitXor,
        ast::BinOp::Shl => BinOp::Shl,
        ast::BinOp::Shr => BinOp::Shr,
    }
}

/// The IR operator of a surface prefix operator.
pub(super) fn unop(op: ast::UnOp) -> UnOp {
    match op {
        ast::UnOp::Minus => UnOp::Neg,
        ast::UnOp::Bang => UnOp::Not,
        ast::UnOp::Tilde => UnOp::BitNot,
    }
}

/// The integer operator of a binary operator, if it is one (`+ - * / %`).
fn iop(op: ast::BinOp) -> Option<IOp> {
    Some(match binop(op) {
        BinOp::Add => IOp::Add,
        BinOp::Sub => IOp::Sub,
        BinOp::Mul => IOp::Mul,
        BinOp::Div => IOp::Div,
        BinOp::Rem => IOp::Rem,
        _ => return None,
    })
}

/// E0031 for a tensor index that is neither affine nor a gather, saying why.
fn non_affine(e: &ast::Expr) -> Diagnostic {
    let why = match &e.kind {
        ExprKind::Binary(op, ..) if binop(*op).is_bitwise() => {
            "a bitwise operator is not affine in the index variables"
        }
        ExprKind::Binary(..) => "a comparison or logic operator is not an index",
        ExprKind::Float(_) => "a float is not an index",
        ExprKind::Call { .. } => "a function call is not affine in the index variables",
        ExprKind::Reduce { .. } => "a reduction is not an index",
        _ => "not affine in the index variables",
    };
    err(
        codes::NON_AFFINE,
        "a tensor index must be affine in the index variables, or a gather",
        e.span,
        why,
    )
    .note(INDEX_RULE)
}

impl Cx<'_> {
    pub(super) fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    pub(super) fn duplicate(&mut self, what: &str, span: Span, prev: Span) {
        self.report(
            err(
                codes::DUPLICATE,
                format!("`{what}` is defined twice"),
                span,
                "defined again here",
            )
            .secondary(prev, "first defined here"),
        );
    }

    pub(super) fn dtype(&mut self, n: &ast::Name) -> Option<DType> {
        let d = DType::from_name(&n.text);
        if d.is_none() {
            self.report(
                err(
                    codes::UNKNOWN_DTYPE,
                    format!("unknown dtype `{}`", n.text),
                    n.span,
                    "not a dtype",
                )
                .note(
                    "dtypes are f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64 and bool",
                ),
            );
        }
        d
    }

    /// An integer expression over names; `what` says where it appears, for the message.
    pub(super) fn iexpr(&mut self, e: &ast::Expr, code: Code, what: &str) -> Option<IExpr> {
        let s = e.span;
        Some(match &e.kind {
            ExprKind::Int(d) => IExpr::Int(self.int(d, false, s)?, s),
            ExprKind::Name(n) => IExpr::Name(n.clone(), s),
            ExprKind::Unary(ast::UnOp::Minus, inner) => {
                IExpr::Neg(Box::new(self.iexpr(inner, code, what)?), s)
            }
            ExprKind::Binary(op, a, b) => {
                let Some(op) = iop(*op) else {
                    return self.not_integer(e, code, what);
                };
                let a = self.iexpr(a, code, what);
                let b = self.iexpr(b, code, what);
                IExpr::Bin(op, Box::new(a?), Box::new(b?), s)
            }
            _ => return self.not_integer(e, code, what),
        })
    }

    fn not_integer<T>(&mut self, e: &ast::Expr, code: Code, what: &str) -> Option<T> {
        if code == codes::NON_AFFINE {
            self.report(non_affine(e));
            return None;
        }
        self.report(
            err(
                code,
                format!("a {what} expression must be an integer expression"),
                e.span,
                "not allowed here",
            )
            .note("only integers, names, + - * / % and parentheses may appear here"),
        );
        None
    }

    pub(super) fn int(&mut self, digits: &str, negative: bool, span: Span) -> Option<i64> {
        literal::int(self.diags, digits, negative, span)
    }

    pub(super) fn signed(&mut self, s: &ast::Signed) -> Option<i64> {
        literal::signed(self.diags, s)
    }

    pub(super) fn float(&mut self, text: &str, span: Span) -> Option<f64> {
        literal::float(self.diags, text, span)
    }

    /// A graph type: a dtype and constant, non-negative sizes whose product fits in i64.
    pub(super) fn concrete_type(&mut self, t: &ast::TypeExpr) -> Option<TensorType> {
        let dtype = self.dtype(&t.dtype);
        let shape: Vec<Option<i64>> = t.dims.iter().map(|d| self.constant_size(d)).collect();
        let shape: Vec<i64> = shape.into_iter().collect::<Option<_>>()?;
        if checked_elements(&shape).is_none() {
            self.report(err(
                codes::BAD_SHAPE,
                "this shape has more elements than fit in i64",
                t.span,
                "too large",
            ));
            return None;
        }
        Some(TensorType::new(dtype?, shape))
    }

    /// One size of a graph type.
    fn constant_size(&mut self, d: &ast::Expr) -> Option<i64> {
        let e = self.iexpr(d, codes::BAD_SHAPE, "shape")?;
        match e.eval(&|_| None) {
            Ok(Some(v)) if v >= 0 => Some(v),
            _ => {
                self.report(err(
                    codes::BAD_SHAPE,
                    "a graph shape must be a non-negative integer",
                    d.span,
                    "not a constant size",
                ));
                None
            }
        }
    }
}
