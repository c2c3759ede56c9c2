//! One document's text and what the compiler knows about it, recomputed on every change.

use super::line_index::LineIndex;
use super::names::Names;
use crate::diag::{Diagnostic, Severity};
use crate::ir::graph::{Graph, ValueDef};
use crate::ir::Module;
use crate::verify::GraphFacts;
use lsp_types::{
    DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, Position, Range,
    Url,
};
use std::collections::HashMap;

/// An open document: its text and the result of `compile_source` on it.
pub struct Document {
    pub version: i32,
    pub text: String,
    pub lines: LineIndex,
    pub module: Module,
    pub facts: Vec<GraphFacts>,
    pub diags: Vec<Diagnostic>,
    pub names: Names,
    /// The graphs with errors, verified as far as their errors allow ([`crate::Analysis`]).
    pub broken: Vec<(Graph, GraphFacts)>,
    /// For graph number `k` of the text, its IR graph if it lowered: `n` below the module's
    /// graph count is `module.graphs[n]`, above it `broken[n - count]`.
    graphs: Vec<Option<usize>>,
    /// For each IR graph in that numbering, its values by name (built once: symbols and hints
    /// ask per value).
    values: Vec<HashMap<String, usize>>,
}

impl Document {
    pub fn new(text: String, version: i32) -> Document {
        let a = crate::analyse_source(&text);
        let names = Names::scan(&text);
        let ir: Vec<&Graph> = (a.module.graphs.iter())
            .chain(a.broken.iter().map(|(g, _)| g))
            .collect();
        // The first IR graph of a name wins; compiled graphs come before broken ones.
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (n, g) in ir.iter().enumerate() {
            by_name.entry(g.name.as_str()).or_insert(n);
        }
        let graphs = (names.items.iter().filter(|it| it.is_graph))
            .map(|it| by_name.get(it.name.as_str()).copied())
            .collect();
        let values = (ir.iter())
            .map(|g| {
                let by_name = g.values.iter().enumerate().rev();
                by_name.map(|(i, v)| (v.name.clone(), i)).collect()
            })
            .collect();
        Document {
            version,
            lines: LineIndex::new(&text),
            names,
            module: a.module,
            facts: a.facts,
            diags: a.diags.0,
            broken: a.broken,
            text,
            graphs,
            values,
        }
    }

    pub fn range(&self, span: std::ops::Range<usize>) -> Range {
        self.lines.range(&self.text, span)
    }

    pub fn offset(&self, pos: Position) -> usize {
        self.lines.offset(&self.text, pos)
    }

    /// IR graph number `n` (see `graphs`) with its facts.
    fn ir_graph(&self, n: usize) -> Option<(&Graph, &GraphFacts)> {
        let count = self.module.graphs.len();
        if n < count {
            return Some((&self.module.graphs[n], self.facts.get(n)?));
        }
        self.broken.get(n - count).map(|(g, f)| (g, f))
    }

    /// The IR graph named like graph number `graph` of the text, with its facts: from the
    /// module when it compiled, else as far as it was verified (values its errors touch have
    /// no type, and poisoned ones no node).
    pub fn graph(&self, graph: usize) -> Option<(&Graph, &GraphFacts)> {
        self.ir_graph((*self.graphs.get(graph)?)?)
    }

    /// The header of op `name` (`op @f<p>(x: f32[N]) -> (y: f32[N])`) and whether the op
    /// lowered: printed from the IR when it did, else as written (spaces collapsed).
    pub fn op_header(&self, name: &str) -> Option<(String, bool)> {
        if let Some(op) = self.module.ops.iter().find(|o| o.name == name) {
            let text = crate::print::print_op(op);
            let header = text.split_once(" {").map_or(text.as_str(), |(h, _)| h);
            return Some((header.to_string(), true));
        }
        let it = self
            .names
            .items
            .iter()
            .find(|x| !x.is_graph && x.name == name)?;
        let text = &self.text[it.span.clone()];
        let header = text.split_once('{').map_or(text, |(h, _)| h);
        Some((
            header.split_whitespace().collect::<Vec<_>>().join(" "),
            false,
        ))
    }

    /// The value `%name` of graph number `graph` of the text, with its graph, when it lowered.
    pub fn value(&self, graph: usize, name: &str) -> Option<(&Graph, &ValueDef)> {
        let n = (*self.graphs.get(graph)?)?;
        let (g, _) = self.ir_graph(n)?;
        Some((g, &g.values[*self.values[n].get(name)?]))
    }

    /// The type of `%name` in graph number `graph`, when known.
    pub fn value_type(&self, graph: usize, name: &str) -> Option<String> {
        let (_, v) = self.value(graph, name)?;
        v.ty.as_ref().map(|t| t.to_string())
    }

    /// The diagnostics as `tapc check` reports them, in LSP form: the primary label is the
    /// range, secondary labels are related information, notes follow the message.
    pub fn lsp_diagnostics(&self, uri: &Url) -> Vec<lsp_types::Diagnostic> {
        self.diags
            .iter()
            .map(|d| self.lsp_diagnostic(uri, d))
            .collect()
    }

    pub fn lsp_diagnostic(&self, uri: &Url, d: &Diagnostic) -> lsp_types::Diagnostic {
        let span = d.primary_span().unwrap_or_default();
        let mut message = d.message.clone();
        if let Some(l) = d.labels.iter().find(|l| l.primary && !l.message.is_empty()) {
            message = format!("{message}: {}", l.message);
        }
        for n in &d.notes {
            message.push_str("\nnote: ");
            message.push_str(n);
        }
        let related: Vec<DiagnosticRelatedInformation> = d
            .labels
            .iter()
            .filter(|l| !l.primary)
            .map(|l| DiagnosticRelatedInformation {
                location: Location::new(uri.clone(), self.range(l.span.range())),
                message: l.message.clone(),
            })
            .collect();
        lsp_types::Diagnostic {
            range: self.range(span.range()),
            severity: Some(match d.severity {
                Severity::Error => DiagnosticSeverity::ERROR,
                Severity::Warning => DiagnosticSeverity::WARNING,
                Severity::Note => DiagnosticSeverity::INFORMATION,
            }),
            code: d.code.map(|c| NumberOrString::String(c.to_string())),
            source: Some("tapc".into()),
            message,
            related_information: (!related.is_empty()).then_some(related),
            ..Default::default()
        }
    }
}
