//! Edits the server offers: formatting (`tapc fmt`), quick fixes for "did you mean" notes and
//! unclosed braces, and inlay hints for inferred result types.

use super::analysis::Document;

/// The canonical text of a document that compiles cleanly, comments kept (`tapc fmt`), when
/// it differs;
/// `None` when there is nothing to do or the document has errors (nothing safe to print).
pub fn format(doc: &Document) -> Option<String> {
    if doc.diags.iter().any(|d| d.is_error()) {
        return None;
    }
    let text = crate::format::format_source(&doc.module, &doc.text);
    (text != doc.text).then_some(text)
}

/// A quick fix of one diagnostic: replace `span` by `new_text`.
pub struct Fix {
    pub diagnostic: usize,
    pub title: String,
    pub span: std::ops::Range<usize>,
    pub new_text: String,
}

/// The fixes of the diagnostics whose primary span overlaps `range`: for each "did you mean
/// `X`?" note the primary label's text becomes `X` (keeping a sigil the suggestion leaves out);
/// for an unclosed `{` a `}` is inserted where the note says (before the next item, or at the
/// end of the file).
pub fn quick_fixes(doc: &Document, range: std::ops::Range<usize>) -> Vec<Fix> {
    let mut out = Vec::new();
    for (i, d) in doc.diags.iter().enumerate() {
        let Some(span) = d.primary_span().map(|s| s.range()) else {
            continue;
        };
        if span.start > range.end || span.end < range.start {
            continue;
        }
        if d.message == "unclosed `{`" {
            out.extend(close_brace(doc, i));
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

/// The insertion of the `}` an "unclosed `{`" diagnostic asks for: on a line of its own after
/// the last text before the line of its secondary label (the next item, or the end of the file).
fn close_brace(doc: &Document, diagnostic: usize) -> Option<Fix> {
    let d = &doc.diags[diagnostic];
    let next = d.labels.iter().find(|l| !l.primary)?.span.start as usize;
    let next = next.min(doc.text.len());
    let line = doc.text[..next].rfind('\n').map_or(0, |n| n + 1);
    let at = if next >= doc.text.len() { next } else { line };
    let at = doc.text[..at].trim_end().len();
    Some(Fix {
        diagnostic,
        title: "add the missing `}`".into(),
        span: at..at,
        new_text: "\n}".into(),
    })
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
        let Some((g, _)) = doc.graph(s.graph) else {
            continue;
        };
        let types: Option<Vec<String>> = s
            .results
            .iter()
            .map(|r| {
                let v = g.values.iter().find(|v| v.name == *r)?;
                v.ty.as_ref().map(|t| t.to_string())
            })
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
