//! Navigation: go to definition, find references and the document's symbol tree.

use super::analysis::Document;
use super::names::{Occurrence, Sym};
use lsp_types::{DocumentSymbol, SymbolKind};

/// The definition of the name at `offset`.
pub fn definition(doc: &Document, offset: usize) -> Option<&Occurrence> {
    let o = doc.names.at(offset)?;
    doc.names.definition(&o.sym)
}

/// Every occurrence of the name at `offset`; its definition only when `with_def`.
pub fn references(doc: &Document, offset: usize, with_def: bool) -> Vec<&Occurrence> {
    let Some(o) = doc.names.at(offset) else {
        return Vec::new();
    };
    doc.names
        .references(&o.sym)
        .filter(|r| with_def || !r.def)
        .collect()
}

/// Ops and graphs, with each graph's sources, values and sinks as children.
pub fn symbols(doc: &Document) -> Vec<DocumentSymbol> {
    let mut graph = 0;
    let mut out = Vec::new();
    for item in &doc.names.items {
        let (kind, children) = if item.is_graph {
            let children = doc
                .names
                .occurrences
                .iter()
                .filter(|o| o.def)
                .filter_map(|o| {
                    let (name, kind) = match &o.sym {
                        Sym::Value { graph: g, name } if *g == graph => {
                            (format!("%{name}"), SymbolKind::VARIABLE)
                        }
                        Sym::Source { graph: g, name } if *g == graph => {
                            (format!("source @{name}"), SymbolKind::FIELD)
                        }
                        Sym::Sink { graph: g, name } if *g == graph => {
                            (format!("sink @{name}"), SymbolKind::EVENT)
                        }
                        _ => return None,
                    };
                    let detail = value_type(doc, graph, &o.sym);
                    Some(symbol(
                        doc,
                        name,
                        kind,
                        detail,
                        o.span.clone(),
                        o.span.clone(),
                        None,
                    ))
                })
                .collect();
            graph += 1;
            (SymbolKind::MODULE, Some(children))
        } else {
            (SymbolKind::FUNCTION, None)
        };
        let prefix = if item.is_graph { "graph" } else { "op" };
        out.push(symbol(
            doc,
            format!("{prefix} @{}", item.name),
            kind,
            None,
            item.span.clone(),
            item.name_span.clone(),
            children,
        ));
    }
    out
}

fn value_type(doc: &Document, graph: usize, sym: &Sym) -> Option<String> {
    let Sym::Value { name, .. } = sym else {
        return None;
    };
    let (g, _) = doc.graph(graph)?;
    let v = g.values.iter().find(|v| v.name == *name)?;
    v.ty.as_ref().map(|t| t.to_string())
}

fn symbol(
    doc: &Document,
    name: String,
    kind: SymbolKind,
    detail: Option<String>,
    span: std::ops::Range<usize>,
    selection: std::ops::Range<usize>,
    children: Option<Vec<DocumentSymbol>>,
) -> DocumentSymbol {
    #[allow(deprecated)] // `deprecated` is a required field of the struct
    DocumentSymbol {
        name,
        detail,
        kind,
        tags: None,
        deprecated: None,
        range: doc.range(span),
        selection_range: doc.range(selection),
        children,
    }
}
