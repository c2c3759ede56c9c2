//! Clearer messages for two common syntax errors, replacing the parser's generic "unexpected
//! token": a misspelt keyword (`aply` → "did you mean `apply`?", labelled on the word) and an
//! unclosed `{` (reported at the brace itself, with where to add the `}`).

use super::lexer::{Spanned, Tok};
use crate::diag::suggest::{closest, edit_distance};
use crate::diag::{codes, Diagnostic, Span};

/// Keywords that start an item or statement, and those that start a right-hand side.
const LEADING: &[&str] = &["op", "extern", "graph", "sink", "sequence", "index", "cost"];
const AFTER_EQ: &[&str] = &["apply", "source"];

/// A misspelt keyword in the statement of the syntax error at byte `at`: an identifier at the
/// start of the statement close to a leading keyword, or right after `=` close to `apply` or
/// `source` (1 edit for words of up to 4 letters, else 2).
pub(super) fn misspelt_keyword(tokens: &[Spanned], at: usize) -> Option<Diagnostic> {
    if tokens.is_empty() {
        return None;
    }
    let k = tokens.partition_point(|t| t.0 < at).min(tokens.len() - 1);
    let start = tokens[..k]
        .iter()
        .rposition(|t| matches!(t.1, Tok::Newline | Tok::LBrace | Tok::RBrace))
        .map_or(0, |i| i + 1);
    for j in start..=k {
        let Tok::Ident(w) = &tokens[j].1 else {
            continue;
        };
        let candidates = if j == start {
            LEADING
        } else if tokens[j - 1].1 == Tok::Eq {
            AFTER_EQ
        } else {
            continue;
        };
        let Some(kw) = misspelling_of(w, candidates) else {
            continue;
        };
        return Some(not_a_keyword(w, kw, Span::new(tokens[j].0, tokens[j].2)));
    }
    None
}

/// The keyword of `candidates` that `w` misspells: the closest, at most 1 edit away for words
/// of up to 4 letters, else 2; none for words under 3 letters.
pub fn misspelling_of<'a>(w: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = if w.len() <= 4 { 1 } else { 2 };
    let kw = closest(w, candidates.iter().copied())?;
    (w.len() >= 3 && edit_distance(kw, w) <= limit).then_some(kw)
}

/// "`w` is not a keyword", with "did you mean `kw`?" (E0002).
pub fn not_a_keyword(w: &str, kw: &str, span: Span) -> Diagnostic {
    Diagnostic::error(codes::SYNTAX, format!("`{w}` is not a keyword"))
        .primary(span, "not a keyword")
        .note(format!("help: did you mean `{kw}`?"))
}

/// Each `{` that is still open where an item keyword (`op`, `graph`, `extern`) starts a line,
/// or at the end of the file: the position of that keyword (or the file's length) and the
/// diagnostic, at the brace, that replaces the parser's error there.
pub(super) fn unclosed_braces(tokens: &[Spanned], len: usize) -> Vec<(usize, Diagnostic)> {
    let mut open: Vec<usize> = Vec::new();
    let mut out = Vec::new();
    for (k, (l, t, _)) in tokens.iter().enumerate() {
        match t {
            Tok::LBrace => open.push(k),
            Tok::RBrace => {
                open.pop();
            }
            Tok::Op | Tok::Graph | Tok::Extern if !open.is_empty() => {
                let line_start = k == 0 || tokens[k - 1].1 == Tok::Newline;
                let after_extern = k > 0 && tokens[k - 1].1 == Tok::Extern;
                if line_start && !after_extern {
                    let brace = open[open.len() - 1];
                    let d = unclosed(tokens, brace, codes::SYNTAX)
                        .secondary(Span::new(*l, tokens[k].2), "the next item starts here")
                        .note(format!(
                            "help: add `}}` on the line before this `{}`",
                            t.text()
                        ));
                    out.push((*l, d));
                    open.clear();
                }
            }
            _ => {}
        }
    }
    if let Some(&brace) = open.last() {
        let d = unclosed(tokens, brace, codes::UNEXPECTED_EOF)
            .secondary(Span::new(len, len), "the file ends here")
            .note("help: add `}` at the end of the file");
        out.push((len, d));
    }
    out
}

/// "unclosed `{`" at token `brace`, naming the item or block it opens.
fn unclosed(tokens: &[Spanned], brace: usize, code: crate::diag::Code) -> Diagnostic {
    let (l, _, r) = &tokens[brace];
    let item = tokens[..brace].iter().rev().find_map(|t| match &t.1 {
        Tok::Global(n) => Some(n.clone()),
        _ => None,
    });
    let opened = tokens[..brace]
        .iter()
        .rev()
        .find(|t| matches!(t.1, Tok::Op | Tok::Graph | Tok::Cost))
        .map(|t| t.1.text());
    let what = match (opened, item) {
        (Some("cost"), _) => "this `cost {` block".to_string(),
        (Some(kw), Some(n)) => format!("the body of {kw} `@{n}`"),
        _ => "this block".to_string(),
    };
    Diagnostic::error(code, "unclosed `{`")
        .primary(Span::new(*l, *r), format!("{what} is never closed"))
}
