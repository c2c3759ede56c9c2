//! Lowering of selector and generator instructions (`transpose`, `slice`, `zeros`, ...): checks
//! operand counts and attribute forms. Shape-dependent checks are the verifier's.

use super::literal::{attr_span, list_elems, literal, signed};
use crate::diag::{codes, Diagnostic, Diagnostics, Span};
use crate::ir::graph::*;
use crate::ir::{Literal, TensorType};
use crate::syntax::ast::{self, Attr};

/// The attributes of one instruction, sorted by form.
#[derive(Default)]
struct Attrs<'a> {
    list: Option<(&'a [ast::ListElem], Span)>,
    words: Vec<(&'a ast::Name, Option<(&'a ast::Literal, Span)>)>,
    bare: Vec<(&'a ast::Literal, Span)>,
}

fn sort_attrs<'a>(attrs: &'a [Attr], diags: &mut Diagnostics) -> Attrs<'a> {
    let mut out = Attrs::default();
    let mut i = 0;
    while i < attrs.len() {
        match &attrs[i] {
            Attr::List(v, s) => {
                if out.list.is_some() {
                    diags.push(bad(*s, "only one `[...]` list is allowed here"));
                }
                out.list = Some((v, *s));
            }
            Attr::Word(w) => {
                let val = match attrs.get(i + 1) {
                    Some(Attr::Number(l, s)) => {
                        i += 1;
                        Some((l, *s))
                    }
                    _ => None,
                };
                out.words.push((w, val));
            }
            Attr::Number(l, s) => out.bare.push((l, *s)),
        }
        i += 1;
    }
    out
}

fn bad(span: Span, msg: impl Into<String>) -> Diagnostic {
    let msg = msg.into();
    Diagnostic::error(codes::BAD_ATTR, msg.clone()).primary(span, msg)
}

/// The selectors by name (`permute` is another name for `transpose`), and the generators.
const SELECTORS: &str =
    "transpose permute reverse slice squeeze unsqueeze broadcast reshape concat interleave repeat pad";
const GENERATORS: &str = "zeros ones full iota rand";

/// Lowers `%r = NAME args attrs : type`.
pub(super) fn lower_instr(
    diags: &mut Diagnostics,
    instr: &ast::Name,
    args: &[ValueId],
    attrs: &[Attr],
    ty: Option<&TensorType>,
    span: Span,
) -> Option<NodeKind> {
    let a = sort_attrs(attrs, diags);
    let mut l = InstrCx {
        diags,
        instr,
        attrs: &a,
        span,
        all: attrs,
    };
    let name = instr.text.as_str();
    let is = |names: &str| names.split(' ').any(|n| n == name);
    if is(GENERATORS) {
        return l.generator_node(name, args, ty);
    }
    if name == "scatter" {
        l.arity(args, 3, 3)?;
        return super::scatter::lower_scatter(l.diags, args, attrs, span).map(NodeKind::Scatter);
    }
    if !is(SELECTORS) {
        let known = SELECTORS
            .split(' ')
            .chain(GENERATORS.split(' '))
            .chain(["apply", "source", "scatter"]);
        let mut d = Diagnostic::error(
            codes::UNKNOWN_INSTR,
            format!("unknown instruction `{name}`"),
        )
        .primary(instr.span, "not a selector or generator");
        if name == "grad" {
            d = d.note("a gradient is written `%d1, %d2 = grad %loss wrt %w1, %w2`");
        } else if let Some(best) = crate::diag::suggest::closest(name, known) {
            d = d.note(format!("help: did you mean `{best}`?"));
        }
        l.diags.push(d.note(format!(
            "selectors: {SELECTORS}; generators: {GENERATORS}; `scatter`; ops are called with `apply @op(...)`"
        )));
        return None;
    }
    l.view(name, args).map(NodeKind::View)
}

struct InstrCx<'a, 'd> {
    diags: &'d mut Diagnostics,
    instr: &'a ast::Name,
    attrs: &'a Attrs<'a>,
    all: &'a [Attr],
    span: Span,
}

impl<'a> InstrCx<'a, '_> {
    /// A generator: no operands, and its result type written.
    fn generator_node(
        &mut self,
        name: &str,
        args: &[ValueId],
        ty: Option<&TensorType>,
    ) -> Option<NodeKind> {
        self.arity(args, 0, 0)?;
        let Some(ty) = ty else {
            self.diags.push(
                Diagnostic::error(codes::BAD_ATTR, format!("`{name}` needs its result type"))
                    .primary(self.span, "missing `: dtype[shape]`")
                    .note(format!("e.g. `%z = {name} ... : f32[4, 4]`")),
            );
            return None;
        };
        let kind = self.generator(name)?;
        Some(NodeKind::Generator(Generator {
            kind,
            ty: ty.clone(),
        }))
    }

    /// A selector of the operands `args`.
    fn view(&mut self, name: &str, args: &[ValueId]) -> Option<View> {
        let (min, max) = if matches!(name, "concat" | "interleave") {
            (1, usize::MAX)
        } else {
            (1, 1)
        };
        self.arity(args, min, max)?;
        let arg = args[0];
        let view = match name {
            "transpose" | "permute" => View::Transpose {
                arg,
                perm: self.dims_list()?,
            },
            "reverse" => View::Reverse {
                arg,
                dims: self.dims_list()?,
            },
            "squeeze" => View::Squeeze {
                arg,
                dims: self.dims_list()?,
            },
            "unsqueeze" => View::Unsqueeze {
                arg,
                dims: self.dims_list()?,
            },
            "broadcast" => View::Broadcast {
                arg,
                shape: self.int_list()?,
            },
            "reshape" => View::Reshape {
                arg,
                shape: self.int_list()?,
            },
            "slice" => View::Slice {
                arg,
                dims: self.slice_list()?,
            },
            "concat" => View::Concat {
                args: args.to_vec(),
                axis: self.axis()?,
            },
            "interleave" => View::Interleave {
                args: args.to_vec(),
                axis: self.axis()?,
            },
            "repeat" => View::Repeat {
                arg,
                times: self.word_int("times")?,
                axis: self.axis()?,
            },
            _ => self.pad(arg)?,
        };
        self.no_leftovers(name)?;
        Some(view)
    }

    fn arity(&mut self, args: &[ValueId], min: usize, max: usize) -> Option<()> {
        if args.len() >= min && args.len() <= max {
            return Some(());
        }
        let want = match (min, max) {
            (0, 0) => "no operands".to_string(),
            (a, b) if a == b => format!("{a} operand(s)"),
            (a, _) => format!("at least {a} operand(s)"),
        };
        self.diags.push(
            Diagnostic::error(
                codes::ARITY,
                format!(
                    "`{}` takes {want}, but {} were given",
                    self.instr.text,
                    args.len()
                ),
            )
            .primary(self.span, "wrong number of operands"),
        );
        None
    }

    fn list(&mut self) -> Option<(&'a [ast::ListElem], Span)> {
        let l = self.attrs.list;
        if l.is_none() {
            self.diags.push(bad(
                self.instr.span.to(self.span),
                format!("`{}` needs a `[...]` list", self.instr.text),
            ));
        }
        l
    }

    fn int_list(&mut self) -> Option<Vec<i64>> {
        let (elems, span) = self.list()?;
        let mut out = Vec::new();
        for e in list_elems(self.diags, elems) {
            match e? {
                (Some(v), None, None, false) => out.push(v),
                _ => {
                    self.diags.push(bad(
                        span,
                        format!("`{}` takes a list of integers", self.instr.text),
                    ));
                    return None;
                }
            }
        }
        Some(out)
    }

    fn dims_list(&mut self) -> Option<Vec<usize>> {
        let span = self.attrs.list.map(|l| l.1).unwrap_or(self.span);
        let v = self.int_list()?;
        let dims = v
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<_>>>();
        if dims.is_none() {
            self.diags
                .push(bad(span, "dimension numbers must not be negative"));
        }
        dims
    }

    fn slice_list(&mut self) -> Option<Vec<SliceDim>> {
        let (elems, span) = self.list()?;
        let mut out = Vec::new();
        for e in list_elems(self.diags, elems) {
            match e? {
                (start, stop, step, true) => out.push(SliceDim { start, stop, step }),
                _ => {
                    self.diags.push(
                        bad(span, "slice takes `start:stop:step` ranges")
                            .note("write `3:4` to select index 3 and keep the dimension"),
                    );
                    return None;
                }
            }
        }
        Some(out)
    }

    fn word(&self, key: &str) -> Option<Option<(&'a ast::Literal, Span)>> {
        self.attrs
            .words
            .iter()
            .find(|(w, _)| w.text == key)
            .map(|(_, v)| *v)
    }

    fn word_int(&mut self, key: &str) -> Option<i64> {
        match self.word(key) {
            Some(Some((ast::Literal::Int(s), _))) => signed(self.diags, s),
            _ => {
                self.diags.push(bad(
                    self.span,
                    format!("`{}` needs `{key} N`", self.instr.text),
                ));
                None
            }
        }
    }

    fn axis(&mut self) -> Option<usize> {
        let v = self.word_int("axis")?;
        let a = usize::try_from(v).ok();
        if a.is_none() {
            self.diags
                .push(bad(self.span, "`axis` must not be negative"));
        }
        a
    }

    fn pad(&mut self, arg: ValueId) -> Option<View> {
        let (elems, span) = self.list()?;
        let mut widths = Vec::new();
        for e in list_elems(self.diags, elems) {
            match e? {
                (Some(lo), Some(hi), None, true) if lo >= 0 && hi >= 0 => widths.push((lo, hi)),
                _ => {
                    self.diags.push(bad(
                        span,
                        "pad takes `before:after` widths per dimension, both non-negative",
                    ));
                    return None;
                }
            }
        }
        let reflect = self.word("reflect");
        if let Some(Some((_, s))) = reflect {
            self.diags.push(bad(s, "`reflect` takes no value"));
            return None;
        }
        if reflect.is_some() && self.word("constant").is_some() {
            self.diags
                .push(bad(self.span, "choose one of `reflect` and `constant V`"));
            return None;
        }
        let mode = if reflect.is_some() {
            PadMode::Reflect
        } else {
            match self.word("constant") {
                Some(Some((l, s))) => PadMode::Constant(literal(self.diags, l, s)?),
                Some(None) => {
                    self.diags.push(bad(
                        self.span,
                        "`constant` needs a value, e.g. `constant 0.0`",
                    ));
                    return None;
                }
                None => PadMode::Constant(Literal::Int(0)),
            }
        };
        Some(View::Pad { arg, widths, mode })
    }

    fn generator(&mut self, name: &str) -> Option<GenKind> {
        let kind = match name {
            "zeros" => GenKind::Zeros,
            "ones" => GenKind::Ones,
            "full" => match self.attrs.bare.first() {
                Some((l, s)) => GenKind::Full(literal(self.diags, l, *s)?),
                None => {
                    self.diags.push(bad(
                        self.span,
                        "`full` needs a value, e.g. `full 2.5 : f32[3]`",
                    ));
                    return None;
                }
            },
            "iota" => GenKind::Iota { axis: self.axis()? },
            _ => {
                let seed = self.word_int("seed")?;
                match u64::try_from(seed) {
                    Ok(seed) => GenKind::Rand { seed },
                    Err(_) => {
                        self.diags
                            .push(bad(self.span, "`seed` must not be negative"));
                        return None;
                    }
                }
            }
        };
        self.no_leftovers(name)?;
        Some(kind)
    }

    /// Rejects attributes the instruction does not take, so typos are not silently ignored.
    fn no_leftovers(&mut self, name: &str) -> Option<()> {
        let takes_list = !matches!(
            name,
            "concat" | "interleave" | "repeat" | "zeros" | "ones" | "full" | "iota" | "rand"
        );
        let words: &[&str] = match name {
            "concat" | "interleave" | "iota" => &["axis"],
            "repeat" => &["times", "axis"],
            "pad" => &["constant", "reflect"],
            "rand" => &["seed"],
            _ => &[],
        };
        let mut ok = true;
        for a in self.all {
            let unexpected = match a {
                Attr::List(..) => !takes_list,
                Attr::Word(w) => !words.contains(&w.text.as_str()),
                Attr::Number(..) => false,
            };
            if unexpected {
                self.diags.push(bad(
                    attr_span(a),
                    format!("`{name}` does not take this attribute"),
                ));
                ok = false;
            }
        }
        let bare_allowed = usize::from(name == "full");
        for (_, s) in self.attrs.bare.iter().skip(bare_allowed) {
            self.diags
                .push(bad(*s, format!("`{name}` does not take a value here")));
            ok = false;
        }
        ok.then_some(())
    }
}
