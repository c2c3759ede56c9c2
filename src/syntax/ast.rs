//! The syntax tree: what the text says, with a span on every node and no meaning attached yet.
//!
//! The parser builds it (with `Error` nodes where it recovered), `lower` turns it into the IR.
//! Kernel expressions, shape expressions and index expressions share one [`Expr`] type; which
//! forms are legal where is decided by lowering, so that mistakes get precise diagnostics.

use crate::diag::Span;

#[derive(Clone, Debug)]
pub struct Name {
    pub text: String,
    pub span: Span,
}

#[derive(Clone, Debug, Default)]
pub struct File {
    pub items: Vec<Item>,
}

#[derive(Clone, Debug)]
pub enum Item {
    Op(OpDecl),
    Graph(GraphDecl),
    Error(Span),
}

#[derive(Clone, Debug)]
pub struct OpDecl {
    pub is_extern: bool,
    pub name: Name,
    pub params: Vec<Name>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    pub body: Vec<OpStmt>,
    pub span: Span,
    /// `Some` for an op whose header did not parse, recovered in part (its syntax error is
    /// reported): what the header is missing.
    pub partial: Option<Partial>,
}

/// What is known of a recovered op header. The ports that parsed are in `inputs`/`outputs`.
#[derive(Clone, Debug)]
pub struct Partial {
    /// False when the `<...>` parameter list did not parse (`params` is then empty).
    pub params_known: bool,
    /// Per input position, whether its port parsed; `None` when not even the number of inputs
    /// is known.
    pub inputs: Option<Vec<bool>>,
    /// The same for the outputs.
    pub outputs: Option<Vec<bool>>,
}

impl Partial {
    /// Whether every parameter and port is known (only the punctuation was wrong).
    pub fn complete(&self) -> bool {
        let all = |m: &Option<Vec<bool>>| m.as_ref().is_some_and(|m| m.iter().all(|&k| k));
        self.params_known && all(&self.inputs) && all(&self.outputs)
    }
}

#[derive(Clone, Debug)]
pub struct Port {
    pub name: Name,
    pub ty: TypeExpr,
}

/// `f32[B, K]`, `f32[..S]`, `f32[]`.
#[derive(Clone, Debug)]
pub struct TypeExpr {
    pub dtype: Name,
    pub dims: Vec<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum OpStmt {
    /// `y[i, j] = expr` (kernel statement)
    Assign {
        target: Name,
        indices: Vec<Expr>,
        value: Expr,
        span: Span,
    },
    /// `index [i: M, j: N]`
    IndexSpace {
        dims: Vec<(Name, Expr)>,
        span: Span,
    },
    /// `x: [i, 0] + [1, K]`
    Projection {
        port: Name,
        start: Vec<Expr>,
        shape: Vec<Expr>,
        span: Span,
    },
    /// `cost { i: { flops: 2 * K * N } }`
    Cost {
        dims: Vec<(Name, Vec<(Name, Expr)>)>,
        span: Span,
    },
    Error(Span),
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// A binary operator as written. The syntax tree keeps its own surface enum (so the front end
/// depends on nothing but diagnostics); lowering maps it onto the IR's `BinOp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Star,
    /// `/`
    Slash,
    /// `%`
    Percent,
    /// `<`
    Less,
    /// `<=`
    LessEq,
    /// `>`
    Greater,
    /// `>=`
    GreaterEq,
    /// `==`
    EqEq,
    /// `!=`
    NotEq,
    /// `&&`
    AndAnd,
    /// `||`
    OrOr,
    /// `&`
    Amp,
    /// `|`
    Pipe,
    /// `^`
    Caret,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
}

/// A prefix operator as written: `-`, `!` or `~`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Minus,
    Bang,
    Tilde,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    /// Digits as written (range-checked in lowering).
    Int(String),
    Float(String),
    Bool(bool),
    Name(String),
    /// `..i` or `..S`
    Variadic(String),
    Access {
        base: Name,
        indices: Vec<Expr>,
    },
    Reduce {
        kind: Name,
        vars: Vec<Expr>,
        body: Box<Expr>,
    },
    Call {
        func: Name,
        args: Vec<Expr>,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Debug)]
pub struct GraphDecl {
    pub name: Name,
    pub stmts: Vec<GraphStmt>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum GraphStmt {
    /// `%a, ... = RHS`: a statement that defines values.
    Def {
        results: Vec<Name>,
        rhs: Rhs,
        span: Span,
    },
    Sink {
        sink: Name,
        value: Name,
        span: Span,
    },
    /// Each reference is `(is_sink, name)`: `@sink` or `%value`.
    Sequence {
        before: Vec<(bool, Name)>,
        after: Vec<(bool, Name)>,
        span: Span,
    },
    /// `WORD REF`: a statement led by a bare word. `pin %v` is the only one; `pin` is not
    /// reserved, the word is checked in lowering (E0014 for any other).
    Word {
        word: Name,
        /// `(is_sink, name)`, as in sequence points: `@sink` or `%value`.
        target: (bool, Name),
        span: Span,
    },
    /// `WORD @name %v`: `update @w %v` is the only one; the word is checked in lowering.
    WordSink {
        word: Name,
        sink: Name,
        value: Name,
        span: Span,
    },
    /// `%a = ...` whose right-hand side has a syntax error (already reported).
    Broken {
        results: Vec<Name>,
        span: Span,
    },
    Error(Span),
}

/// An integer literal with an optional sign, as written.
#[derive(Clone, Debug)]
pub struct Signed {
    pub negative: bool,
    pub digits: String,
    pub span: Span,
}

/// One attribute of a selector or generator instruction.
#[derive(Clone, Debug)]
pub enum Attr {
    /// `[1, 0]`, `[0:10, 0:64:2]`, `[1:1, 2:2]`
    List(Vec<ListElem>, Span),
    /// `axis`, `reflect`, `seed` ...
    Word(Name),
    /// `2.5`, `-1`, `true`
    Number(Literal, Span),
}

#[derive(Clone, Debug)]
pub enum Literal {
    Int(Signed),
    Float(bool, String),
    Bool(bool),
}

#[derive(Clone, Debug)]
pub enum ListElem {
    Single(Signed),
    /// `start:stop:step` with each part optional.
    Range {
        start: Option<Signed>,
        stop: Option<Signed>,
        step: Option<Signed>,
        span: Span,
    },
}

impl GraphStmt {
    pub fn span(&self) -> Span {
        match self {
            GraphStmt::Def { span, .. }
            | GraphStmt::Sink { span, .. }
            | GraphStmt::Sequence { span, .. }
            | GraphStmt::Word { span, .. }
            | GraphStmt::WordSink { span, .. }
            | GraphStmt::Broken { span, .. }
            | GraphStmt::Error(span) => *span,
        }
    }
}

/// Builds a binary expression spanning `l..r` (used by the grammar).
pub fn bin(op: BinOp, a: Expr, b: Expr, l: usize, r: usize) -> Expr {
    Expr {
        kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
        span: Span::new(l, r),
    }
}

/// The right-hand side of a value-defining statement.
#[derive(Clone, Debug)]
pub enum Rhs {
    /// `source @name : type`
    Source(SourceRhs),
    /// `apply @op<params>(args) @[range] on N : types`
    Apply(ApplyRhs),
    /// Selectors and generators: `transpose %y [1, 0]`, `zeros : f32[3]`.
    Instr(InstrRhs),
    /// `grad %loss wrt %w1, %w2 : types`: `instr` must be `grad` and `word` `wrt` (checked in
    /// lowering, as neither is reserved).
    Grad(GradRhs),
}

#[derive(Clone, Debug)]
pub struct GradRhs {
    pub instr: Name,
    pub args: Vec<Name>,
    pub word: Name,
    pub wrt: Vec<Name>,
    pub types: Vec<TypeExpr>,
}

#[derive(Clone, Debug)]
pub struct SourceRhs {
    pub source: Name,
    pub ty: TypeExpr,
    /// The word that replaces `source` (`state @w : type`), checked in lowering.
    pub word: Option<Name>,
}

#[derive(Clone, Debug)]
pub struct ApplyRhs {
    pub op: Name,
    pub params: Vec<(Name, Signed)>,
    pub args: Vec<Name>,
    pub range: Option<Vec<(Signed, Signed)>>,
    pub placement: Option<Signed>,
    pub types: Vec<TypeExpr>,
}

#[derive(Clone, Debug)]
pub struct InstrRhs {
    pub instr: Name,
    pub args: Vec<Name>,
    pub attrs: Vec<Attr>,
    /// `on N` (only a `scatter` takes it).
    pub placement: Option<Signed>,
    pub types: Vec<TypeExpr>,
}
