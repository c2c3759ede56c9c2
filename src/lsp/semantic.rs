//! Semantic tokens (`textDocument/semanticTokens/full`): what each word of the text is, from
//! the tokens alone (so that it works on text that does not compile): keywords and instruction
//! names, ops, graphs, `%values`, sinks and sources, dtypes, kernel functions, numbers and
//! comments.

use super::analysis::Document;
use crate::syntax::lexer::Tok;
use logos::Logos;
use lsp_types::{SemanticToken, SemanticTokenType};
use tapc_runtime::DType;

/// The token types, in the order of their indices in the legend.
pub const LEGEND: &[SemanticTokenType] = &[
    SemanticTokenType::KEYWORD,
    SemanticTokenType::FUNCTION,
    SemanticTokenType::VARIABLE,
    SemanticTokenType::TYPE,
    SemanticTokenType::NUMBER,
    SemanticTokenType::COMMENT,
    SemanticTokenType::NAMESPACE,
    SemanticTokenType::EVENT,
];

const KEYWORD: u32 = 0;
const FUNCTION: u32 = 1;
const VARIABLE: u32 = 2;
const TYPE: u32 = 3;
const NUMBER: u32 = 4;
const COMMENT: u32 = 5;
const NAMESPACE: u32 = 6;
const EVENT: u32 = 7;

/// The classified ranges of the text, in order: (byte range, legend index).
pub fn classify(text: &str) -> Vec<(std::ops::Range<usize>, u32)> {
    let toks: Vec<(Tok, std::ops::Range<usize>)> = Tok::lexer(text)
        .spanned()
        .filter_map(|(t, r)| Some((t.ok()?, r)))
        .filter(|(t, _)| *t != Tok::Newline)
        .collect();
    let mut out = Vec::new();
    for (k, (t, r)) in toks.iter().enumerate() {
        let prev = k.checked_sub(1).map(|p| &toks[p].0);
        let next = toks.get(k + 1).map(|n| &n.0);
        let kind = match t {
            Tok::Ident(w) => match (prev, next) {
                (_, Some(Tok::LBracket)) if DType::from_name(w).is_some() => Some(TYPE),
                (_, Some(Tok::LParen)) => Some(FUNCTION),
                (Some(Tok::Eq), _) => Some(KEYWORD),
                _ => None,
            },
            Tok::Global(_) => Some(match prev {
                Some(Tok::Op | Tok::Apply) => FUNCTION,
                Some(Tok::Graph) => NAMESPACE,
                _ => EVENT,
            }),
            Tok::Local(_) => Some(VARIABLE),
            Tok::Int(_) | Tok::Float(_) => Some(NUMBER),
            t if !t.text().is_empty() && t.text().chars().all(|c| c.is_ascii_lowercase()) => {
                Some(KEYWORD)
            }
            _ => None,
        };
        if let Some(kind) = kind {
            out.push((r.clone(), kind));
        }
    }
    // Comments: TEG has no strings, so every `//` outside a token starts one.
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        if let Some(i) = line.find("//") {
            let end = line_start + line.trim_end().len();
            out.push((line_start + i..end, COMMENT));
        }
        line_start += line.len();
    }
    out.sort_by_key(|(r, _)| r.start);
    out
}

/// The semantic tokens of a document, relative-encoded as LSP wants them (each on one line).
pub fn tokens(doc: &Document) -> Vec<SemanticToken> {
    let mut out = Vec::new();
    let (mut line, mut col) = (0, 0);
    for (r, kind) in classify(&doc.text) {
        let start = doc.lines.position(&doc.text, r.start);
        let end = doc.lines.position(&doc.text, r.end);
        if end.line != start.line {
            continue;
        }
        let delta_line = start.line - line;
        let delta_start = if delta_line == 0 {
            start.character - col
        } else {
            start.character
        };
        out.push(SemanticToken {
            delta_line,
            delta_start,
            length: end.character - start.character,
            token_type: kind,
            token_modifiers_bitset: 0,
        });
        (line, col) = (start.line, start.character);
    }
    out
}
