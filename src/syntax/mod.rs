//! Front end: text to syntax tree. The lexer (`lexer`), the LR parser that lalrpop generates
//! from `grammar/teg.lalrpop` (`grammar`), the parse with its diagnostics (`parser`, with clearer messages for a misspelt keyword
//! and an unclosed `{` from `hints`), the
//! recovery of op headers that do not parse (`recover`) and the tree itself (`ast`).
//!
//! It depends on nothing in the compiler but diagnostics: lowering the tree to IR is
//! [`crate::lower`], and printing IR back to text is [`crate::print`].
//! [`parse`] never gives up: it returns a tree with `Error` nodes plus diagnostics.

pub mod ast;
mod grammar;
pub mod hints;
pub mod lexer;
mod parser;
mod recover;

pub use parser::{parse, MAX_NESTING};

use crate::diag::{codes, Diagnostic, Diagnostics, Span};

/// Source bytes to text: each invalid UTF-8 sequence is one E0006 at its bytes and becomes
/// spaces (so byte offsets are kept and the rest of the file is still checked).
pub fn decode(bytes: Vec<u8>) -> (String, Diagnostics) {
    let mut diags = Diagnostics::default();
    let mut bytes = match String::from_utf8(bytes) {
        Ok(s) => return (s, diags),
        Err(e) => e.into_bytes(),
    };
    let mut at = 0;
    while at < bytes.len() {
        match std::str::from_utf8(&bytes[at..]) {
            Ok(_) => break,
            Err(e) => {
                let bad = at + e.valid_up_to();
                let len = e.error_len().unwrap_or(bytes.len() - bad);
                diags.push(
                    Diagnostic::error(codes::BAD_ENCODING, "invalid UTF-8")
                        .primary(Span::new(bad, bad + len), "not UTF-8")
                        .note("save the file as UTF-8 (only comments may hold non-ASCII text)"),
                );
                bytes[bad..bad + len].fill(b' ');
                at = bad + len;
            }
        }
    }
    let text = String::from_utf8(bytes).unwrap_or_default();
    (text, diags)
}
