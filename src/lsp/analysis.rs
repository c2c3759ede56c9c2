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
    /// For graph number `k` of the text, the index of the IR graph of its name, if it lowered.
    graphs: Vec<Option<usize>>,
    /// For each IR graph, its values by name (built once: symbols and hints ask per value).
    values: Vec<HashMap<String, usize>>,
}

impl Document {
    pub fn new(text: String, version: i32) -> Document {
        let (module, facts, diags) = crate::compile_source(&text);
        let names = Names::scan(&text);
        let by_name: HashMap<&str, usize> = module
            .graphs
            .iter()
            .enumerate()
            .rev() // the first graph of a name wins, as before
            .map(|(i, g)| (g.name.as_str(), i))
            .collect();
        let graphs = (names.items.iter().filter(|it| it.is_graph))
            .map(|it| by_name.get(it.name.as_str()).copied())
            .collect();
        let values = (module.graphs.iter())
            .map(|g| {
                let by_name = g.values.iter().enumerate().rev();
                by_name.map(|(i, v)| (v.name.clone(), i)).collect()
            })
            .collect();
        Document {
            version,
            lines: LineIndex::new(&text),
            names,
            module,
            facts,
            diags: diags.0,
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

    /// The IR graph named like graph number `graph` of the text, with its facts, when it lowered.
    pub fn graph(&self, graph: usize) -> Option<(&crate::ir::graph::Graph, &GraphFacts)> {
        let i = (*self.graphs.get(graph)?)?;
        Some((&self.module.graphs[i], self.facts.get(i)?))
    }

    /// The value `%name` of graph number `graph` of the text, with its graph, when it lowered.
    pub fn value(&self, graph: usize, name: &str) -> Option<(&Graph, &ValueDef)> {
        let i = (*self.graphs.get(graph)?)?;
        let g = &self.module.graphs[i];
        Some((g, &g.values[*self.values[i].get(name)?]))
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
