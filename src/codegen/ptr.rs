//! Every pointer-typed construct the code generator builds, in one place.
//!
//! LLVM 14 has typed pointers (`float*`), later versions opaque ones (`ptr`): loads, GEPs,
//! element pointers and the pointer overloads of the masked intrinsics differ between the two.
//! Only this module knows which one is in use, so supporting a newer LLVM (inkwell's
//! `llvm18-0` feature, say) means changing this file alone.

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::llvm_sys;
use inkwell::module::Module;
use inkwell::types::{AsTypeRef, BasicType, BasicTypeEnum, PointerType};
use inkwell::values::{
    AsValueRef, BasicValueEnum, FunctionValue, IntValue, PointerValue, VectorValue,
};
use inkwell::AddressSpace;

/// A pointer to values of type `ty`.
pub fn ptr_to<'ctx>(ty: BasicTypeEnum<'ctx>) -> PointerType<'ctx> {
    ty.ptr_type(AddressSpace::default())
}

/// `i8*`: the type of the untyped base pointers the runtime passes.
pub fn byte_ptr(cx: &Context) -> PointerType<'_> {
    cx.i8_type().ptr_type(AddressSpace::default())
}

/// Reinterprets `p` as a pointer to `ty` (a no-op with opaque pointers).
pub fn cast<'ctx>(
    b: &Builder<'ctx>,
    p: PointerValue<'ctx>,
    ty: BasicTypeEnum<'ctx>,
) -> PointerValue<'ctx> {
    b.build_pointer_cast(p, ptr_to(ty), "")
        .expect("builder is positioned")
}

/// `&base[index]` for a pointer to elements of type `elem`.
pub fn element<'ctx>(
    b: &Builder<'ctx>,
    base: PointerValue<'ctx>,
    elem: BasicTypeEnum<'ctx>,
    index: IntValue<'ctx>,
) -> PointerValue<'ctx> {
    let p = cast(b, base, elem);
    // SAFETY: kernels only form addresses of elements their verified accesses reach.
    unsafe { b.build_gep(p, &[index], "") }.expect("builder is positioned")
}

/// Loads one value of type `ty` from `p`.
pub fn load<'ctx>(
    b: &Builder<'ctx>,
    ty: BasicTypeEnum<'ctx>,
    p: PointerValue<'ctx>,
) -> BasicValueEnum<'ctx> {
    let p = cast(b, p, ty);
    b.build_load(p, "").expect("builder is positioned")
}

/// Stores `v` at `p`.
pub fn store<'ctx>(b: &Builder<'ctx>, p: PointerValue<'ctx>, v: BasicValueEnum<'ctx>) {
    let p = cast(b, p, v.get_type());
    b.build_store(p, v).expect("builder is positioned");
}

/// A vector of element addresses `base + offsets[l]` (for gathers and scatters).
pub fn elements<'ctx>(
    b: &Builder<'ctx>,
    base: PointerValue<'ctx>,
    elem: BasicTypeEnum<'ctx>,
    offsets: VectorValue<'ctx>,
) -> VectorValue<'ctx> {
    let p = cast(b, base, elem);
    let mut idx = [offsets.as_value_ref()];
    // SAFETY: a GEP with one vector index over a scalar base yields a vector of pointers;
    // the builder and values are live and belong to the same context.
    unsafe {
        let v = llvm_sys::core::LLVMBuildGEP2(
            b.as_mut_ptr(),
            elem.as_type_ref(),
            p.as_value_ref(),
            idx.as_mut_ptr(),
            1,
            c"".as_ptr(),
        );
        VectorValue::new(v)
    }
}

/// The pointer type a masked load/store of `vec` takes (the intrinsic's pointer overload).
pub fn masked_mem_ptr(vec: BasicTypeEnum<'_>) -> BasicTypeEnum<'_> {
    ptr_to(vec).into()
}

/// The vector-of-pointers type of a gather/scatter of `elem` over `lanes` lanes.
pub fn gather_ptrs(elem: BasicTypeEnum<'_>, lanes: u32) -> BasicTypeEnum<'_> {
    ptr_to(elem).vec_type(lanes).into()
}

/// Declares `name` (`i8* malloc(i64)`, `void free(i8*)`) if missing.
pub fn libc_alloc<'ctx>(
    cx: &'ctx Context,
    m: &Module<'ctx>,
) -> (FunctionValue<'ctx>, FunctionValue<'ctx>) {
    let bp = byte_ptr(cx);
    let malloc = m.get_function("malloc").unwrap_or_else(|| {
        m.add_function("malloc", bp.fn_type(&[cx.i64_type().into()], false), None)
    });
    let free = m.get_function("free").unwrap_or_else(|| {
        m.add_function("free", cx.void_type().fn_type(&[bp.into()], false), None)
    });
    (malloc, free)
}

/// A pointer to a constant copy of `text` (its bytes, then a NUL).
pub fn string<'ctx>(b: &Builder<'ctx>, text: &str) -> PointerValue<'ctx> {
    b.build_global_string_ptr(text, "tapc.text")
        .expect("builder is positioned")
        .as_pointer_value()
}

/// `void name(i8*, i64, i64, i64, i64)`: the runtime's report of a bad gathered index.
pub fn gather_fault_fn<'ctx>(
    cx: &'ctx Context,
    m: &Module<'ctx>,
    name: &str,
) -> FunctionValue<'ctx> {
    m.get_function(name).unwrap_or_else(|| {
        let i64t = cx.i64_type().into();
        let ty = cx
            .void_type()
            .fn_type(&[byte_ptr(cx).into(), i64t, i64t, i64t, i64t], false);
        m.add_function(name, ty, None)
    })
}
