//! Where the cursor is, from the tokens before it alone (so that it works while the text is
//! being typed and does not compile): the item and statement it is in, the word being typed,
//! and the `apply @op<...>(...)` around it. Completion and signature help are built on it.

use super::analysis::Document;
use crate::syntax::lexer::Tok;
use logos::Logos;
use std::ops::Range;

/// A token of the text with its byte range.
pub type Token = (Tok, Range<usize>);

/// What is around a cursor.
pub struct Context {
    /// The word being typed, sigil included (`@li`, `%`, `ex`), and its range.
    pub prefix: String,
    pub word: Range<usize>,
    /// The op or graph item the cursor is in (index into `doc.names.items`), if any.
    pub item: Option<usize>,
    /// Whether the cursor is in the item's body (after its `{`).
    pub in_body: bool,
    /// The tokens of the current statement before the word.
    pub stmt: Vec<Token>,
    /// The start of the current statement.
    pub stmt_start: usize,
    /// The innermost `apply @op<...>(...)` whose brackets hold the cursor.
    pub apply: Option<ApplyCall>,
}

/// An `apply @op` whose `<...>` or `(...)` holds the cursor.
pub struct ApplyCall {
    pub op: String,
    /// In the `<...>` parameter list (else in the argument list).
    pub in_params: bool,
    /// The position of the parameter or argument the cursor is at (commas before it).
    pub index: usize,
}

/// Tokens of `text[range]` (line breaks included), offsets into `text`.
pub fn tokens(text: &str, range: Range<usize>) -> Vec<Token> {
    let base = range.start;
    Tok::lexer(&text[range])
        .spanned()
        .filter_map(|(t, r)| Some((t.ok()?, r.start + base..r.end + base)))
        .collect()
}

impl Context {
    pub fn at(doc: &Document, offset: usize) -> Context {
        let text = &doc.text;
        let offset = offset.min(text.len());
        let bytes = text.as_bytes();
        let mut start = offset;
        while start > 0
            && (bytes[start - 1].is_ascii_alphanumeric() || b"_.".contains(&bytes[start - 1]))
        {
            start -= 1;
        }
        if start > 0 && (bytes[start - 1] == b'@' || bytes[start - 1] == b'%') {
            start -= 1;
        }
        let item = doc
            .names
            .items
            .iter()
            .position(|it| it.span.start < start && start <= it.span.end);
        let from = item.map_or(0, |i| doc.names.items[i].span.start);
        let toks = tokens(text, from..start);
        let in_body = item.is_some() && body_open(&toks).is_some();
        let stmt_from = statement_start(&toks);
        let stmt: Vec<Token> = toks[stmt_from..]
            .iter()
            .filter(|t| t.0 != Tok::Newline)
            .cloned()
            .collect();
        let stmt_start = stmt.first().map_or(start, |t| t.1.start);
        let apply = apply_call(&stmt);
        Context {
            prefix: text[start..offset].to_string(),
            word: start..offset,
            item,
            in_body,
            stmt,
            stmt_start,
            apply,
        }
    }

    /// The token before the word, if the statement has one.
    pub fn prev(&self) -> Option<&Tok> {
        self.stmt.last().map(|t| &t.0)
    }
}

/// The index of an item's opening `{`: the first one outside brackets.
pub fn body_open(toks: &[Token]) -> Option<usize> {
    let mut depth = 0i32;
    toks.iter().position(|(t, _)| {
        match t {
            Tok::LParen | Tok::LBracket => depth += 1,
            Tok::RParen | Tok::RBracket => depth -= 1,
            _ => {}
        }
        *t == Tok::LBrace && depth <= 0
    })
}

/// The index of the first token of the last statement: after the last line break (or `{`)
/// outside brackets that is not a continuation.
fn statement_start(toks: &[Token]) -> usize {
    let mut depth = 0i32;
    let mut start = 0;
    for (k, (t, _)) in toks.iter().enumerate() {
        match t {
            Tok::LParen | Tok::LBracket => depth += 1,
            Tok::RParen | Tok::RBracket => depth = (depth - 1).max(0),
            Tok::LBrace | Tok::RBrace if depth == 0 => start = k + 1,
            Tok::Newline if depth == 0 => {
                let cont = toks[..k]
                    .iter()
                    .rev()
                    .find(|t| t.0 != Tok::Newline)
                    .is_some_and(|t| t.0.continues_line() && t.0 != Tok::LBrace);
                if !cont {
                    start = k + 1;
                }
            }
            _ => {}
        }
    }
    start
}

/// The `apply @op` of a statement whose `<...>` or `(...)` is still open at its end.
fn apply_call(stmt: &[Token]) -> Option<ApplyCall> {
    let k = stmt.iter().position(|t| t.0 == Tok::Apply)?;
    let Some((Tok::Global(op), _)) = stmt.get(k + 1) else {
        return None;
    };
    let mut call: Option<ApplyCall> = None;
    let mut depth = 0i32;
    for (t, _) in &stmt[k + 2..] {
        match t {
            Tok::Lt if call.is_none() && depth == 0 => {
                call = Some(ApplyCall {
                    op: op.clone(),
                    in_params: true,
                    index: 0,
                })
            }
            Tok::Gt if call.as_ref().is_some_and(|c| c.in_params) => call = None,
            Tok::LParen if depth == 0 && call.is_none() => {
                depth += 1;
                call = Some(ApplyCall {
                    op: op.clone(),
                    in_params: false,
                    index: 0,
                });
            }
            Tok::LParen | Tok::LBracket => depth += 1,
            Tok::RParen | Tok::RBracket => {
                depth -= 1;
                if depth == 0 {
                    // The argument list closed: nothing after it is inside the call.
                    return None;
                }
            }
            Tok::Comma if depth <= 1 => {
                if let Some(c) = call.as_mut() {
                    c.index += 1;
                }
            }
            _ => {}
        }
    }
    call
}
