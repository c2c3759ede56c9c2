//! Edits the server offers: formatting (`tapc fmt`), quick fixes for "did you mean" notes and
//! inlay hints for inferred result types.

use super::analysis::Document;
use crate::print::print_module;

/// The canonical text of a document that compiles cleanly (`tapc fmt`), when it differs;
/// `None` when there is nothing to do or the document has errors (nothing safe to print).
pub fn format(doc: &Document) -> Option<String> {
    if doc.diags.iter().any(|d| d.is_error()) {
        return None;
    }
    let text = print_module(&doc.module);
    (text != doc.text).then_some(text)
}

/// A quick fix of one diagnostic: replace `span` by `new_text`.
pub struct Fix {
    pub diagnostic: usize,
    pub title: String,
    pub span: std::ops::Range<usize>,
    pub new_text: String,
}

/// One fix per diagnostic with a "did you mean `X`?" note whose primary span overlaps `range`:
/// the primary label's text becomes `X` (keeping a sigil the suggestion leaves out).
pub fn quick_fixes(doc: &Document, range: std::ops::Range<usize>) -> Vec<Fix> {
    let mut out = Vec::new();
    for (i, d) in doc.diags.iter().enumerate() {
        let Some(span) = d.primary_span().map(|s| s.range()) else {
            continue;
        };
        if span.start > range.end || span.end < range.start {
            continue;
        }
        for note in &d.notes {
            let Some(suggestion) = suggestion(note) else {
                continue;
            };
            let old = doc.text.get(span.clone()).unwrap_or("");
            let mut new_text = suggestion.to_string();
            if let Some(sigil) = old.chars().next().filter(|c| matches!(c, '@' | '%')) {
                if !new_text.starts_with(sigil) {
                    new_text.insert(0, sigil);
                }
            }
            out.push(Fix {
                diagnostic: i,
                title: format!("replace `{old}` with `{new_text}`"),
                span: span.clone(),
                new_text,
            });
        }
    }
    out
}

/// `X` from a note "... did you mean `X`?".
fn suggestion(note: &str) -> Option<&str> {
    let rest = &note[note.find("did you mean `")? + "did you mean `".len()..];
    let x = &rest[..rest.find('`')?];
    (!x.is_empty()).then_some(x)
}

/// Inlay hints: `: TYPE, ...` after each apply or instruction statement whose result types are
/// inferred (not written), as (offset, label).
pub fn inlay_hints(doc: &Document, range: std::ops::Range<usize>) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for s in &doc.names.stmts {
        if !s.inferred || s.span.end < range.start || s.span.start > range.end {
            continue;
        }
        let types: Option<Vec<String>> = s
            .results
            .iter()
            .map(|r| doc.value_type(s.graph, r))
            .collect();
        if let Some(types) = types {
            out.push((s.span.end, format!(": {}", types.join(", "))));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn suggestion_is_the_quoted_name() {
        assert_eq!(
            super::suggestion("help: did you mean `@relu`?"),
            Some("@relu")
        );
        assert_eq!(super::suggestion("did you mean ``?"), None);
        assert_eq!(super::suggestion("no hint here"), None);
    }
}
