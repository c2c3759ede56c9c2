//! Parser glue: runs the generated LR parser over the filtered token stream and turns parse
//! errors (recovered or not) into diagnostics.

use super::ast::{File, Item};
use super::grammar::teg;
use super::hints::{misspelt_keyword, unclosed_braces};
use super::lexer::{lex, Spanned, Tok};
use super::recover::recover_op;
use crate::diag::{codes, Diagnostic, Diagnostics, Span};
use lalrpop_util::{ErrorRecovery, ParseError};

/// Parses a whole file. Always returns a tree; problems are pushed to `diags`.
pub fn parse(src: &str, diags: &mut Diagnostics) -> File {
    let before = diags.0.len();
    let tokens = lex(src, diags);
    // Each bad character with the end of its line, in text order.
    let mut bad_lines: Vec<(usize, usize)> = Vec::new();
    for b in diags.0[before..]
        .iter()
        .filter_map(|d| d.primary_span().map(|s| s.start as usize))
    {
        let eol = match bad_lines.last() {
            Some(&(_, eol)) if b <= eol => eol,
            _ => src[b..].find('\n').map_or(src.len(), |n| b + n),
        };
        bad_lines.push((b, eol));
    }
    let (tokens, too_deep) = limit_nesting(tokens, diags);
    bad_lines.extend(too_deep);
    bad_lines.sort_unstable();
    let mut unclosed: Vec<Option<(usize, Diagnostic)>> = unclosed_braces(&tokens, src.len())
        .into_iter()
        .map(Some)
        .collect();
    // A block still open at the end of the file is reported at its `{` and then closed there,
    // so the errors inside it (the whole last graph, say) are still found.
    let tokens = close_at_eof(tokens, &mut unclosed, src.len(), diags);
    let mut errors: Vec<ErrorRecovery<usize, Tok, ()>> = Vec::new();
    let shape = brace_shape(&tokens);
    let result = teg::FileParser::new().parse(&mut errors, tokens.iter().cloned().map(Ok));
    let mut report = |d: Diagnostic| {
        // A skipped bad character (already reported) usually breaks the rest of its line.
        let after_bad = d.primary_span().is_some_and(|s| {
            let at = s.start as usize;
            let k = bad_lines.partition_point(|&(b, _)| b <= at);
            k > 0 && at <= bad_lines[k - 1].1
        });
        if !after_bad {
            diags.push(d);
        }
    };
    let mut header_error_until = 0;
    let mut parse_error = |e: ParseError<usize, Tok, ()>| {
        let at = match e {
            ParseError::UnrecognizedEof { .. } => src.len(),
            _ => error_start(&e),
        };
        // An item keyword inside a body, or the end of the file inside one: the `{` that is
        // never closed is the mistake.
        if let Some(slot) = unclosed
            .iter_mut()
            .find(|u| u.as_ref().is_some_and(|(p, _)| *p == at))
        {
            if let Some((_, d)) = slot.take() {
                report(d);
            }
            return;
        }
        // An error in an item's header (outside braces) makes the parser re-read its body
        // as items: one diagnostic for the item, not one per body line.
        if at < header_error_until {
            return;
        }
        if depth_at(&shape, at) == 0 {
            header_error_until = block_end_after(&shape, at);
        }
        let misspelt = match e {
            ParseError::UnrecognizedToken { .. } | ParseError::ExtraToken { .. } => {
                misspelt_keyword(&tokens, at)
            }
            _ => None,
        };
        report(misspelt.unwrap_or_else(|| at_line_end(describe(e, src.len()), &shape, src)));
    };
    for e in errors {
        parse_error(e.error);
    }
    let mut file = match result {
        Ok(file) => file,
        Err(e) => {
            parse_error(e);
            File::default()
        }
    };
    // An `op @name` that did not become an op item is an op whose header did not parse: it is
    // recovered in part, and its body's own syntax errors are reported.
    let parsed: std::collections::HashSet<u32> = file
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Op(op) => Some(op.span.start),
            _ => None,
        })
        .collect();
    for at in 0..tokens.len().saturating_sub(1) {
        if tokens[at].1 != Tok::Op || !matches!(tokens[at + 1].1, Tok::Global(_)) {
            continue;
        }
        let from = if at > 0 && tokens[at - 1].1 == Tok::Extern {
            tokens[at - 1].0
        } else {
            tokens[at].0
        };
        if parsed.contains(&(from as u32)) {
            continue;
        }
        let (op, errs) = recover_op(&tokens, at);
        for e in errs {
            report(at_line_end(describe(e, src.len()), &shape, src));
        }
        file.items.push(Item::Op(op));
    }
    file.items.sort_by_key(|i| match i {
        Item::Op(op) => op.span.start,
        Item::Graph(g) => g.span.start,
        Item::Error(s) => s.start,
    });
    file
}

/// `tokens` with one `}` at the end of the file per block still open there,
/// whose "unclosed `{`" diagnostic (taken from `unclosed`) is reported now: the parser then
/// reads the block as if it were closed.
fn close_at_eof(
    mut tokens: Vec<Spanned>,
    unclosed: &mut [Option<(usize, Diagnostic)>],
    len: usize,
    diags: &mut Diagnostics,
) -> Vec<Spanned> {
    let Some(slot) = unclosed
        .iter_mut()
        .find(|u| u.as_ref().is_some_and(|(p, _)| *p == len))
    else {
        return tokens;
    };
    let Some((_, d)) = slot.take() else {
        return tokens;
    };
    diags.push(d);
    // The lexer keeps no line break before a `}` nor at the end of the file.
    for _ in 0..open_at_eof(&tokens) {
        tokens.push((len, Tok::RBrace, len));
    }
    tokens
}

/// How many `{` are open after the last token.
fn open_at_eof(tokens: &[Spanned]) -> usize {
    let mut open = 0usize;
    for (_, t, _) in tokens {
        match t {
            Tok::LBrace => open += 1,
            Tok::RBrace => open = open.saturating_sub(1),
            _ => {}
        }
    }
    open
}

/// The deepest expression nesting a statement may have (see docs/teg.md, E0005). Deeper
/// input would overflow the stack of the recursive stages after the parser.
pub const MAX_NESTING: usize = 256;

/// Replaces the expression of every statement that could nest deeper than [`MAX_NESTING`]
/// (operators plus open brackets bound the depth of its tree) by one bad token, reporting
/// E0005 once; returns the tokens and the replaced ranges (their parse errors are not shown).
fn limit_nesting(
    tokens: Vec<Spanned>,
    diags: &mut Diagnostics,
) -> (Vec<Spanned>, Vec<(usize, usize)>) {
    let ends_stmt = |t: &Tok| matches!(t, Tok::Newline | Tok::LBrace | Tok::RBrace);
    let nests = |t: &Tok| {
        t.continues_line()
            && !matches!(
                t,
                Tok::Comma | Tok::Eq | Tok::Colon | Tok::Arrow | Tok::DotDot | Tok::LBrace
            )
    };
    let mut out = Vec::with_capacity(tokens.len());
    let mut cut = Vec::new();
    let mut start = 0;
    while start < tokens.len() {
        let end = (start..tokens.len())
            .find(|&i| ends_stmt(&tokens[i].1))
            .map_or(tokens.len(), |i| i + 1);
        let mut count = 0;
        let deep = (start..end).find(|&i| {
            count += usize::from(nests(&tokens[i].1));
            count > MAX_NESTING
        });
        match deep {
            None => out.extend_from_slice(&tokens[start..end]),
            Some(at) => {
                let (l, _, r) = tokens[at].clone();
                diags.push(
                    Diagnostic::error(
                        codes::TOO_DEEP,
                        format!("this expression nests more than {MAX_NESTING} levels deep"),
                    )
                    .primary(Span::new(l, r), "too deep from here on")
                    .note("split it into several statements or temporaries"),
                );
                // Keep `%a =` / `y[i] =` so that the statement still defines its target.
                let keep = (start..at)
                    .find(|&i| tokens[i].1 == Tok::Eq)
                    .map_or(start, |i| i + 1);
                let last = if ends_stmt(&tokens[end - 1].1) {
                    end - 1
                } else {
                    end
                };
                out.extend_from_slice(&tokens[start..keep]);
                let from = tokens.get(keep).map_or(l, |t| t.0);
                let to = tokens[last - 1].2;
                out.push((from, Tok::At, from + 1));
                cut.push((from, to));
                out.extend_from_slice(&tokens[last..end]);
            }
        }
        start = end;
    }
    (out, cut)
}

/// Token starts and ends with the brace depth before each token.
struct Shape {
    starts: Vec<usize>,
    ends: Vec<usize>,
    depth: Vec<u32>,
    closes: Vec<bool>,
}

fn brace_shape(tokens: &[Spanned]) -> Shape {
    let mut sh = Shape {
        starts: Vec::with_capacity(tokens.len()),
        ends: Vec::with_capacity(tokens.len()),
        depth: Vec::with_capacity(tokens.len()),
        closes: Vec::with_capacity(tokens.len()),
    };
    let mut d: u32 = 0;
    for (l, t, r) in tokens {
        sh.starts.push(*l);
        sh.ends.push(*r);
        sh.depth.push(d);
        sh.closes.push(*t == Tok::RBrace);
        match t {
            Tok::LBrace => d += 1,
            Tok::RBrace => d = d.saturating_sub(1),
            _ => {}
        }
    }
    sh
}

/// The brace depth at byte `at` (of the token starting there or after it).
fn depth_at(sh: &Shape, at: usize) -> u32 {
    let k = sh.starts.partition_point(|&s| s < at);
    sh.depth.get(k).copied().unwrap_or(0)
}

/// The end of the first brace block that closes back to depth 0 after `at`.
fn block_end_after(sh: &Shape, at: usize) -> usize {
    let k = sh.starts.partition_point(|&s| s < at);
    (k..sh.starts.len())
        .find(|&i| sh.closes[i] && sh.depth[i] == 1)
        .map_or(usize::MAX, |i| sh.ends[i])
}

fn error_start(e: &ParseError<usize, Tok, ()>) -> usize {
    match e {
        ParseError::InvalidToken { location } | ParseError::UnrecognizedEof { location, .. } => {
            *location
        }
        ParseError::UnrecognizedToken { token, .. } | ParseError::ExtraToken { token } => token.0,
        ParseError::User { .. } => 0,
    }
}

/// A token that is unexpected at the start of a line is usually a mistake at the end of the
/// line before (an unclosed bracket, a trailing operator): label the end of that line instead.
fn at_line_end(mut d: Diagnostic, sh: &Shape, src: &str) -> Diagnostic {
    let Some(at) = d.primary_span().map(|s| s.start as usize) else {
        return d;
    };
    let k = sh.starts.partition_point(|&s| s < at);
    if k == 0 || k >= sh.starts.len() || sh.starts[k] != at {
        return d;
    }
    let prev_end = sh.ends[k - 1];
    if !src.as_bytes()[prev_end.min(at)..at].contains(&b'\n') {
        return d;
    }
    if let Some(l) = d.labels.iter_mut().find(|l| l.primary) {
        l.span = Span::new(prev_end, prev_end);
        l.message = format!("the statement does not end here ({})", l.message);
    }
    d
}

fn describe(e: ParseError<usize, Tok, ()>, len: usize) -> Diagnostic {
    match e {
        ParseError::InvalidToken { location } => Diagnostic::error(codes::SYNTAX, "invalid token")
            .primary(Span::new(location, location + 1), "here"),
        ParseError::UnrecognizedEof { location, expected } => {
            let at = Span::new(location.min(len), location.min(len));
            Diagnostic::error(codes::UNEXPECTED_EOF, "unexpected end of file")
                .primary(at, "the file ends here")
                .note(expected_note(&expected))
        }
        ParseError::UnrecognizedToken {
            token: (l, tok, r),
            expected,
        } => Diagnostic::error(codes::SYNTAX, format!("unexpected {tok}"))
            .primary(Span::new(l, r), "not expected here")
            .note(expected_note(&expected)),
        ParseError::ExtraToken { token: (l, tok, r) } => {
            Diagnostic::error(codes::SYNTAX, format!("unexpected {tok}"))
                .primary(Span::new(l, r), "extra token")
        }
        ParseError::User { .. } => Diagnostic::error(codes::SYNTAX, "syntax error"),
    }
}

fn expected_note(expected: &[String]) -> String {
    let names: Vec<String> = expected.iter().map(|e| pretty_terminal(e)).collect();
    match names.len() {
        0 => "nothing more was expected here".to_string(),
        1 => format!("expected {}", names[0]),
        n if n <= 8 => format!("expected one of {}", names.join(", ")),
        _ => format!("expected one of {}, …", names[..8].join(", ")),
    }
}

/// lalrpop names terminals by their grammar spelling (`"\"(\""`, `IDENT`); make them readable.
fn pretty_terminal(t: &str) -> String {
    match t {
        "IDENT" => "an identifier".into(),
        "GLOBAL" => "an `@name`".into(),
        "LOCAL" => "a `%value`".into(),
        "INT" => "an integer".into(),
        "FLOAT" => "a number".into(),
        "\"\\\\n\"" | "\"\\n\"" => "end of line".into(),
        other => format!("`{}`", other.trim_matches('"')),
    }
}
