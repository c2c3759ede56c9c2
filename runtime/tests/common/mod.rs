//! What the runtime's tests of hand-built plans share: kernels written in Rust with the
//! kernel ABI (`i32 kernel(i8** bases, i64* range)`).

/// y[i] = 2 * x[i] over the chunk's range (f32; `bases` = [x, y]).
///
/// # Safety
/// `bases` holds two f32 buffers covering the range.
pub unsafe extern "C-unwind" fn double(bases: *const *mut u8, range: *const i64) -> i32 {
    let x = *bases as *const f32;
    let y = *bases.add(1) as *mut f32;
    for i in *range..*range.add(1) {
        *y.offset(i as isize) = 2.0 * *x.offset(i as isize);
    }
    0
}
