//! Lossless formatting (`tapc fmt`, the language server's formatting): the canonical text of a
//! module that compiled cleanly, with the comments and the blank-line grouping of its source.
//!
//! The printer ([`crate::print`]) gives each printed line the source offset of what it prints.
//! The text between two tokens of the source (its *gaps*) holds the comments and line breaks;
//! each comment is attached to a printed line by position:
//! - a comment after code on its line, when the next token starts a printed line (or the file
//!   ends), stays a trailing comment of the line that holds that code;
//! - a comment on its own line before a printed line's first token leads that line, with a
//!   blank line before it when the source had one;
//! - a comment inside a statement that spans several lines leads the statement's line.
//!
//! Blank lines between statements are kept (a run of them becomes one); none follow a `{` or
//! precede a `}`, and items are separated by exactly one. Formatting is idempotent: the output
//! attaches every comment the same way again.

use crate::ir::Module;
use crate::print::{graph_lines, op_lines, Line};
use crate::syntax::lexer::Tok;
use logos::Logos;
use std::collections::{HashMap, HashSet};

/// What a gap holds, in order: blank lines and comments (text as written, trailing space cut).
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Blank,
    Comment(String),
}

/// The trivia attached to one printed line.
#[derive(Default)]
struct Attached {
    before: Vec<Piece>,
    trailing: Option<String>,
}

/// `src` formatted: every item of `module` (which must be `src` compiled without errors) in
/// source order, printed canonically, with the comments and blank lines of `src`.
pub fn format_source(module: &Module, src: &str) -> String {
    let mut items: Vec<(u32, Vec<Line>)> = module
        .ops
        .iter()
        .map(|o| (o.span.start, op_lines(o)))
        .chain(module.graphs.iter().map(|g| (g.span.start, graph_lines(g))))
        .collect();
    items.sort_by_key(|(at, _)| *at);
    let mut lines = Vec::new();
    let mut item_starts = HashSet::new();
    for (_, item) in items {
        item_starts.insert(lines.len());
        lines.extend(item);
    }
    let (attached, tail) = attach(src, &lines);
    render(&lines, &item_starts, &attached, &tail)
}

/// The byte ranges of the tokens of `src` (line breaks and comments are not tokens here).
fn tokens(src: &str) -> Vec<std::ops::Range<usize>> {
    Tok::lexer(src)
        .spanned()
        .filter(|(t, _)| !matches!(t, Ok(Tok::Newline) | Err(_)))
        .map(|(_, r)| r)
        .collect()
}

/// The comments of a gap, each with the number of line breaks before it, and the number of
/// line breaks after the last one.
fn gap_pieces(gap: &str) -> (Vec<(usize, String)>, usize) {
    let mut out = Vec::new();
    let mut breaks = 0;
    let mut rest = gap;
    while let Some(i) = rest.find(['\n', '/']) {
        if rest.as_bytes()[i] == b'\n' {
            breaks += 1;
            rest = &rest[i + 1..];
            continue;
        }
        let end = rest[i..].find('\n').map_or(rest.len(), |n| i + n);
        out.push((breaks, rest[i..end].trim_end().to_string()));
        breaks = 0;
        rest = &rest[end..];
    }
    (out, breaks)
}

/// Attaches each gap's comments and blank lines to the printed lines; what follows the last
/// token is the tail.
fn attach(src: &str, lines: &[Line]) -> (Vec<Attached>, Vec<Piece>) {
    let mut attached: Vec<Attached> = lines.iter().map(|_| Attached::default()).collect();
    let mut tail = Vec::new();
    let mut starts: Vec<(usize, usize)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| Some((l.at?, i)))
        .collect();
    starts.sort_unstable();
    let starting: HashMap<usize, usize> = starts.iter().rev().copied().collect();
    // The printed line that holds the token starting at `at`: the last one starting at or before.
    let owner = |at: usize| {
        let k = starts.partition_point(|&(s, _)| s <= at);
        k.checked_sub(1).map(|k| starts[k].1)
    };
    let toks = tokens(src);
    let first = if src.starts_with('\u{feff}') { 3 } else { 0 };
    for k in 0..=toks.len() {
        let from = k.checked_sub(1).map_or(first, |p| toks[p].end);
        let to = toks.get(k).map_or(src.len(), |t| t.start);
        let (comments, breaks_after) = gap_pieces(&src[from..to]);
        let prev = k.checked_sub(1).and_then(|p| owner(toks[p].start));
        // `None`: the gap is inside a statement; `Some(None)`: the file ends.
        let next: Option<Option<usize>> = match toks.get(k) {
            Some(t) => starting.get(&t.start).map(|&i| Some(i)),
            None => Some(None),
        };
        for (breaks, text) in comments {
            let piece = Piece::Comment(text.clone());
            match (breaks, prev, next) {
                (0, Some(p), Some(_)) if attached[p].trailing.is_none() => {
                    attached[p].trailing = Some(text);
                }
                (_, Some(p), None) => attached[p].before.push(piece),
                (_, _, next) => {
                    let list = match next.flatten() {
                        Some(n) => &mut attached[n].before,
                        None => &mut tail,
                    };
                    if breaks >= 2 {
                        list.push(Piece::Blank);
                    }
                    list.push(piece);
                }
            }
        }
        if let (true, Some(Some(n))) = (breaks_after >= 2, next) {
            attached[n].before.push(Piece::Blank);
        }
    }
    (attached, tail)
}

/// The output so far, with what a blank line may follow.
struct Out {
    text: String,
    /// The last line written opens a block (`{`), or nothing was written yet.
    no_blank: bool,
}

impl Out {
    fn blank(&mut self) {
        if !self.no_blank {
            self.text.push('\n');
            self.no_blank = true;
        }
    }
    fn line(&mut self, indent: &str, text: &str, trailing: Option<&str>) {
        self.text.push_str(indent);
        self.text.push_str(text);
        if let Some(c) = trailing {
            self.text.push_str("  ");
            self.text.push_str(c);
        }
        self.text.push('\n');
        self.no_blank = text.ends_with('{');
    }
}

fn render(
    lines: &[Line],
    item_starts: &HashSet<usize>,
    attached: &[Attached],
    tail: &[Piece],
) -> String {
    let mut out = Out {
        text: String::new(),
        no_blank: true,
    };
    for (i, l) in lines.iter().enumerate() {
        if item_starts.contains(&i) {
            out.blank();
        }
        let closing = l.text == "}";
        // Comments before a closing brace are inside the block: indent them like its body.
        let indent = if closing || l.text.starts_with("  ") {
            "  "
        } else {
            ""
        };
        let mut before: &[Piece] = &attached[i].before;
        if closing {
            while let [rest @ .., Piece::Blank] = before {
                before = rest;
            }
        }
        for p in before {
            match p {
                Piece::Blank => out.blank(),
                Piece::Comment(c) => {
                    out.line(indent, c, None);
                    out.no_blank = false;
                }
            }
        }
        out.line("", &l.text, attached[i].trailing.as_deref());
    }
    for p in tail {
        match p {
            Piece::Blank => out.blank(),
            Piece::Comment(c) => {
                out.line("", c, None);
                out.no_blank = false;
            }
        }
    }
    if out.text.is_empty() {
        out.text.push('\n');
    }
    out.text
}
