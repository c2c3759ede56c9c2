//! Unit tests of `tapc::syntax::lexer`, kept out of the library so that `cargo test` compiles it once.

use tapc::diag::{codes, Diagnostics};
use tapc::syntax::lexer::*;

fn kinds(src: &str) -> Vec<Tok> {
    let mut d = Diagnostics::default();
    lex(src, &mut d).into_iter().map(|t| t.1).collect()
}

#[test]
fn newlines_separate_statements_only_at_depth_zero() {
    let toks = kinds("a\n\n(b\nc)\nd +\ne\n}");
    let nl = toks.iter().filter(|t| **t == Tok::Newline).count();
    assert_eq!(nl, 2, "{toks:?}");
}

#[test]
fn continuation_before_arrow() {
    assert!(!kinds("op @f(x: f32[])\n  -> (y: f32[])").contains(&Tok::Newline));
}

#[test]
fn unclosed_paren_ends_at_a_brace() {
    let toks = kinds("op @f(x: f32[N] -> (y: f32[N]) {\n}\ngraph @g {\n}\nop");
    assert!(toks.contains(&Tok::Newline), "{toks:?}");
}

#[test]
fn byte_order_mark_is_skipped() {
    let mut d = Diagnostics::default();
    assert_eq!(lex("\u{feff}graph", &mut d).len(), 1);
    assert!(d.is_empty());
}

#[test]
fn bad_character_is_reported_and_skipped() {
    let mut d = Diagnostics::default();
    let toks = lex("a $ b", &mut d);
    assert_eq!(toks.len(), 2);
    assert_eq!(d.0[0].code, Some(codes::UNEXPECTED_CHAR));
}
