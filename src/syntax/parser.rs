//! Parser glue: runs the generated LR parser over the filtered token stream and turns parse
//! errors (recovered or not) into diagnostics.

use super::ast::{File, Item};
use super::lexer::{lex, Spanned, Tok};
use crate::diag::{codes, Diagnostic, Diagnostics, Span};
use lalrpop_util::{lalrpop_mod, ErrorRecovery, ParseError};

lalrpop_mod!(
    #[allow(clippy::all, clippy::pedantic, unused)]
    teg
);

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
    let mut errors: Vec<ErrorRecovery<usize, Tok, ()>> = Vec::new();
    let names = op_names(&tokens);
    let result = teg::FileParser::new().parse(&mut errors, tokens.into_iter().map(Ok));
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
    for e in errors {
        report(describe(e.error, src.len()));
    }
    let mut file = match result {
        Ok(file) => file,
        Err(e) => {
            report(describe(e, src.len()));
            File::default()
        }
    };
    let broken: Vec<Span> = file
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Error(s) => Some(*s),
            _ => None,
        })
        .collect();
    file.broken_ops = names
        .into_iter()
        .filter(|(at, _)| {
            // Error items are in text order and do not overlap.
            let k = broken.partition_point(|s| s.end as usize <= *at);
            broken.get(k).is_some_and(|s| s.range().contains(at))
        })
        .map(|(_, n)| n)
        .collect();
    file
}

/// Every `op @name` in the token stream, with the position of `op`.
fn op_names(tokens: &[Spanned]) -> Vec<(usize, String)> {
    tokens
        .windows(2)
        .filter_map(|w| match (&w[0].1, &w[1].1) {
            (Tok::Op, Tok::Global(n)) => Some((w[0].0, n.clone())),
            _ => None,
        })
        .collect()
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
