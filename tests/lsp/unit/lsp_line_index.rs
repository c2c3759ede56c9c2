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

/// Every offset and every position (up to past the line ends) of a text mixing 1- to
/// 4-byte characters agrees with a character-by-character count.
#[test]
fn conversions_agree_with_a_scan() {
    let text = "aé中𝄞b\n\n𝄞𝄞x\r\né\nlast𝄞";
    let ix = LineIndex::new(text);
    for offset in 0..=text.len() + 2 {
        let mut o = offset.min(text.len());
        while !text.is_char_boundary(o) {
            o -= 1;
        }
        let line = text[..o].matches('\n').count();
        let start = text[..o].rfind('\n').map_or(0, |i| i + 1);
        let col: usize = text[start..o].chars().map(char::len_utf16).sum();
        assert_eq!(
            ix.position(text, offset),
            Position::new(line as u32, col as u32)
        );
    }
    for (line, l) in text.split('\n').enumerate() {
        let start = text
            .split('\n')
            .take(line)
            .map(|l| l.len() + 1)
            .sum::<usize>();
        for character in 0..l.len() + 3 {
            // The first char starting at or after `character` UTF-16 units, else the end.
            let mut units = 0;
            let mut want = start + l.len();
            for (i, c) in l.char_indices() {
                if units >= character {
                    want = start + i;
                    break;
                }
                units += c.len_utf16();
            }
            let pos = Position::new(line as u32, character as u32);
            assert_eq!(ix.offset(text, pos), want, "{pos:?}");
        }
    }
}
