//! Rendering diagnostics for people (codespan-reporting) and for editors (one JSON object a line).

use super::{Diagnostic, Severity};
use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ErrorFormat {
    #[default]
    Human,
    Json,
}

/// Human-readable rendering; `color` asks for ANSI colours (only when writing to a terminal).
pub fn render_human(file: &str, source: &str, diags: &[Diagnostic], color: bool) -> String {
    let files = SimpleFile::new(file, source);
    let config = term::Config::default();
    let mut out = Vec::new();
    for d in diags {
        let cd = to_codespan(d, source.len());
        let result = if color {
            let mut w = term::termcolor::Ansi::new(&mut out);
            term::emit_to_write_style(&mut w, &config, &files, &cd)
        } else {
            let mut w = term::termcolor::NoColor::new(&mut out);
            term::emit_to_write_style(&mut w, &config, &files, &cd)
        };
        if result.is_err() {
            out.extend_from_slice(format!("error: {}\n", d.message).as_bytes());
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn to_codespan(d: &Diagnostic, len: usize) -> cs::Diagnostic<()> {
    let sev = match d.severity {
        Severity::Error => cs::Severity::Error,
        Severity::Warning => cs::Severity::Warning,
        Severity::Note => cs::Severity::Note,
    };
    let mut cd = cs::Diagnostic::new(sev).with_message(&d.message);
    if let Some(c) = d.code {
        cd = cd.with_code(c.0);
    }
    let labels = d
        .labels
        .iter()
        .map(|l| {
            let r = clamp(l.span.range(), len);
            let style = if l.primary {
                cs::LabelStyle::Primary
            } else {
                cs::LabelStyle::Secondary
            };
            cs::Label::new(style, (), r).with_message(&l.message)
        })
        .collect();
    cd.with_labels(labels).with_notes(d.notes.clone())
}

fn clamp(r: std::ops::Range<usize>, len: usize) -> std::ops::Range<usize> {
    r.start.min(len)..r.end.min(len)
}

/// One JSON object per diagnostic, one per line.
pub fn render_json(file: &str, source: &str, diags: &[Diagnostic]) -> String {
    let lines = LineIndex::new(source);
    let mut out = String::new();
    for d in diags {
        let labels: Vec<_> = d
            .labels
            .iter()
            .map(|l| {
                let r = clamp(l.span.range(), source.len());
                let (ls, cs) = lines.line_col(source, r.start);
                let (le, ce) = lines.line_col(source, r.end);
                serde_json::json!({
                    "style": if l.primary { "primary" } else { "secondary" },
                    "message": l.message,
                    "byte_start": r.start, "byte_end": r.end,
                    "line_start": ls, "col_start": cs, "line_end": le, "col_end": ce,
                })
            })
            .collect();
        let obj = serde_json::json!({
            "severity": match d.severity { Severity::Error => "error", Severity::Warning => "warning", Severity::Note => "note" },
            "code": d.code.map(|c| c.0),
            "message": d.message,
            "file": file,
            "labels": labels,
            "notes": d.notes,
        });
        out.push_str(&obj.to_string());
        out.push('\n');
    }
    out
}

/// Byte offset to 1-based line and column (columns count chars, as editors do).
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(src: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }
    fn line_col(&self, src: &str, byte: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|&s| s <= byte) - 1;
        let start = self.starts[line];
        let col = src
            .get(start..byte)
            .map_or(byte - start, |s| s.chars().count());
        (line + 1, col + 1)
    }
}
