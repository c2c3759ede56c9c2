//! Vector memory access in kernels: element-aligned (masked) vector loads and stores,
//! gathers and scatters, and void calls of intrinsics.

use super::ops::{Gen, V};
use super::ptr;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, FunctionValue, PointerValue, VectorValue};

impl<'ctx> Gen<'_, 'ctx> {
    /// Calls a function returning nothing.
    pub fn call_void(&self, f: FunctionValue<'ctx>, args: &[V<'ctx>]) {
        let args: Vec<inkwell::values::BasicMetadataValueEnum> =
            args.iter().map(|&a| a.into()).collect();
        self.b.build_call(f, &args, "").expect("positioned");
    }

    /// Calls an intrinsic returning nothing.
    pub fn intrinsic_void(&self, name: &str, tys: &[BasicTypeEnum<'ctx>], args: &[V<'ctx>]) {
        let f = inkwell::intrinsics::Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.m, tys))
            .unwrap_or_else(|| panic!("LLVM 14 has intrinsic {name}"));
        self.call_void(f, args);
    }

    /// A vector load of `lanes` elements at `p` (element-aligned).
    pub fn vload(
        &self,
        ety: BasicTypeEnum<'ctx>,
        p: PointerValue<'ctx>,
        mask: Option<VectorValue<'ctx>>,
    ) -> V<'ctx> {
        let vt = self.vec_of(ety, self.w);
        let align = self.i32c(elem_bytes(ety) as i64);
        match mask {
            None => {
                let v = ptr::load(self.b, vt.into(), p);
                if let Some(i) = v.as_instruction_value() {
                    let _ = i.set_alignment(elem_bytes(ety));
                }
                v
            }
            Some(m) => {
                let vp = ptr::cast(self.b, p, vt.into());
                self.intrinsic(
                    "llvm.masked.load",
                    &[vt.into(), ptr::masked_mem_ptr(vt.into())],
                    &[vp.into(), align.into(), m.into(), vt.const_zero().into()],
                )
            }
        }
    }

    /// A vector store at `p` (element-aligned).
    pub fn vstore(&self, p: PointerValue<'ctx>, v: V<'ctx>, mask: Option<VectorValue<'ctx>>) {
        let vt = v.get_type();
        let ety = v.into_vector_value().get_type().get_element_type();
        let bytes = elem_bytes(ety);
        match mask {
            None => {
                let vp = ptr::cast(self.b, p, vt);
                let s = self.b.build_store(vp, v).expect("positioned");
                let _ = s.set_alignment(bytes);
            }
            Some(m) => {
                let vp = ptr::cast(self.b, p, vt);
                self.intrinsic_void(
                    "llvm.masked.store",
                    &[vt, ptr::masked_mem_ptr(vt)],
                    &[v, vp.into(), self.i32c(bytes as i64).into(), m.into()],
                );
            }
        }
    }

    fn all_true(&self) -> VectorValue<'ctx> {
        let t = self.cx.bool_type().const_int(1, false);
        inkwell::types::VectorType::const_vector(&vec![t; self.w as usize])
    }

    /// A gather of `ety` elements at `base + offsets` (i64 vector).
    pub fn gather(
        &self,
        ety: BasicTypeEnum<'ctx>,
        base: PointerValue<'ctx>,
        offsets: VectorValue<'ctx>,
        mask: Option<VectorValue<'ctx>>,
    ) -> V<'ctx> {
        let ptrs = ptr::elements(self.b, base, ety, offsets);
        let vt = self.vec_of(ety, self.w);
        let m = mask.unwrap_or_else(|| self.all_true());
        self.intrinsic(
            "llvm.masked.gather",
            &[vt.into(), ptr::gather_ptrs(ety, self.w)],
            &[
                ptrs.into(),
                self.i32c(elem_bytes(ety) as i64).into(),
                m.into(),
                vt.const_zero().into(),
            ],
        )
    }

    pub fn scatter(
        &self,
        base: PointerValue<'ctx>,
        offsets: VectorValue<'ctx>,
        v: V<'ctx>,
        mask: Option<VectorValue<'ctx>>,
    ) {
        let ety = v.into_vector_value().get_type().get_element_type();
        let ptrs = ptr::elements(self.b, base, ety, offsets);
        let m = mask.unwrap_or_else(|| self.all_true());
        self.intrinsic_void(
            "llvm.masked.scatter",
            &[v.get_type(), ptr::gather_ptrs(ety, self.w)],
            &[
                v,
                ptrs.into(),
                self.i32c(elem_bytes(ety) as i64).into(),
                m.into(),
            ],
        );
    }
}

pub(super) fn elem_bytes(t: BasicTypeEnum<'_>) -> u32 {
    match t {
        BasicTypeEnum::FloatType(f) if f == f.get_context().f32_type() => 4,
        BasicTypeEnum::FloatType(_) => 8,
        BasicTypeEnum::IntType(i) => i.get_bit_width().div_ceil(8),
        _ => 8,
    }
}
