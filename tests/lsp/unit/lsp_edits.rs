//! Unit tests of `tapc::lsp::edits`, kept out of the library so that `cargo test` compiles it once.

#[test]
fn suggestion_is_the_quoted_name() {
    assert_eq!(
        tapc::lsp::edits::suggestion("help: did you mean `@relu`?"),
        Some("@relu")
    );
    assert_eq!(tapc::lsp::edits::suggestion("did you mean ``?"), None);
    assert_eq!(tapc::lsp::edits::suggestion("no hint here"), None);
}
