//! Diagnostics: the one error type every stage of tapc reports through.
//!
//! A [`Diagnostic`] carries a severity, a stable error code (see [`codes`]), a message, labelled
//! spans and notes. [`render`] turns a batch into codespan-reporting text or into JSON lines for
//! editors. No stage panics on bad input: it pushes a diagnostic and carries on where it can.

pub mod codes;
mod render;
pub mod suggest;

pub use codes::Code;
pub use render::{render_human, render_json, ErrorFormat};

/// A byte range in the source file.
///
/// Spans never take part in equality: two graphs that differ only in where their text came from
/// are the same graph (this is what makes `parse(print(g)) == g` meaningful).
#[derive(Clone, Copy, Debug, Default, Eq)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl PartialEq for Span {
    fn eq(&self, _: &Span) -> bool {
        true
    }
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end.max(start) as u32,
        }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
    /// True when the two spans cover exactly the same bytes (equality ignores spans).
    pub fn same_as(self, other: Span) -> bool {
        self.start == other.start && self.end == other.end
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub primary: bool,
    pub span: Span,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: Option<Code>,
    pub message: String,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code: Some(code),
            message: message.into(),
            labels: Vec::new(),
            notes: Vec::new(),
        }
    }
    pub fn warning(code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message)
        }
    }
    /// The main place the problem is.
    pub fn primary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label {
            primary: true,
            span,
            message: message.into(),
        });
        self
    }
    /// A related place that explains the problem.
    pub fn secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label {
            primary: false,
            span,
            message: message.into(),
        });
        self
    }
    pub fn note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
    pub fn primary_span(&self) -> Option<Span> {
        self.labels.iter().find(|l| l.primary).map(|l| l.span)
    }
}

/// A collection of diagnostics in the order they were found.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Without repeats (same code, message and primary span), keeping the first: the same
    /// mistake found twice (an op checked on its own and at an apply) is reported once.
    pub fn deduplicated(mut self) -> Diagnostics {
        let mut seen = std::collections::HashSet::new();
        self.0.retain(|d| {
            let s = d.primary_span().unwrap_or_default();
            seen.insert((d.code.map(|c| c.0), d.message.clone(), s.start, s.end))
        });
        self
    }
    /// Sorted by position so that output is stable whatever order the stages ran in.
    pub fn sorted(mut self) -> Diagnostics {
        self.0.sort_by_key(|d| {
            let s = d.primary_span().unwrap_or_default();
            (s.start, s.end)
        });
        self
    }
}

/// A `grad` statement reached a stage that only runs lowered graphs (the interpreter, the
/// backend): the driver runs the `grad` pass first, so this is a compiler bug.
pub fn grad_not_lowered(span: Span) -> Diagnostic {
    Diagnostic::error(
        codes::PASS_FAILED,
        "a `grad` statement reached the interpreter or the backend before the `grad` pass lowered it",
    )
    .primary(span, "not lowered")
    .note("run `tapc opt FILE --passes=grad` to see the gradient graph")
}
