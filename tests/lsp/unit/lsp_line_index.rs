//! Unit tests of `tapc::lsp::line_index`, kept out of the library so that `cargo test` compiles it once.

use lsp_types::Position;
use tapc::lsp::line_index::*;

#[test]
fn utf16_columns_round_trip() {
    let text = "ab\n// é𝄞x\n%y";
    let ix = LineIndex::new(text);
    let x = text.find('x').unwrap();
    // `é` is one UTF-16 unit, `𝄞` two: x is at column 3 + 1 + 2.
    assert_eq!(ix.position(text, x), Position::new(1, 6));
    assert_eq!(ix.offset(text, Position::new(1, 6)), x);
    assert_eq!(
        ix.offset(text, Position::new(1, 99)),
        text.find("\n%").unwrap()
    );
    assert_eq!(ix.offset(text, Position::new(9, 0)), text.len());
    assert_eq!(ix.position(text, text.len()), Position::new(2, 2));
}
