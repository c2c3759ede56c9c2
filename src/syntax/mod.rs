//! Front end: text to syntax tree (lexer + lalrpop parser), and IR back to text (printer).
//!
//! [`parse`] never gives up: it returns a tree with `Error` nodes plus diagnostics.

pub mod ast;
mod instr;
pub mod lexer;
mod literal;
pub mod lower;
mod parser;
pub mod printer;
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
