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
    let graphs = doc.names.items.iter().filter(|it| it.is_graph).count();
    let mut children: Vec<Vec<DocumentSymbol>> = (0..graphs).map(|_| Vec::new()).collect();
    for o in doc.names.occurrences.iter().filter(|o| o.def) {
        let (graph, name, kind) = match &o.sym {
            Sym::Value { graph, name } => (*graph, format!("%{name}"), SymbolKind::VARIABLE),
            Sym::Source { graph, name } => (*graph, format!("source @{name}"), SymbolKind::FIELD),
            Sym::Sink { graph, name } => (*graph, format!("sink @{name}"), SymbolKind::EVENT),
            Sym::Op(_) | Sym::Graph(_) => continue,
        };
        let detail = value_type(doc, graph, &o.sym);
        let s = symbol(
            doc,
            name,
            kind,
            detail,
            o.span.clone(),
            o.span.clone(),
            None,
        );
        children[graph].push(s);
    }
    let mut children = children.into_iter();
    let mut out = Vec::new();
    for item in &doc.names.items {
        let (prefix, kind, children) = if item.is_graph {
            ("graph", SymbolKind::MODULE, children.next())
        } else {
            ("op", SymbolKind::FUNCTION, None)
        };
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
    doc.value_type(graph, name)
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
