//! The logos lexer and the newline filter that turns line breaks into statement separators.
//!
//! TEG statements end at the end of a line. A line break is *not* a separator inside `(...)` or
//! `[...]`, after a token that cannot end a statement (an operator, `,`, `=`, `{`, `->`, `:`), or
//! before `}`, `->` or the end of the file. Runs of line breaks collapse into one separator.
//! Bad characters become diagnostics and are skipped, so the parser always gets a token stream.

use crate::diag::{codes, Diagnostic, Diagnostics, Span};
use logos::Logos;
use std::fmt;

#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(skip r"[ \t\r\f]+")]
#[logos(skip(r"//[^\n]*", allow_greedy = true))]
pub enum Tok {
    #[token("\n")]
    Newline,
    #[token("op")]
    Op,
    #[token("extern")]
    Extern,
    #[token("graph")]
    Graph,
    #[token("apply")]
    Apply,
    #[token("source")]
    Source,
    #[token("sink")]
    Sink,
    #[token("sequence")]
    Sequence,
    #[token("index")]
    Index,
    #[token("cost")]
    Cost,
    #[token("on")]
    On,
    #[token("true")]
    True,
    #[token("false")]
    False,
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*", |l| l.slice().to_string())]
    Ident(String),
    #[regex(r"@[A-Za-z_][A-Za-z0-9_.]*", |l| l.slice()[1..].to_string())]
    Global(String),
    #[regex(r"%[A-Za-z0-9_][A-Za-z0-9_.]*", |l| l.slice()[1..].to_string())]
    Local(String),
    /// Digits as written; the parser checks the range so that an overflow is a diagnostic.
    #[regex(r"[0-9]+", |l| l.slice().to_string())]
    Int(String),
    #[regex(r"[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+", |l| l.slice().to_string())]
    Float(String),
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("<=")]
    Le,
    #[token(">=")]
    Ge,
    #[token("==")]
    EqEq,
    #[token("!=")]
    Ne,
    #[token("=")]
    Eq,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("->")]
    Arrow,
    #[token("..")]
    DotDot,
    #[token("@")]
    At,
    #[token("!")]
    Bang,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
    #[token("&")]
    Amp,
    #[token("|")]
    Pipe,
    #[token("^")]
    Caret,
    #[token("~")]
    Tilde,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Newline => f.write_str("end of line"),
            Tok::Ident(s) => write!(f, "identifier `{s}`"),
            Tok::Global(s) => write!(f, "`@{s}`"),
            Tok::Local(s) => write!(f, "`%{s}`"),
            Tok::Int(s) | Tok::Float(s) => write!(f, "number `{s}`"),
            other => write!(f, "`{}`", other.text()),
        }
    }
}

impl Tok {
    /// The fixed spelling of a punctuation or keyword token.
    pub fn text(&self) -> &'static str {
        match self {
            Tok::Newline => "\\n",
            Tok::Op => "op",
            Tok::Extern => "extern",
            Tok::Graph => "graph",
            Tok::Apply => "apply",
            Tok::Source => "source",
            Tok::Sink => "sink",
            Tok::Sequence => "sequence",
            Tok::Index => "index",
            Tok::Cost => "cost",
            Tok::On => "on",
            Tok::True => "true",
            Tok::False => "false",
            Tok::Ident(_) | Tok::Global(_) | Tok::Local(_) | Tok::Int(_) | Tok::Float(_) => "",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Lt => "<",
            Tok::Gt => ">",
            Tok::Le => "<=",
            Tok::Ge => ">=",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::Eq => "=",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Arrow => "->",
            Tok::DotDot => "..",
            Tok::At => "@",
            Tok::Bang => "!",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Amp => "&",
            Tok::Pipe => "|",
            Tok::Caret => "^",
            Tok::Tilde => "~",
            Tok::Shl => "<<",
            Tok::Shr => ">>",
        }
    }

    /// Tokens after which a line break continues the statement.
    pub(crate) fn continues_line(&self) -> bool {
        matches!(
            self,
            Tok::LBrace
                | Tok::Comma
                | Tok::Eq
                | Tok::Arrow
                | Tok::Colon
                | Tok::LParen
                | Tok::LBracket
                | Tok::Plus
                | Tok::Minus
                | Tok::Star
                | Tok::Slash
                | Tok::Percent
                | Tok::Lt
                | Tok::Gt
                | Tok::Le
                | Tok::Ge
                | Tok::EqEq
                | Tok::Ne
                | Tok::AndAnd
                | Tok::OrOr
                | Tok::Bang
                | Tok::Amp
                | Tok::Pipe
                | Tok::Caret
                | Tok::Tilde
                | Tok::Shl
                | Tok::Shr
                | Tok::DotDot
        )
    }
}

/// A token with its byte range, as lalrpop's external lexer interface wants it.
pub type Spanned = (usize, Tok, usize);

/// Lexes the whole file, applying the newline rules; bad characters are reported and skipped.
pub fn lex(src: &str, diags: &mut Diagnostics) -> Vec<Spanned> {
    let mut raw = Vec::new();
    let mut lexer = Tok::lexer(src);
    // A UTF-8 byte-order mark (Windows editors write one) is not part of the text.
    if src.starts_with('\u{feff}') {
        lexer.bump('\u{feff}'.len_utf8());
    }
    while let Some(res) = lexer.next() {
        let r = lexer.span();
        match res {
            Ok(t) => raw.push((r.start, t, r.end)),
            Err(()) => diags.push(
                Diagnostic::error(
                    codes::UNEXPECTED_CHAR,
                    format!("unexpected character `{}`", lexer.slice()),
                )
                .primary(Span::new(r.start, r.end), "no token starts with this"),
            ),
        }
    }
    filter_newlines(raw)
}

fn filter_newlines(raw: Vec<Spanned>) -> Vec<Spanned> {
    // For each position, the first token at or after it that is not a line break.
    let mut next_real: Vec<Option<usize>> = vec![None; raw.len() + 1];
    for i in (0..raw.len()).rev() {
        next_real[i] = if raw[i].1 == Tok::Newline {
            next_real[i + 1]
        } else {
            Some(i)
        };
    }
    let mut out: Vec<Spanned> = Vec::with_capacity(raw.len());
    let mut depth: i32 = 0;
    for (i, tok) in raw.iter().enumerate() {
        match tok.1 {
            Tok::LParen | Tok::LBracket => depth += 1,
            Tok::RParen | Tok::RBracket => depth = (depth - 1).max(0),
            // Braces never occur inside `(...)` or `[...]`: an unclosed bracket before one
            // must not swallow the line breaks of the rest of the file.
            Tok::LBrace | Tok::RBrace => depth = 0,
            Tok::Newline => {
                // `%v =` or `sink`/`sequence` cannot be inside brackets: a statement starts
                // here, and an unclosed bracket above must not swallow it.
                let starts_stmt = next_real[i + 1].is_some_and(|k| {
                    matches!(
                        (&raw[k].1, raw.get(k + 1).map(|t| &t.1)),
                        (Tok::Local(_), Some(Tok::Eq)) | (Tok::Sink | Tok::Sequence, _)
                    )
                });
                if starts_stmt {
                    depth = 0;
                }
                let prev = out.last().map(|t| &t.1);
                let next = next_real[i + 1].map(|k| &raw[k].1);
                let keep = depth == 0
                    && prev.is_some_and(|p| *p != Tok::Newline && !p.continues_line())
                    && next.is_some_and(|n| *n != Tok::RBrace && *n != Tok::Arrow);
                if !keep {
                    continue;
                }
            }
            _ => {}
        }
        out.push(tok.clone());
    }
    out
}

/// `name` with every character that cannot be in an identifier (anything but `[A-Za-z0-9_]`)
/// replaced by `_`: the start of a name made from foreign text (ONNX names, fused values).
pub fn identifier_chars(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
