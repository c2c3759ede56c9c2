//! Names in the text: every definition and use of a `%value`, `@op`, `@sink`, `@source` and
//! graph, found from the tokens alone so that navigation works in files that do not compile.

use crate::syntax::lexer::Tok;
use logos::Logos;
use std::ops::Range;

/// What a name refers to. Values, sinks and sources are scoped to one graph (its index among
/// the graphs of the text, in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sym {
    Op(String),
    Graph(String),
    Value { graph: usize, name: String },
    Sink { graph: usize, name: String },
    Source { graph: usize, name: String },
}

/// One occurrence of a name: its span (sigil included) and whether it defines the name.
#[derive(Clone, Debug)]
pub struct Occurrence {
    pub sym: Sym,
    pub span: Range<usize>,
    pub def: bool,
}

/// A graph statement that defines values: where it is and whether its result types are written.
#[derive(Clone, Debug)]
pub struct DefStmt {
    pub graph: usize,
    pub span: Range<usize>,
    pub results: Vec<String>,
    /// An apply or instruction with no `: types` written (a source always has its type).
    pub inferred: bool,
}

/// An op or graph declaration: name and span of the whole item.
#[derive(Clone, Debug)]
pub struct Item {
    pub name: String,
    pub is_graph: bool,
    pub name_span: Range<usize>,
    pub span: Range<usize>,
}

#[derive(Default)]
pub struct Names {
    pub occurrences: Vec<Occurrence>,
    pub items: Vec<Item>,
    pub stmts: Vec<DefStmt>,
}

impl Names {
    pub fn scan(src: &str) -> Names {
        let toks: Vec<(Tok, Range<usize>)> = Tok::lexer(src)
            .spanned()
            .filter_map(|(t, r)| t.ok().map(|t| (t, r)))
            .collect();
        let mut names = Names::default();
        let mut graphs = 0;
        let mut i = 0;
        while i < toks.len() {
            let is_item = matches!(toks[i].0, Tok::Op | Tok::Graph);
            let Some((Tok::Global(name), name_span)) = toks.get(i + 1).filter(|_| is_item) else {
                i += 1;
                continue;
            };
            let is_graph = toks[i].0 == Tok::Graph;
            let start = if i > 0 && toks[i - 1].0 == Tok::Extern {
                toks[i - 1].1.start
            } else {
                toks[i].1.start
            };
            let sym = if is_graph {
                Sym::Graph(name.clone())
            } else {
                Sym::Op(name.clone())
            };
            names.occurrences.push(Occurrence {
                sym,
                span: name_span.clone(),
                def: true,
            });
            // The body: from the first `{` at bracket depth 0 to its matching `}`.
            let mut j = i + 2;
            let mut parens = 0i32;
            while j < toks.len() && !(parens == 0 && toks[j].0 == Tok::LBrace) {
                match toks[j].0 {
                    Tok::LParen | Tok::LBracket => parens += 1,
                    Tok::RParen | Tok::RBracket => parens -= 1,
                    Tok::Op | Tok::Graph if parens <= 0 => break,
                    _ => {}
                }
                j += 1;
            }
            let body_start = j + 1;
            let mut depth = 0i32;
            while j < toks.len() {
                match toks[j].0 {
                    Tok::LBrace => depth += 1,
                    Tok::RBrace => depth -= 1,
                    _ => {}
                }
                if depth <= 0 && toks[j].0 == Tok::RBrace {
                    break;
                }
                j += 1;
            }
            let end = j.min(toks.len());
            if is_graph && body_start <= end {
                names.graph_body(graphs, &toks[body_start..end]);
            }
            graphs += usize::from(is_graph);
            names.items.push(Item {
                name: name.clone(),
                is_graph,
                name_span: name_span.clone(),
                span: start..toks.get(end).map_or(src.len(), |t| t.1.end),
            });
            i = end.max(i + 2);
        }
        names
    }

    /// Splits a graph body into statements (line breaks outside brackets, not after a token
    /// that continues the statement) and records each one's names.
    fn graph_body(&mut self, graph: usize, toks: &[(Tok, Range<usize>)]) {
        let mut start = 0;
        let mut depth = 0i32;
        for k in 0..=toks.len() {
            let end_here = match toks.get(k) {
                None => true,
                Some((Tok::LParen | Tok::LBracket | Tok::LBrace, _)) => {
                    depth += 1;
                    false
                }
                Some((Tok::RParen | Tok::RBracket | Tok::RBrace, _)) => {
                    depth -= 1;
                    false
                }
                Some((Tok::Newline, _)) => {
                    depth <= 0
                        && !matches!(
                            k.checked_sub(1).map(|p| &toks[p].0),
                            Some(Tok::Eq | Tok::Comma | Tok::Colon | Tok::Arrow)
                        )
                }
                _ => false,
            };
            if end_here {
                let stmt: Vec<&(Tok, Range<usize>)> = toks[start..k]
                    .iter()
                    .filter(|t| t.0 != Tok::Newline)
                    .collect();
                if !stmt.is_empty() {
                    self.statement(graph, &stmt);
                }
                start = k + 1;
                depth = depth.max(0);
            }
        }
    }

    fn statement(&mut self, graph: usize, toks: &[&(Tok, Range<usize>)]) {
        let value = |name: &str| Sym::Value {
            graph,
            name: name.to_string(),
        };
        let mut push = |sym: Sym, span: &Range<usize>, def: bool| {
            self.occurrences.push(Occurrence {
                sym,
                span: span.clone(),
                def,
            })
        };
        let eq = toks.iter().position(|t| t.0 == Tok::Eq);
        let first = eq.map_or(0, |e| e + 1);
        let mut results = Vec::new();
        for (t, span) in &toks[..eq.unwrap_or(0)] {
            if let Tok::Local(n) = t {
                push(value(n), span, true);
                results.push(n.clone());
            }
        }
        let lead = toks.get(first).map(|t| &t.0);
        let mut annotated = false;
        let mut depth = 0i32;
        for (k, (t, span)) in toks.iter().enumerate().skip(first) {
            let prev = (k > first).then(|| &toks[k - 1].0);
            match t {
                Tok::LParen | Tok::LBracket => depth += 1,
                Tok::RParen | Tok::RBracket => depth -= 1,
                Tok::Colon if depth == 0 => annotated = true,
                Tok::Local(n) => push(value(n), span, false),
                Tok::Global(n) => {
                    let name = n.clone();
                    // `@name` after `apply` is an op, after `source` or `state` a source (and
                    // after `update`, a use of that state), else a sink.
                    let state = |w| prev.is_some_and(|t| is_word(t, w));
                    let sym = match prev {
                        Some(Tok::Apply) => Sym::Op(name),
                        Some(Tok::Source) => Sym::Source { graph, name },
                        _ if state("state") || state("update") => Sym::Source { graph, name },
                        _ => Sym::Sink { graph, name },
                    };
                    let def = matches!(prev, Some(Tok::Source | Tok::Sink)) || state("state");
                    push(sym, span, def);
                }
                _ => {}
            }
        }
        if !results.is_empty() {
            let span = toks[0].1.start..toks[toks.len() - 1].1.end;
            self.stmts.push(DefStmt {
                graph,
                span,
                results,
                inferred: !annotated
                    && lead != Some(&Tok::Source)
                    && !lead.is_some_and(|t| is_word(t, "state")),
            });
        }
    }

    /// The occurrence whose span holds `offset` (or ends at it: the cursor just after a name).
    pub fn at(&self, offset: usize) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .find(|o| o.span.contains(&offset))
            .or_else(|| self.occurrences.iter().find(|o| o.span.end == offset))
    }

    pub fn definition(&self, sym: &Sym) -> Option<&Occurrence> {
        self.occurrences.iter().find(|o| o.def && o.sym == *sym)
    }

    pub fn references<'a>(&'a self, sym: &'a Sym) -> impl Iterator<Item = &'a Occurrence> + 'a {
        self.occurrences.iter().filter(move |o| o.sym == *sym)
    }
}

/// Whether `t` is the bare word `w` (`state` and `update` are not reserved words).
fn is_word(t: &Tok, w: &str) -> bool {
    matches!(t, Tok::Ident(s) if s == w)
}
