//! Counted loops and the exported kernel entry (`i32 name(i8** bases, i64* range)`), shared
//! by apply kernels (`kernel`) and gather/generator kernels (`copy`).

use super::ops::{Gen, R, V};
use super::ptr;
use super::target::Host;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::module::Linkage;
use inkwell::types::{BasicMetadataTypeEnum, BasicTypeEnum};
use inkwell::values::{FunctionValue, IntValue};
use inkwell::IntPredicate;

type Body<'s, 'ctx, K> = dyn FnMut(&mut K, IntValue<'ctx>, Vec<V<'ctx>>) -> R<Vec<V<'ctx>>> + 's;

/// Emits counted loops; shared by every kernel kind.
pub struct Loops<'g, 'a, 'ctx> {
    pub g: &'g Gen<'a, 'ctx>,
    pub f: FunctionValue<'ctx>,
}

impl<'ctx> Loops<'_, '_, 'ctx> {
    /// `for (iv = lo; iv < hi; iv += step)` carrying `init` around; returns the final values
    /// (`init` when the loop does not run).
    pub fn counted<K>(
        &self,
        k: &mut K,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        step: i64,
        init: Vec<V<'ctx>>,
        body: &mut Body<'_, 'ctx, K>,
    ) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        let b = g.b;
        let pre = b.get_insert_block().expect("positioned");
        let header = g.cx.append_basic_block(self.f, "loop");
        let exit = g.cx.append_basic_block(self.f, "done");
        let enter = b
            .build_int_compare(IntPredicate::SLT, lo, hi, "")
            .expect("positioned");
        b.build_conditional_branch(enter, header, exit)
            .expect("positioned");
        b.position_at_end(header);
        let iv = b.build_phi(g.cx.i64_type(), "i").expect("positioned");
        iv.add_incoming(&[(&lo, pre)]);
        let phis: Vec<_> = init
            .iter()
            .map(|v| {
                let p = b.build_phi(v.get_type(), "acc").expect("positioned");
                p.add_incoming(&[(v, pre)]);
                p
            })
            .collect();
        let cur = phis.iter().map(|p| p.as_basic_value()).collect();
        let ivv = iv.as_basic_value().into_int_value();
        let vals = body(k, ivv, cur)?;
        let latch = b.get_insert_block().expect("positioned");
        let next = b.build_int_add(ivv, g.i64c(step), "").expect("positioned");
        iv.add_incoming(&[(&next, latch)]);
        for (p, v) in phis.iter().zip(&vals) {
            p.add_incoming(&[(v, latch)]);
        }
        let more = b
            .build_int_compare(IntPredicate::SLT, next, hi, "")
            .expect("positioned");
        b.build_conditional_branch(more, header, exit)
            .expect("positioned");
        b.position_at_end(exit);
        Ok(init
            .iter()
            .zip(&vals)
            .map(|(i, v)| {
                let p = b.build_phi(i.get_type(), "out").expect("positioned");
                p.add_incoming(&[(i, pre), (v, latch)]);
                p.as_basic_value()
            })
            .collect())
    }

    /// `if cond { then() }`.
    pub fn when<K>(
        &self,
        k: &mut K,
        cond: IntValue<'ctx>,
        then: &mut dyn FnMut(&mut K) -> R<()>,
    ) -> R<()> {
        let b = self.g.b;
        let yes = self.g.cx.append_basic_block(self.f, "then");
        let after = self.g.cx.append_basic_block(self.f, "after");
        b.build_conditional_branch(cond, yes, after)
            .expect("positioned");
        b.position_at_end(yes);
        then(k)?;
        b.build_unconditional_branch(after).expect("positioned");
        b.position_at_end(after);
        Ok(())
    }
}

/// Adds the exported entry `name(i8** bases, i64* range) -> i32` that loads the arguments
/// and calls `body(ptr args..., lo0, hi0, ...)`, whose pointer parameters are `noalias`
/// (except an in-place pair, [`super::ops::Gen::alias`]).
pub fn wrap<'ctx>(
    g: &Gen<'_, 'ctx>,
    host: &Host,
    name: &str,
    arg_types: &[BasicTypeEnum<'ctx>],
    dims: usize,
) -> (FunctionValue<'ctx>, FunctionValue<'ctx>) {
    let cx = g.cx;
    let i64t = cx.i64_type();
    let mut params: Vec<BasicMetadataTypeEnum> =
        arg_types.iter().map(|&t| ptr::ptr_to(t).into()).collect();
    params.extend((0..2 * dims).map(|_| BasicMetadataTypeEnum::from(i64t)));
    let body = g.m.add_function(
        &format!("{name}.body"),
        cx.i32_type().fn_type(&params, false),
        Some(Linkage::Internal),
    );
    host.tag(cx, body);
    let noalias = Attribute::get_named_enum_kind_id("noalias");
    let noinline = Attribute::get_named_enum_kind_id("noinline");
    let aliased = |k: usize| g.alias.is_some_and(|(a, b)| k == a || k == b);
    for k in (0..arg_types.len()).filter(|&k| !aliased(k)) {
        body.add_attribute(
            AttributeLoc::Param(k as u32),
            cx.create_enum_attribute(noalias, 0),
        );
    }
    // An in-place body is inlined into its entry, where both arguments are one pointer.
    let inline = if g.alias.is_some() {
        Attribute::get_named_enum_kind_id("alwaysinline")
    } else {
        noinline
    };
    body.add_attribute(AttributeLoc::Function, cx.create_enum_attribute(inline, 0));
    let bp = ptr::byte_ptr(cx);
    let entry_ty = cx.i32_type().fn_type(
        &[
            ptr::ptr_to(bp.into()).into(),
            ptr::ptr_to(i64t.into()).into(),
        ],
        false,
    );
    let entry = g.m.add_function(name, entry_ty, None);
    host.tag(cx, entry);
    let bb = cx.append_basic_block(entry, "entry");
    g.b.position_at_end(bb);
    let bases = entry.get_nth_param(0).expect("param").into_pointer_value();
    let range = entry.get_nth_param(1).expect("param").into_pointer_value();
    let mut args: Vec<V> = Vec::new();
    for (k, &t) in arg_types.iter().enumerate() {
        let from = match g.alias {
            Some((a, b)) if a == k => b,
            _ => k,
        };
        let slot = ptr::element(g.b, bases, bp.into(), g.i64c(from as i64));
        let p = ptr::load(g.b, bp.into(), slot).into_pointer_value();
        args.push(ptr::cast(g.b, p, t).into());
    }
    for d in 0..2 * dims {
        let slot = ptr::element(g.b, range, i64t.into(), g.i64c(d as i64));
        args.push(ptr::load(g.b, i64t.into(), slot));
    }
    let r = g.call(body, &args);
    g.b.build_return(Some(&r)).expect("positioned");
    let bb = cx.append_basic_block(body, "entry");
    g.b.position_at_end(bb);
    (entry, body)
}
