//! Completion (`textDocument/completion`) by context: `@` ops and graphs, `%` values in scope,
//! an op's parameters inside `apply @op<...>` and, inside `apply @op(...)`, the values in scope
//! with the expected input port (its name as a value, with its type) as an item of its own, kernel functions, ports and index variables inside an op body, dtypes after
//! `:`, instructions after `=`, and statement keywords. Each item has its signature or type as
//! detail. Everything comes from the tokens around the cursor plus, where the file compiled,
//! the IR (types), so completion works while the text is broken.

use super::analysis::Document;
use super::context::{body_open, tokens, ApplyCall, Context, Token};
use super::names::Sym;
use crate::syntax::lexer::Tok;
use tapc_runtime::DType;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Op,
    Graph,
    Value,
    Param,
    Port,
    Function,
    IndexVar,
    Size,
    Type,
    Keyword,
}

/// One completion: the text inserted (over the word being typed), what kind it is, and its
/// signature or type.
#[derive(Clone, Debug)]
pub struct Item {
    pub label: String,
    pub kind: Kind,
    pub detail: String,
    pub documentation: Option<String>,
}

fn item(label: impl Into<String>, kind: Kind, detail: impl Into<String>) -> Item {
    Item {
        label: label.into(),
        kind,
        detail: detail.into(),
        documentation: None,
    }
}

/// Scalar functions of kernels, with their signatures.
const FUNCTIONS: &[(&str, &str)] = &[
    ("exp", "exp(x): float"),
    ("log", "log(x): float"),
    ("sqrt", "sqrt(x): float"),
    ("tanh", "tanh(x): float"),
    ("sin", "sin(x): float"),
    ("cos", "cos(x): float"),
    ("erf", "erf(x): float"),
    ("atan", "atan(x): float"),
    ("asin", "asin(x): float"),
    ("acos", "acos(x): float"),
    ("floor", "floor(x): float"),
    ("ceil", "ceil(x): float"),
    ("abs", "abs(x): number"),
    ("pow", "pow(x, y): float"),
    ("max", "max(a, b) or max[k](e): number"),
    ("min", "min(a, b) or min[k](e): number"),
    ("select", "select(c: bool, a, b)"),
    ("sum", "sum[k](e): reduction over k"),
    ("prod", "prod[k](e): reduction over k"),
    ("argmax", "argmax[k](e): i64 index of the first greatest e"),
    ("argmin", "argmin[k](e): i64 index of the first least e"),
    ("popcount", "popcount(x): integer, the number of set bits"),
];

/// Right-hand sides of graph statements, with their forms.
const INSTRUCTIONS: &[(&str, &str)] = &[
    ("apply", "apply @op<params>(args) @[range] on N"),
    ("source", "source @name : dtype[dims]"),
    ("transpose", "transpose %v [perm]"),
    ("reverse", "reverse %v [dims]"),
    ("slice", "slice %v [start:stop:step, ...]"),
    ("squeeze", "squeeze %v [dims]"),
    ("unsqueeze", "unsqueeze %v [dims]"),
    ("broadcast", "broadcast %v [shape]"),
    ("reshape", "reshape %v [shape]"),
    ("concat", "concat %a, %b axis N"),
    ("interleave", "interleave %a, %b axis N"),
    ("repeat", "repeat %v times N axis N"),
    ("pad", "pad %v [lo:hi, ...] reflect | constant C"),
    (
        "scatter",
        "scatter %base, %idx, %upd axis N reduce add|max|min|none",
    ),
    ("zeros", "zeros : dtype[dims]"),
    ("ones", "ones : dtype[dims]"),
    ("full", "full C : dtype[dims]"),
    ("iota", "iota axis N : dtype[dims]"),
    ("rand", "rand seed N : dtype[dims]"),
];

/// The word range to replace and the completions at `offset`, filtered by the typed prefix.
pub fn complete(doc: &Document, offset: usize) -> (std::ops::Range<usize>, Vec<Item>) {
    let cx = Context::at(doc, offset);
    let mut items = candidates(doc, &cx);
    items.retain(|i| i.label.starts_with(&cx.prefix));
    let mut seen = std::collections::HashSet::new();
    items.retain(|i| seen.insert(i.label.clone()));
    (cx.word, items)
}

fn candidates(doc: &Document, cx: &Context) -> Vec<Item> {
    let Some(i) = cx.item else {
        return keywords(&[
            ("op", "op @name(ports) -> (ports) { ... }"),
            ("extern", "extern op: an explicit signature"),
            ("graph", "graph @name { ... }"),
        ]);
    };
    let it = &doc.names.items[i];
    let graph = doc.names.items[..i].iter().filter(|x| x.is_graph).count();
    if cx.prefix.starts_with('@') {
        return globals(doc, cx, it.is_graph.then_some(graph));
    }
    // Op headers hold ports (`x: f32[N]`); a `:` in a graph starts result types.
    if !cx.in_body || (it.is_graph && matches!(cx.prev(), Some(Tok::Colon))) {
        return dtypes();
    }
    if it.is_graph {
        graph_items(doc, cx, graph)
    } else {
        op_body_items(doc, cx, i)
    }
}

fn keywords(words: &[(&str, &str)]) -> Vec<Item> {
    words
        .iter()
        .map(|(w, d)| item(*w, Kind::Keyword, *d))
        .collect()
}

fn dtypes() -> Vec<Item> {
    DType::ALL
        .iter()
        .map(|d| item(d.name(), Kind::Type, "dtype"))
        .collect()
}

/// `@` names: ops after `apply`, the graph's sinks after `sink` and in sequence points, else
/// ops and graphs.
fn globals(doc: &Document, cx: &Context, graph: Option<usize>) -> Vec<Item> {
    let mut out = Vec::new();
    let ops = || {
        doc.names.items.iter().filter(|x| !x.is_graph).map(|x| {
            item(
                format!("@{}", x.name),
                Kind::Op,
                op_header(doc, &x.name).unwrap_or_default(),
            )
        })
    };
    match (cx.prev(), graph) {
        (Some(Tok::Apply), _) => out.extend(ops()),
        (Some(Tok::Sink | Tok::Sequence | Tok::Arrow | Tok::Comma), Some(g)) => {
            for o in &doc.names.occurrences {
                if let Sym::Sink { graph, name } = &o.sym {
                    if *graph == g && o.def {
                        out.push(item(format!("@{name}"), Kind::Value, "sink"));
                    }
                }
            }
        }
        _ => {
            out.extend(ops());
            for x in doc.names.items.iter().filter(|x| x.is_graph) {
                out.push(item(
                    format!("@{}", x.name),
                    Kind::Graph,
                    format!("graph @{}", x.name),
                ));
            }
        }
    }
    out
}

/// The header of op `name`, as hover shows it.
fn op_header(doc: &Document, name: &str) -> Option<String> {
    doc.op_header(name).map(|(h, _)| h)
}

/// Graph bodies: values in scope, the parameters and expected ports of an apply, instructions
/// after `=`, keywords at the start of a statement.
fn graph_items(doc: &Document, cx: &Context, graph: usize) -> Vec<Item> {
    if let Some(call) = &cx.apply {
        if call.in_params {
            return op_params(doc, call);
        }
        let port = op_port(doc, &call.op, call.index);
        let what = |p: &String| format!("argument {} of @{}: {p}", call.index + 1, call.op);
        let mut vals = values(doc, cx, graph);
        for v in &mut vals {
            v.documentation = port.as_ref().map(what);
        }
        // The expected port itself, as the value name it suggests (after the values: a value
        // of that name, with its type, wins).
        if let Some(p) = &port {
            let name = p.split(':').next().unwrap_or(p).trim();
            let mut it = item(format!("%{name}"), Kind::Port, format!("input {p}"));
            it.documentation = Some(what(p));
            vals.push(it);
        }
        return vals;
    }
    let after_pin = matches!(cx.prev(), Some(Tok::Ident(w)) if w == "pin");
    if cx.prefix.starts_with('%') || after_pin || matches!(cx.prev(), Some(Tok::Comma)) {
        return values(doc, cx, graph);
    }
    match cx.prev() {
        Some(Tok::Eq) => INSTRUCTIONS
            .iter()
            .map(|(w, d)| item(*w, Kind::Keyword, *d))
            .collect(),
        None => {
            let mut out = keywords(&[
                ("sink", "sink @name %value"),
                ("sequence", "sequence @a, %b -> %c"),
                ("pin", "pin %value"),
            ]);
            out.extend(values(doc, cx, graph));
            out
        }
        _ => values(doc, cx, graph),
    }
}

/// The values of graph `graph` defined before the current statement, with their types.
fn values(doc: &Document, cx: &Context, graph: usize) -> Vec<Item> {
    // Name to type, once: a graph may have many values.
    let types: std::collections::HashMap<&str, String> =
        doc.graph(graph).map_or_else(Default::default, |(g, _)| {
            g.values
                .iter()
                .filter_map(|v| Some((v.name.as_str(), v.ty.as_ref()?.to_string())))
                .collect()
        });
    doc.names
        .occurrences
        .iter()
        .filter(|o| o.def && o.span.end <= cx.stmt_start)
        .filter_map(|o| match &o.sym {
            Sym::Value { graph: g, name } if *g == graph => Some(name),
            _ => None,
        })
        .map(|name| {
            let ty = types
                .get(name.as_str())
                .map_or("(type unknown)", String::as_str);
            item(format!("%{name}"), Kind::Value, ty)
        })
        .collect()
}

/// The parameters of the op of an apply: `name = ` with the op's header as detail.
fn op_params(doc: &Document, call: &ApplyCall) -> Vec<Item> {
    let header = op_header(doc, &call.op).unwrap_or_default();
    op_param_names(doc, &call.op)
        .into_iter()
        .map(|p| item(p, Kind::Param, format!("parameter of {header}")))
        .collect()
}

/// The parameter names of op `name`, from its header's `<...>`.
pub fn op_param_names(doc: &Document, name: &str) -> Vec<String> {
    let Some(toks) = header_tokens(doc, name) else {
        return Vec::new();
    };
    if toks.get(2).map(|t| &t.0) != Some(&Tok::Lt) {
        return Vec::new();
    }
    toks[3..]
        .iter()
        .take_while(|t| t.0 != Tok::Gt)
        .filter_map(|t| match &t.0 {
            Tok::Ident(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

/// The ports of op `name` as written (`x: f32[B, K]`): inputs, then outputs.
pub fn op_ports(doc: &Document, name: &str) -> (Vec<String>, Vec<String>) {
    let Some(toks) = header_tokens(doc, name) else {
        return (Vec::new(), Vec::new());
    };
    let mut lists = [Vec::new(), Vec::new()];
    let mut list = 0;
    let mut depth = 0i32;
    let mut k = 0;
    while k < toks.len() {
        match &toks[k].0 {
            Tok::LParen => depth += 1,
            Tok::RParen => depth -= 1,
            Tok::Arrow => list = 1,
            Tok::Ident(_) if depth == 1 && toks.get(k + 1).is_some_and(|t| t.0 == Tok::Colon) => {
                let end = toks[k..]
                    .iter()
                    .position(|t| t.0 == Tok::RBracket)
                    .map_or(toks.len() - 1, |e| k + e);
                let text = &doc.text[toks[k].1.start..toks[end].1.end];
                lists[list].push(text.split_whitespace().collect::<Vec<_>>().join(" "));
                k = end;
            }
            _ => {}
        }
        k += 1;
    }
    let [inputs, outputs] = lists;
    (inputs, outputs)
}

fn op_port(doc: &Document, name: &str, index: usize) -> Option<String> {
    op_ports(doc, name).0.get(index).cloned()
}

/// The tokens of op `name`'s header (from `op` to its `{`, line breaks left out).
fn header_tokens(doc: &Document, name: &str) -> Option<Vec<Token>> {
    let it = doc
        .names
        .items
        .iter()
        .find(|x| !x.is_graph && x.name == name)?;
    let mut toks: Vec<Token> = tokens(&doc.text, it.name_span.start..it.span.end)
        .into_iter()
        .filter(|t| t.0 != Tok::Newline)
        .collect();
    toks.truncate(body_open(&toks).unwrap_or(toks.len()));
    // A stand-in for `op` first, so that `@name` is at index 1 and a `<` at index 2.
    toks.insert(0, (Tok::Op, it.name_span.start..it.name_span.start));
    Some(toks)
}

/// Op bodies: at the start of a statement its targets (outputs, temporaries) and, for an
/// extern op, `index` and `cost`; elsewhere ports, temporaries, index variables, sizes,
/// parameters, kernel functions and casts.
fn op_body_items(doc: &Document, cx: &Context, idx: usize) -> Vec<Item> {
    let it = &doc.names.items[idx];
    let (inputs, outputs) = op_ports(doc, &it.name);
    let port_item = |p: &String| {
        let name = p.split(':').next().unwrap_or(p).trim().to_string();
        item(name, Kind::Port, p.clone())
    };
    let body = body_tokens(doc, idx);
    let temps = targets(&body, &outputs);
    if cx.prev().is_none() {
        let mut out: Vec<Item> = outputs.iter().map(port_item).collect();
        out.extend(
            temps
                .iter()
                .map(|t| item(t.clone(), Kind::Port, "temporary")),
        );
        out.extend(keywords(&[
            ("index", "index [i: N, ...]"),
            ("cost", "cost { i: { flops: E } }"),
        ]));
        return out;
    }
    let mut out: Vec<Item> = inputs.iter().chain(&outputs).map(port_item).collect();
    out.extend(
        temps
            .iter()
            .map(|t| item(t.clone(), Kind::Port, "temporary")),
    );
    for v in index_vars(&body) {
        out.push(item(v, Kind::IndexVar, "index variable"));
    }
    for p in op_param_names(doc, &it.name) {
        out.push(item(p, Kind::Param, "parameter"));
    }
    for s in sizes(doc, &it.name) {
        out.push(item(s, Kind::Size, "size (from the port types)"));
    }
    out.extend(FUNCTIONS.iter().map(|(f, d)| item(*f, Kind::Function, *d)));
    out.extend(
        DType::ALL
            .iter()
            .map(|d| item(d.name(), Kind::Function, format!("{}(x): a cast", d.name()))),
    );
    out
}

/// The tokens of an item's body (after its `{`), line breaks left out.
fn body_tokens(doc: &Document, item: usize) -> Vec<Token> {
    let it = &doc.names.items[item];
    let toks = tokens(&doc.text, it.name_span.end..it.span.end);
    body_open(&toks).map_or(Vec::new(), |o| {
        toks[o + 1..]
            .iter()
            .filter(|t| t.0 != Tok::Newline)
            .cloned()
            .collect()
    })
}

/// Each `target[indices] =` of a body: the target and its index variables.
fn assignments(body: &[Token]) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for k in 2..body.len() {
        if body[k].0 != Tok::Eq || body[k - 1].0 != Tok::RBracket {
            continue;
        }
        let Some(open) = body[..k - 1].iter().rposition(|t| t.0 == Tok::LBracket) else {
            continue;
        };
        if let Some((Tok::Ident(target), _)) = open.checked_sub(1).map(|p| &body[p]) {
            out.push((target.clone(), idents(&body[open + 1..k - 1])));
        }
    }
    out
}

fn idents(toks: &[Token]) -> Vec<String> {
    toks.iter()
        .filter_map(|t| match &t.0 {
            Tok::Ident(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

/// The statement targets of a body that are not output ports.
fn targets(body: &[Token], outputs: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (t, _) in assignments(body) {
        let is_port = outputs
            .iter()
            .any(|p| p.split(':').next() == Some(t.as_str()));
        if !is_port && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The index variables of a body: statement indices, reduction variables and the names of an
/// `index [...]` space.
fn index_vars(body: &[Token]) -> Vec<String> {
    let mut out: Vec<String> = assignments(body).into_iter().flat_map(|(_, v)| v).collect();
    for k in 0..body.len().saturating_sub(1) {
        let reduce = matches!(&body[k].0, Tok::Ident(f) if crate::ir::kernel::Reduction::from_name(f).is_some());
        if (reduce || body[k].0 == Tok::Index) && body[k + 1].0 == Tok::LBracket {
            let end = body[k + 1..]
                .iter()
                .position(|t| t.0 == Tok::RBracket)
                .map_or(body.len(), |e| k + 1 + e);
            let list = &body[k + 2..end];
            if reduce {
                out.extend(idents(list));
            } else {
                for w in list.windows(2) {
                    if let (Tok::Ident(n), Tok::Colon) = (&w[0].0, &w[1].0) {
                        out.push(n.clone());
                    }
                }
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(v.clone()));
    out
}

/// The size names of op `name`'s port types (`B`, `K` in `x: f32[B, K]`).
fn sizes(doc: &Document, name: &str) -> Vec<String> {
    let (inputs, outputs) = op_ports(doc, name);
    let mut out: Vec<String> = Vec::new();
    for p in inputs.iter().chain(&outputs) {
        let dims = p.split_once('[').map_or("", |(_, d)| d);
        for w in dims.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && !out.iter().any(|o| o == w)
            {
                out.push(w.to_string());
            }
        }
    }
    out
}
