//! Byte offsets ↔ LSP positions (line, UTF-16 code unit), the unit LSP clients count in.

use lsp_types::{Position, Range};

/// The start offset of every line of one text and where its non-ASCII characters are, so
/// that both conversions take logarithmic time (a diagnostic on a long line costs no scan).
pub struct LineIndex {
    starts: Vec<usize>,
    /// The byte offset of every non-ASCII character, in order.
    wide: Vec<usize>,
    /// `excess[k]`: UTF-8 bytes minus UTF-16 units of the wide characters before `wide[k]`
    /// (one more entry than `wide`).
    excess: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let mut wide = Vec::new();
        let mut excess = vec![0];
        if !text.is_ascii() {
            for (i, c) in text.char_indices().filter(|(_, c)| !c.is_ascii()) {
                wide.push(i);
                excess.push(excess[excess.len() - 1] + c.len_utf8() - c.len_utf16());
            }
        }
        LineIndex {
            starts,
            wide,
            excess,
        }
    }

    /// Bytes minus UTF-16 units of the wide characters that start before byte `offset`.
    fn excess_before(&self, offset: usize) -> usize {
        self.excess[self.wide.partition_point(|&w| w < offset)]
    }

    /// The position of byte `offset` (clamped to the text and to a char boundary).
    pub fn position(&self, text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let col = offset - start - (self.excess_before(offset) - self.excess_before(start));
        Position::new(line as u32, col as u32)
    }

    pub fn range(&self, text: &str, span: std::ops::Range<usize>) -> Range {
        Range::new(
            self.position(text, span.start),
            self.position(text, span.end),
        )
    }

    /// The byte offset of `pos`; a position past the end of its line is the line's end, past
    /// the last line the end of the text (clients may send such positions), inside a
    /// character (between the halves of a surrogate pair) the character's end.
    pub fn offset(&self, text: &str, pos: Position) -> usize {
        let Some(&start) = self.starts.get(pos.line as usize) else {
            return text.len();
        };
        let end = self
            .starts
            .get(pos.line as usize + 1)
            .map_or(text.len(), |&e| e - 1);
        let target = pos.character as usize;
        // The wide characters of the line, and the UTF-16 column each starts at.
        let (first, last) = (
            self.wide.partition_point(|&w| w < start),
            self.wide.partition_point(|&w| w < end),
        );
        let base = self.excess[first];
        let column = |k: usize| self.wide[k] - start - (self.excess[k] - base);
        // The wide characters that start before the target column.
        let before = first + partition(first, last, |j| column(j) < target);
        if before > first {
            let j = before - 1;
            let c = text[self.wide[j]..]
                .chars()
                .next()
                .expect("a char starts here");
            if column(j) + c.len_utf16() > target {
                return (self.wide[j] + c.len_utf8()).min(end);
            }
        }
        (start + target + (self.excess[before] - base)).min(end)
    }
}

/// The number of `j` in `lo..hi` for which `pred` holds (a prefix of them).
fn partition(lo: usize, hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut a, mut b) = (lo, hi);
    while a < b {
        let m = a + (b - a) / 2;
        if pred(m) {
            a = m + 1;
        } else {
            b = m;
        }
    }
    a - lo
}
