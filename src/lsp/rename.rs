//! Rename (`textDocument/prepareRename` and `textDocument/rename`) of ops, graphs, values,
//! sinks and sources (every occurrence the name scan finds, [`super::names`]) and of an op's
//! parameters and ports (every use in the op, and a parameter's `<name = ...>` at its applies).
//! A new name must be a valid name of its kind and must not be taken in its scope.

use super::analysis::Document;
use super::complete::{op_param_names, op_ports};
use super::context::{tokens, Context};
use super::names::Sym;
use crate::syntax::lexer::Tok;
use logos::Logos;
use std::ops::Range;

/// What is being renamed.
enum Target {
    /// A sigiled name: every occurrence of the symbol.
    Sym(Sym),
    /// A parameter or port of op `op`.
    Local { op: String, name: String },
}

/// The range of the name at `offset` (without its sigil) that rename would change.
pub fn prepare(doc: &Document, offset: usize) -> Result<Range<usize>, String> {
    target(doc, offset).map(|(_, r)| r)
}

/// The edits that rename the name at `offset` to `new` (a leading sigil is allowed).
pub fn rename(
    doc: &Document,
    offset: usize,
    new: &str,
) -> Result<Vec<(Range<usize>, String)>, String> {
    let (t, _) = target(doc, offset)?;
    let ranges = match &t {
        Target::Sym(sym) => {
            let new = new.strip_prefix(sigil(sym)).unwrap_or(new);
            check_name(sigil(sym), new)?;
            if let Some(o) = doc
                .names
                .occurrences
                .iter()
                .find(|o| o.def && same_scope(&o.sym, sym) && sym_name(&o.sym) == new)
            {
                let what = &doc.text[o.span.clone()];
                return Err(format!("`{what}` is already defined"));
            }
            let ranges: Vec<Range<usize>> = doc
                .names
                .references(sym)
                .map(|o| o.span.start + 1..o.span.end)
                .collect();
            return Ok(ranges.into_iter().map(|r| (r, new.to_string())).collect());
        }
        Target::Local { op, name } => {
            check_name("", new)?;
            if local_names(doc, op).contains(&new.to_string()) {
                return Err(format!("`{new}` is already a name in @{op}"));
            }
            local_occurrences(doc, op, name)
        }
    };
    Ok(ranges.into_iter().map(|r| (r, new.to_string())).collect())
}

fn sigil(sym: &Sym) -> &'static str {
    if sym_is_value(sym) {
        "%"
    } else {
        "@"
    }
}

fn sym_is_value(sym: &Sym) -> bool {
    matches!(sym, Sym::Value { .. })
}

fn sym_name(sym: &Sym) -> &str {
    match sym {
        Sym::Op(n) | Sym::Graph(n) => n,
        Sym::Value { name, .. } | Sym::Sink { name, .. } | Sym::Source { name, .. } => name,
    }
}

/// Whether two symbols would clash: the same kind in the same scope (ops and graphs share one).
fn same_scope(a: &Sym, b: &Sym) -> bool {
    match (a, b) {
        (Sym::Op(_) | Sym::Graph(_), Sym::Op(_) | Sym::Graph(_)) => true,
        (Sym::Value { graph: g, .. }, Sym::Value { graph: h, .. })
        | (Sym::Sink { graph: g, .. }, Sym::Sink { graph: h, .. })
        | (Sym::Source { graph: g, .. }, Sym::Source { graph: h, .. }) => g == h,
        _ => false,
    }
}

/// `new` must lex as one name of its kind: `%new` as one value name, `@new` as one global
/// name, or (`sigil` empty) `new` as one identifier (not a keyword).
fn check_name(sigil: &str, new: &str) -> Result<(), String> {
    let probe = format!("{sigil}{new}");
    let toks: Vec<_> = Tok::lexer(&probe).collect();
    let ok = match toks.as_slice() {
        [Ok(Tok::Local(n) | Tok::Global(n) | Tok::Ident(n))] => n == new,
        _ => false,
    };
    let kind_ok = match sigil {
        "%" => matches!(toks[..], [Ok(Tok::Local(_))]),
        "@" => matches!(toks[..], [Ok(Tok::Global(_))]),
        _ => matches!(toks[..], [Ok(Tok::Ident(_))]),
    };
    if ok && kind_ok {
        Ok(())
    } else {
        Err(format!("`{new}` is not a valid name here"))
    }
}

/// The rename target at `offset` and the range of its name there.
fn target(doc: &Document, offset: usize) -> Result<(Target, Range<usize>), String> {
    if let Some(o) = doc.names.at(offset) {
        return Ok((Target::Sym(o.sym.clone()), o.span.start + 1..o.span.end));
    }
    let none = || "nothing to rename here: put the cursor on a name".to_string();
    let item = doc
        .names
        .items
        .iter()
        .position(|it| it.span.contains(&offset) || it.span.end == offset)
        .ok_or_else(none)?;
    let it = &doc.names.items[item];
    let toks = tokens(&doc.text, it.span.clone());
    let (name, range) = toks
        .iter()
        .find_map(|(t, r)| match t {
            Tok::Ident(n) if r.start <= offset && offset <= r.end => Some((n.clone(), r.clone())),
            _ => None,
        })
        .ok_or_else(none)?;
    let op = if it.is_graph {
        let call = Context::at(doc, range.start).apply.ok_or_else(none)?;
        if !call.in_params {
            return Err(none());
        }
        call.op
    } else {
        it.name.clone()
    };
    let (inputs, outputs) = op_ports(doc, &op);
    let is_port = inputs.iter().chain(&outputs).any(|p| port_name(p) == name);
    if !is_port && !op_param_names(doc, &op).contains(&name) {
        return Err(format!(
            "`{name}` is not a parameter or port of @{op}; only those, ops, graphs, values, sinks and sources are renamed"
        ));
    }
    Ok((Target::Local { op, name }, range))
}

fn port_name(p: &str) -> &str {
    p.split(':').next().unwrap_or(p).trim()
}

/// Every identifier used in op `op` (ports, parameters, sizes, temporaries, index variables,
/// functions): a renamed port or parameter must not take one of them.
fn local_names(doc: &Document, op: &str) -> Vec<String> {
    let Some(it) = doc.names.items.iter().find(|x| !x.is_graph && x.name == op) else {
        return Vec::new();
    };
    tokens(&doc.text, it.span.clone())
        .into_iter()
        .filter_map(|(t, _)| match t {
            Tok::Ident(n) => Some(n),
            _ => None,
        })
        .collect()
}

/// The occurrences of parameter or port `name` of op `op`: in the op, and a parameter's key in
/// `apply @op<name = ...>`.
fn local_occurrences(doc: &Document, op: &str, name: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    for it in &doc.names.items {
        let toks: Vec<_> = tokens(&doc.text, it.span.clone())
            .into_iter()
            .filter(|t| t.0 != Tok::Newline)
            .collect();
        if !it.is_graph {
            if it.name == op {
                out.extend(toks.iter().filter_map(|(t, r)| match t {
                    Tok::Ident(n) if n == name => Some(r.clone()),
                    _ => None,
                }));
            }
            continue;
        }
        for k in 0..toks.len().saturating_sub(2) {
            let is_apply = toks[k].0 == Tok::Apply
                && matches!(&toks[k + 1].0, Tok::Global(g) if g == op)
                && toks[k + 2].0 == Tok::Lt;
            if !is_apply {
                continue;
            }
            let params = toks[k + 3..].iter().take_while(|t| t.0 != Tok::Gt);
            let keys: Vec<_> = params.collect();
            for w in keys.windows(2) {
                if matches!(&w[0].0, Tok::Ident(n) if n == name) && w[1].0 == Tok::Eq {
                    out.push(w[0].1.clone());
                }
            }
        }
    }
    out
}
