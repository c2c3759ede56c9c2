//! Gathered accesses (`E[ids[b, s], h]`): the index tensor must be an integer input read at
//! affine indices, and the gathered tensor an input. The result is a [`CKind::Gather`]; the
//! bounds of a gathered dimension are checked at run time (docs/teg.md §12). This file extends
//! the lowering context of `kernel.rs` with methods; `kernel.rs` imports nothing from it.

use super::{Lx, Scope, R};
use crate::diag::{codes, Span};
use crate::ir::instance::{Affine, CExpr, CKind, GatherLoad, Src};
use crate::ir::kernel::{Gather, IOp};
use crate::print::iexpr_text;
use std::collections::HashMap;

impl Lx<'_> {
    /// The index load and the affine offset of gathered index `g`.
    pub(super) fn gathered(
        &mut self,
        g: &Gather,
        scope: &HashMap<String, Scope>,
    ) -> R<(CExpr, Affine)> {
        let Some(k) = self.op.inputs.iter().position(|p| p.name == g.tensor) else {
            let known =
                self.op.ports().any(|p| p.name == g.tensor) || self.temp_of.contains_key(&g.tensor);
            if known || self.targets.contains(g.tensor.as_str()) {
                let msg = format!(
                    "gathered indices are read from inputs; `{}` is not an input",
                    g.tensor
                );
                self.err(codes::BAD_GATHER, msg, g.tensor_span, "not an input");
            } else if !self.failed.contains(&g.tensor) {
                self.undefined(&g.tensor, g.tensor_span);
            }
            return Err(());
        };
        let dtype = self.inputs[k].dtype;
        if !dtype.is_int() {
            let msg = format!(
                "a gathered index must be an integer; `{}` is {}",
                g.tensor,
                dtype.name()
            );
            self.err(
                codes::BAD_GATHER,
                msg,
                g.tensor_span,
                "not an integer tensor",
            );
            return Err(());
        }
        let rank = self.inputs[k].shape.len();
        if g.indices.len() != rank {
            let msg = format!(
                "`{}` has rank {rank} but is indexed with {} indices",
                g.tensor,
                g.indices.len()
            );
            self.err(codes::RANK_MISMATCH, msg, g.span, "wrong number of indices");
            return Err(());
        }
        let mut index = Vec::new();
        let mut texts = Vec::new();
        for e in &g.indices {
            index.push(self.affine(e, scope)?);
            texts.push((e.span(), iexpr_text(e)));
        }
        let offset = match &g.offset {
            Some((op, e)) => {
                let a = self.affine(e, scope)?;
                if *op == IOp::Sub {
                    a.scale(-1).ok_or(())?
                } else {
                    a
                }
            }
            None => Affine::constant(0),
        };
        let load = CExpr {
            kind: CKind::Load {
                src: Src::Input(k),
                index,
                texts,
            },
            dtype,
        };
        Ok((load, offset))
    }

    /// The load of `name` (input `src`) at `index`, where `by` holds the gathered dimensions.
    pub(super) fn gather_load(
        &mut self,
        name: &str,
        src: Src,
        index: Vec<Affine>,
        by: Vec<Option<CExpr>>,
        texts: Vec<(Span, String)>,
        span: Span,
    ) -> R<CKind> {
        let Src::Input(input) = src else {
            let msg = format!("a gather reads an input; `{name}` is a temporary");
            self.err(codes::BAD_GATHER, msg, span, "gathered from a temporary");
            return Err(());
        };
        let list: Vec<&str> = texts.iter().map(|t| t.1.as_str()).collect();
        Ok(CKind::Gather(Box::new(GatherLoad {
            input,
            index,
            by,
            text: format!("{name}[{}]", list.join(", ")),
            texts,
        })))
    }
}
