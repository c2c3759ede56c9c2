//! Edits the server offers: formatting (`tapc fmt`), quick fixes for "did you mean" notes and
//! unclosed braces, and inlay hints for inferred result types.

use super::analysis::Document;
use super::names::Sym;
use std::ops::Range;

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

/// A quick fix of one diagnostic: replace each span by its text (the spans do not overlap).
pub struct Fix {
    pub diagnostic: usize,
    pub title: String,
    pub edits: Vec<(Range<usize>, String)>,
}

/// The fixes of the diagnostics whose primary span overlaps `range`: for each "did you mean
/// `X`?" note the primary label's text becomes `X` (keeping a sigil the suggestion leaves out);
/// for an unclosed `{` a `}` is inserted where the note says (before the next item, or at the
/// end of the file); a use above its definition is moved below it where that is the fix; an
/// expression of the wrong dtype is wrapped in the cast its label names.
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
        out.extend(move_below_definition(doc, i));
        out.extend(cast(doc, i));
        for note in &d.notes {
            let Some(suggestion) = suggestion(note) else {
                continue;
            };
            // A label wider than the misspelt word (an unknown parameter is labelled on its
            // statement): replace only the word the message names, or offer nothing.
            let Some(span) = misspelt_word(doc, span.clone(), &d.message) else {
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
                edits: vec![(span.clone(), new_text)],
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
        edits: vec![(at..at, "\n}".into())],
    })
}

/// For a value used above its definition: move the statement of the use to just below the
/// definition's statement, when each is one line and nothing in between uses what the moved
/// statement defines (else moving it is not the fix).
fn move_below_definition(doc: &Document, diagnostic: usize) -> Option<Fix> {
    let d = &doc.diags[diagnostic];
    if !d.message.ends_with("is used before its definition") {
        return None;
    }
    let use_at = d.primary_span()?.start as usize;
    let def_at = d.labels.iter().find(|l| !l.primary)?.span.start as usize;
    let line = |at: usize| {
        let start = doc.text[..at].rfind('\n').map_or(0, |n| n + 1);
        let end = doc.text[at..].find('\n').map(|n| at + n + 1)?;
        Some(start..end)
    };
    let (from, below) = (line(use_at)?, line(def_at)?);
    let stmt_of = |at: usize| doc.names.stmts.iter().find(|s| s.span.contains(&at));
    let one_line = |at: usize, l: &Range<usize>| {
        stmt_of(at).map_or_else(
            || !doc.text[l.clone()].contains(['(', '[']) || balanced(&doc.text[l.clone()]),
            |s| l.start <= s.span.start && s.span.end <= l.end,
        )
    };
    if from.end > below.start || !one_line(use_at, &from) || !one_line(def_at, &below) {
        return None;
    }
    let defined: Vec<&str> = stmt_of(use_at).map_or(Vec::new(), |s| {
        s.results.iter().map(String::as_str).collect()
    });
    let used_between = doc.names.occurrences.iter().any(|o| {
        let between = from.end <= o.span.start && o.span.start < below.end;
        between && matches!(&o.sym, Sym::Value { name, .. } if defined.contains(&name.as_str()))
    });
    if used_between {
        return None;
    }
    let name = doc.text.get(d.primary_span()?.range()).unwrap_or("");
    Some(Fix {
        diagnostic,
        title: format!("move this statement below the definition of `{name}`"),
        edits: vec![
            (from.clone(), String::new()),
            (below.end..below.end, doc.text[from].to_string()),
        ],
    })
}

/// For a kernel expression of the wrong dtype (labelled "cast with `T(...)`"): wrap it in
/// the cast.
fn cast(doc: &Document, diagnostic: usize) -> Option<Fix> {
    let label = doc.diags[diagnostic].labels.iter().find(|l| l.primary)?;
    let want = label
        .message
        .strip_prefix("cast with `")?
        .strip_suffix("(...)`")?;
    let span = label.span.range();
    let text = doc.text.get(span.clone())?;
    Some(Fix {
        diagnostic,
        title: format!("cast to {want}: `{want}({text})`"),
        edits: vec![(span, format!("{want}({text})"))],
    })
}

/// Whether the brackets of one line pair up.
fn balanced(line: &str) -> bool {
    let open = line.matches(['(', '[']).count();
    open == line.matches([')', ']']).count()
}

/// The range of the misspelt word in `span`: `span` itself when it is one token, else the
/// last token inside it that the message names in backquotes.
fn misspelt_word(doc: &Document, span: Range<usize>, message: &str) -> Option<Range<usize>> {
    let toks = super::context::tokens(&doc.text, span.clone());
    if toks.len() == 1 && toks[0].1 == span {
        return Some(span);
    }
    let named: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
    toks.into_iter()
        .filter(|(_, r)| named.contains(&&doc.text[r.clone()]))
        .map(|(_, r)| r)
        .next_back()
}

/// `X` from a note "... did you mean `X`?".
pub fn suggestion(note: &str) -> Option<&str> {
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
