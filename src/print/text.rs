//! IR back to canonical TEG text. `parse(print(m)) == m` for every module, and printing is a
//! fixed point (`print(parse(print(m))) == print(m)`).

use crate::ir::graph::*;
use crate::ir::kernel::*;
use crate::ir::types::float_text;
use crate::ir::{Module, TensorType};
use std::fmt::Write;

pub fn print_module(m: &Module) -> String {
    let mut items: Vec<String> = m.ops.iter().map(print_op).collect();
    items.extend(m.graphs.iter().map(print_graph));
    let mut out = items.join("\n");
    if out.is_empty() {
        out.push('\n');
    }
    out
}

fn list<T>(xs: &[T], f: impl Fn(&T) -> String) -> String {
    xs.iter().map(f).collect::<Vec<_>>().join(", ")
}

fn port(p: &PortDef) -> String {
    let dims = list(&p.dims, |d| match d {
        Dim::Expr(e) => iexpr_text(e),
        Dim::Variadic(n, _) => format!("..{n}"),
    });
    format!("{}: {}[{dims}]", p.name, p.dtype)
}

/// One printed line, indented and without its line break, and the source offset of what it
/// prints (`None` when the IR does not know it). The lossless formatter ([`crate::format`])
/// re-attaches comments and blank lines to lines by these offsets.
#[derive(Clone, Debug)]
pub struct Line {
    pub text: String,
    pub at: Option<usize>,
}

fn line(text: String, at: Option<usize>) -> Line {
    Line { text, at }
}

fn join_lines(lines: Vec<Line>) -> String {
    let mut s = String::new();
    for l in lines {
        s.push_str(&l.text);
        s.push('\n');
    }
    s
}

pub fn print_op(op: &OpDef) -> String {
    join_lines(op_lines(op))
}

/// The lines of [`print_op`]: the header, one per statement (all `cost` entries on one line,
/// at the first `cost`), and the closing brace.
pub fn op_lines(op: &OpDef) -> Vec<Line> {
    let ext = if op.is_extern() { "extern " } else { "" };
    let params = if op.params.is_empty() {
        String::new()
    } else {
        format!("<{}>", op.params.join(", "))
    };
    let header = format!(
        "{ext}op @{}{params}({}) -> ({}) {{",
        op.name,
        list(&op.inputs, port),
        list(&op.outputs, port)
    );
    let mut out = vec![line(header, Some(op.span.start as usize))];
    match &op.body {
        OpBody::Kernel(stmts) => out.extend(stmts.iter().map(stmt)),
        OpBody::Extern(sig) => {
            let index = list(&sig.index, |(n, e)| format!("{n}: {}", iexpr_text(e)));
            out.push(line(
                format!("  index [{index}]"),
                Some(sig.index_span.start as usize),
            ));
            for p in &sig.projections {
                let text = format!(
                    "  {}: [{}] + [{}]",
                    p.port,
                    list(&p.start, iexpr_text),
                    list(&p.shape, iexpr_text)
                );
                out.push(line(text, Some(p.span.start as usize)));
            }
            if !sig.costs.is_empty() {
                let dims = list(&sig.costs, |(d, es)| {
                    format!(
                        "{d}: {{ {} }}",
                        list(es, |(k, e)| format!("{k}: {}", iexpr_text(e)))
                    )
                });
                let at = (sig.cost_span.end > 0).then_some(sig.cost_span.start as usize);
                out.push(line(format!("  cost {{ {dims} }}"), at));
            }
            out.extend(sig.kernel.iter().map(stmt));
        }
    }
    out.push(line("}".into(), closing_brace(op.span)));
    out
}

/// The offset of the `}` that ends an item spanning `span`.
fn closing_brace(span: crate::diag::Span) -> Option<usize> {
    (span.end > span.start).then(|| span.end as usize - 1)
}

fn index_var(v: &IndexVar) -> String {
    match v {
        IndexVar::Var(n, _) => n.clone(),
        IndexVar::Variadic(n, _) => format!("..{n}"),
    }
}

fn stmt(st: &Stmt) -> Line {
    let text = format!(
        "  {}[{}] = {}",
        st.target,
        list(&st.indices, index_var),
        kexpr_text(&st.value)
    );
    line(text, Some(st.span.start as usize))
}

// Precedence levels, loosest first; a child is parenthesized when it binds more loosely.
const OR: u8 = 1;
const AND: u8 = 2;
const CMP: u8 = 3;
const BIT_OR: u8 = 4;
const BIT_XOR: u8 = 5;
const BIT_AND: u8 = 6;
const SHIFT: u8 = 7;
const ADD: u8 = 8;
const MUL: u8 = 9;
const UNARY: u8 = 10;
const ATOM: u8 = 11;

fn binop_prec(op: BinOp) -> (u8, &'static str) {
    match op {
        BinOp::Or => (OR, "||"),
        BinOp::And => (AND, "&&"),
        BinOp::Lt => (CMP, "<"),
        BinOp::Le => (CMP, "<="),
        BinOp::Gt => (CMP, ">"),
        BinOp::Ge => (CMP, ">="),
        BinOp::Eq => (CMP, "=="),
        BinOp::Ne => (CMP, "!="),
        BinOp::Add => (ADD, "+"),
        BinOp::Sub => (ADD, "-"),
        BinOp::Mul => (MUL, "*"),
        BinOp::Div => (MUL, "/"),
        BinOp::Rem => (MUL, "%"),
        BinOp::BitOr => (BIT_OR, "|"),
        BinOp::BitXor => (BIT_XOR, "^"),
        BinOp::BitAnd => (BIT_AND, "&"),
        BinOp::Shl => (SHIFT, "<<"),
        BinOp::Shr => (SHIFT, ">>"),
    }
}

/// Joins `a op b` with the parentheses that left associativity (and non-associative
/// comparisons) require.
fn join(a: (u8, String), op: &str, prec: u8, b: (u8, String)) -> (u8, String) {
    let l = if a.0 < prec || (prec == CMP && a.0 == CMP) {
        format!("({})", a.1)
    } else {
        a.1
    };
    let r = if b.0 <= prec {
        format!("({})", b.1)
    } else {
        b.1
    };
    (prec, format!("{l} {op} {r}"))
}

fn unary(op: &str, a: (u8, String)) -> (u8, String) {
    let inner = if a.0 < UNARY {
        format!("({})", a.1)
    } else {
        a.1
    };
    (UNARY, format!("{op}{inner}"))
}

pub fn iexpr_text(e: &IExpr) -> String {
    iexpr(e).1
}

fn iexpr(e: &IExpr) -> (u8, String) {
    match e {
        IExpr::Int(v, _) if *v < 0 => unary("-", (ATOM, v.unsigned_abs().to_string())),
        IExpr::Int(v, _) => (ATOM, v.to_string()),
        IExpr::Name(n, _) => (ATOM, n.clone()),
        IExpr::Neg(a, _) => unary("-", iexpr(a)),
        IExpr::Bin(op, a, b, _) => {
            let prec = if matches!(op, IOp::Add | IOp::Sub) {
                ADD
            } else {
                MUL
            };
            join(iexpr(a), op.symbol(), prec, iexpr(b))
        }
    }
}

fn index_text(i: &Index) -> String {
    match i {
        Index::Expr(e) => iexpr_text(e),
        Index::Variadic(n, _) => format!("..{n}"),
        Index::Gather(g) => gather_text(g),
    }
}

/// `ids[b, s]`, `ids[b, s] + k` or `ids[b, s] - k`.
pub fn gather_text(g: &Gather) -> String {
    let access = (
        ATOM,
        format!("{}[{}]", g.tensor, list(&g.indices, iexpr_text)),
    );
    match &g.offset {
        Some((op, e)) => join(access, op.symbol(), ADD, iexpr(e)).1,
        None => access.1,
    }
}

pub fn kexpr_text(e: &KExpr) -> String {
    kexpr(e).1
}

fn kexpr(e: &KExpr) -> (u8, String) {
    match &e.kind {
        KExprKind::Int(v) if *v < 0 => unary("-", (ATOM, v.unsigned_abs().to_string())),
        KExprKind::Int(v) => (ATOM, v.to_string()),
        KExprKind::Float(v) if *v < 0.0 => unary("-", (ATOM, float_text(-v))),
        KExprKind::Float(v) => (ATOM, float_text(*v)),
        KExprKind::Bool(b) => (ATOM, b.to_string()),
        KExprKind::Name(n) => (ATOM, n.clone()),
        KExprKind::Access(n, idx) => (ATOM, format!("{n}[{}]", list(idx, index_text))),
        KExprKind::Reduce(r, vars, body) => (
            ATOM,
            format!("{}[{}]({})", r.name(), list(vars, index_var), kexpr(body).1),
        ),
        KExprKind::Call(f, args) => (
            ATOM,
            format!("{}({})", f.name(), list(args, |a| kexpr(a).1)),
        ),
        KExprKind::Unary(UnOp::Neg, a) => unary("-", kexpr(a)),
        KExprKind::Unary(UnOp::Not, a) => unary("!", kexpr(a)),
        KExprKind::Unary(UnOp::BitNot, a) => unary("~", kexpr(a)),
        KExprKind::Binary(op, a, b) => {
            let (prec, sym) = binop_prec(*op);
            join(kexpr(a), sym, prec, kexpr(b))
        }
    }
}

pub fn print_graph(g: &Graph) -> String {
    join_lines(graph_lines(g))
}

/// The lines of [`print_graph`]: the header, one per node, and the closing brace.
pub fn graph_lines(g: &Graph) -> Vec<Line> {
    let mut out = vec![line(
        format!("graph @{} {{", g.name),
        Some(g.span.start as usize),
    )];
    for n in &g.nodes {
        out.push(line(
            format!("  {}", node_text(g, n)),
            Some(n.span.start as usize),
        ));
    }
    out.push(line("}".into(), closing_brace(g.span)));
    out
}

fn val(g: &Graph, v: ValueId) -> String {
    format!("%{}", g.value(v).name)
}

fn slice_text(d: &SliceDim) -> String {
    let o = |v: Option<i64>| v.map_or(String::new(), |v| v.to_string());
    match d.step {
        None | Some(1) => format!("{}:{}", o(d.start), o(d.stop)),
        Some(step) => format!("{}:{}:{step}", o(d.start), o(d.stop)),
    }
}

fn ints<T: ToString>(v: &[T]) -> String {
    format!("[{}]", list(v, T::to_string))
}

/// `scatter %base, %idx, %upd axis A reduce R`, as named in its errors (printed with its
/// placement `on N` after it, when it has one).
pub fn scatter_text(g: &Graph, sc: &Scatter) -> String {
    format!(
        "scatter {} axis {} reduce {}",
        list(&sc.operands(), |a| val(g, *a)),
        sc.axis,
        sc.reduce.name()
    )
}

/// The text of one node, without indentation.
pub fn node_text(g: &Graph, n: &Node) -> String {
    let results = list(&n.results, |v| val(g, *v));
    let types: Option<Vec<&TensorType>> = n.results.iter().map(|v| g.ty(*v)).collect();
    let ann = match types {
        Some(t) if !t.is_empty() => format!(" : {}", list(&t, |t| t.to_string())),
        _ => String::new(),
    };
    let body = match &n.kind {
        NodeKind::Source { name, ty, state } => {
            let word = if *state { "state" } else { "source" };
            return format!("{results} = {word} @{name} : {ty}");
        }
        NodeKind::Sink {
            name,
            value,
            update,
        } => {
            let word = if *update { "update" } else { "sink" };
            return format!("{word} @{name} {}", val(g, *value));
        }
        NodeKind::Pin { value } => return format!("pin {}", val(g, *value)),
        NodeKind::Grad { loss, wrt } => {
            format!("grad {} wrt {}", val(g, *loss), list(wrt, |v| val(g, *v)))
        }
        NodeKind::Scatter(sc) => {
            let on = sc.placement.map(|p| format!(" on {p}")).unwrap_or_default();
            format!("{}{on}", scatter_text(g, sc))
        }
        NodeKind::Sequence { before, after } => {
            let r = |x: &SeqRef| match x {
                SeqRef::Sink(s) => format!("@{s}"),
                SeqRef::Value(v) => val(g, *v),
            };
            return format!("sequence {} -> {}", list(before, r), list(after, r));
        }
        NodeKind::Apply(a) => {
            let params = if a.params.is_empty() {
                String::new()
            } else {
                format!("<{}>", list(&a.params, |(k, v)| format!("{k} = {v}")))
            };
            let mut s = format!("apply @{}{params}({})", a.op, list(&a.args, |v| val(g, *v)));
            if let Some(r) = &a.range {
                let _ = write!(s, " @[{}]", list(r, |(lo, hi)| format!("{lo}:{hi}")));
            }
            if let Some(p) = a.placement {
                let _ = write!(s, " on {p}");
            }
            s
        }
        NodeKind::Generator(gen) => {
            let s = match gen.kind {
                GenKind::Full(l) => format!("full {l}"),
                GenKind::Iota { axis } => format!("iota axis {axis}"),
                GenKind::Rand { seed } => format!("rand seed {seed}"),
                GenKind::Zeros | GenKind::Ones => gen.kind.name().to_string(),
            };
            return format!("{results} = {s} : {}", gen.ty);
        }
        NodeKind::View(v) => {
            let args = list(v.operands(), |a| val(g, *a));
            let attrs = match v {
                View::Transpose { perm, .. } => ints(perm),
                View::Reverse { dims, .. }
                | View::Squeeze { dims, .. }
                | View::Unsqueeze { dims, .. } => ints(dims),
                View::Broadcast { shape, .. } | View::Reshape { shape, .. } => ints(shape),
                View::Slice { dims, .. } => format!("[{}]", list(dims, slice_text)),
                View::Concat { axis, .. } | View::Interleave { axis, .. } => format!("axis {axis}"),
                View::Repeat { times, axis, .. } => format!("times {times} axis {axis}"),
                View::Pad { widths, mode, .. } => {
                    let w = list(widths, |(a, b)| format!("{a}:{b}"));
                    match mode {
                        PadMode::Reflect => format!("[{w}] reflect"),
                        PadMode::Constant(l) => format!("[{w}] constant {l}"),
                    }
                }
            };
            format!("{} {args} {attrs}", v.name())
        }
    };
    format!("{results} = {body}{ann}")
}
