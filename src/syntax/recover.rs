//! Recovering an op whose header does not parse, rust-analyzer style (the parser never gives up
//! on an item): the op keeps its name, the parameters and ports that parse (each port is parsed
//! on its own), the number of ports where its brackets show it, and its body (parsed on its
//! own). Applies of it are then checked against what is known (see [`Partial`]).

use super::ast::{Name, OpDecl, OpStmt, Partial, Port};
use super::grammar::teg;
use super::lexer::{Spanned, Tok};
use crate::diag::Span;
use lalrpop_util::ParseError;

/// The op declared by the `op @name` at token `at` (after an optional `extern`), and the parse
/// errors of its body (the header's own error is reported by the whole-file parse).
pub(super) fn recover_op(
    tokens: &[Spanned],
    at: usize,
) -> (OpDecl, Vec<ParseError<usize, Tok, ()>>) {
    let is_extern = at > 0 && tokens[at - 1].1 == Tok::Extern;
    let start = tokens[if is_extern { at - 1 } else { at }].0;
    let (l, name, r) = match &tokens[at + 1] {
        (l, Tok::Global(n), r) => (*l, n.clone(), *r),
        _ => unreachable!("recover_op is called on `op @name`"),
    };
    let name = Name {
        text: name,
        span: Span::new(l, r),
    };
    // The header runs to the body's `{`, or to whatever starts another item.
    let end = (at + 2..tokens.len())
        .find(|&k| {
            matches!(
                tokens[k].1,
                Tok::LBrace | Tok::RBrace | Tok::Op | Tok::Extern | Tok::Graph
            )
        })
        .unwrap_or(tokens.len());
    let mut header = &tokens[at + 2..end];
    let mut params = Vec::new();
    let mut params_known = true;
    if header.first().is_some_and(|t| t.1 == Tok::Lt) {
        let close = header.iter().position(|t| t.1 == Tok::Gt);
        let list = close.map(|c| &header[1..c]);
        match list.and_then(params_of) {
            Some(p) => params = p,
            None => params_known = false,
        }
        // Skip to the port list.
        let from = close.map_or(1, |c| c + 1);
        let lp = (from..header.len())
            .find(|&k| matches!(header[k].1, Tok::LParen | Tok::Arrow))
            .unwrap_or(header.len());
        header = &header[lp..];
    }
    let (ins, outs) = match header.iter().position(|t| t.1 == Tok::Arrow) {
        Some(a) => (port_list(&header[..a]), port_list(&header[a + 1..])),
        None => (port_list(header), None),
    };
    let mask = |l: &Option<Vec<Option<Port>>>| {
        l.as_ref()
            .map(|v| v.iter().map(Option::is_some).collect::<Vec<_>>())
    };
    let partial = Partial {
        params_known,
        inputs: mask(&ins),
        outputs: mask(&outs),
    };
    let known = |l: Option<Vec<Option<Port>>>| l.into_iter().flatten().flatten().collect();
    let mut errors = Vec::new();
    let mut stop = tokens.get(end.saturating_sub(1)).map_or(start, |t| t.2);
    let body = match tokens.get(end) {
        Some((_, Tok::LBrace, _)) => {
            let close = matching_brace(tokens, end);
            stop = tokens[close.unwrap_or(tokens.len() - 1)].2;
            match close {
                Some(c) => {
                    let mut errs = Vec::new();
                    let stream = tokens[end..=c].iter().cloned().map(Ok);
                    let body = teg::OpBodyParser::new().parse(&mut errs, stream);
                    errors.extend(errs.into_iter().map(|e| e.error));
                    body.unwrap_or_else(|e| {
                        errors.push(e);
                        vec![OpStmt::Error(Span::new(tokens[end].0, stop))]
                    })
                }
                None => vec![OpStmt::Error(Span::new(tokens[end].0, stop))],
            }
        }
        // No body: the op is incomplete (its error is the header's).
        _ => vec![OpStmt::Error(name.span)],
    };
    let op = OpDecl {
        is_extern,
        name,
        params,
        inputs: known(ins),
        outputs: known(outs),
        body,
        span: Span::new(start, stop),
        partial: Some(partial),
    };
    (op, errors)
}

/// `a, b, c` (between `<` and `>`): the parameter names, if each is one identifier.
fn params_of(list: &[Spanned]) -> Option<Vec<Name>> {
    let list: Vec<&Spanned> = list.iter().filter(|t| t.1 != Tok::Newline).collect();
    let mut out = Vec::new();
    for piece in list.split(|t| t.1 == Tok::Comma) {
        match piece {
            [] if out.is_empty() && list.is_empty() => {}
            [(l, Tok::Ident(n), r)] => out.push(Name {
                text: n.clone(),
                span: Span::new(*l, *r),
            }),
            _ => return None,
        }
    }
    Some(out)
}

/// `(p1, p2, ...)`: each port that parses on its own, by position; `None` when the list does
/// not start with `(` (then not even the number of ports is known).
fn port_list(part: &[Spanned]) -> Option<Vec<Option<Port>>> {
    let part: Vec<Spanned> = part
        .iter()
        .filter(|t| t.1 != Tok::Newline)
        .cloned()
        .collect();
    if part.first()?.1 != Tok::LParen {
        return None;
    }
    // The list ends at its `)`, or with the part if that is missing. Brackets that do not
    // pair up hide where ports end: then not even their number is known.
    let mut open = Vec::new();
    let mut close = part.len();
    for (k, t) in part.iter().enumerate().skip(1) {
        match t.1 {
            Tok::LParen | Tok::LBracket => open.push(t.1.clone()),
            Tok::RParen if open.is_empty() => {
                close = k;
                break;
            }
            Tok::RParen if open.pop() != Some(Tok::LParen) => return None,
            Tok::RBracket if open.pop() != Some(Tok::LBracket) => return None,
            _ => {}
        }
    }
    if !open.is_empty() {
        return None;
    }
    let inner = &part[1..close];
    let mut pieces = Vec::new();
    let (mut depth, mut from) = (0i32, 0);
    for (k, t) in inner.iter().enumerate() {
        match t.1 {
            Tok::LParen | Tok::LBracket => depth += 1,
            Tok::RParen | Tok::RBracket => depth -= 1,
            Tok::Comma if depth == 0 => {
                pieces.push(&inner[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    // A trailing comma (or an empty list) ends the list.
    if from < inner.len() {
        pieces.push(&inner[from..]);
    }
    Some(
        pieces
            .into_iter()
            .map(|piece| port(piece).or_else(|| port(&missing_colon(piece)?)))
            .collect(),
    )
}

/// One port, if it parses on its own.
fn port(piece: &[Spanned]) -> Option<Port> {
    let mut errs = Vec::new();
    let port = teg::PortAloneParser::new()
        .parse(&mut errs, piece.iter().cloned().map(Ok))
        .ok();
    port.filter(|_| errs.is_empty())
}

/// `x f32[N]` with the `:` put back (a common slip), if the piece reads that way.
fn missing_colon(piece: &[Spanned]) -> Option<Vec<Spanned>> {
    match piece {
        [name @ (_, Tok::Ident(_), _), rest @ ..]
            if matches!(rest.first(), Some((_, Tok::Ident(_), _))) =>
        {
            let at = name.2;
            let mut out = vec![name.clone(), (at, Tok::Colon, at)];
            out.extend_from_slice(rest);
            Some(out)
        }
        _ => None,
    }
}

/// The index of the `}` that closes the `{` at `open`; `None` if another item starts first
/// (which also keeps recovering many unclosed ops linear in the file's size).
fn matching_brace(tokens: &[Spanned], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        match t.1 {
            Tok::Op | Tok::Extern | Tok::Graph => return None,
            Tok::LBrace => depth += 1,
            Tok::RBrace => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}
