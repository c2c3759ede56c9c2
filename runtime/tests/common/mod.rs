//! What the runtime's tests of hand-built plans share: kernels written in Rust with the
//! kernel ABI (`i32 kernel(i8** bases, i64* range)`) and the pieces of a plan.

use tapc_runtime::plan::{Arg, Buffer, Init};

/// An argument covering the whole of `buffer` (`bytes` long).
pub fn whole(buffer: u32, bytes: u64) -> Arg {
    Arg {
        buffer,
        offset: 0,
        lo: 0,
        hi: bytes as i64,
    }
}

/// Buffer 0 read from source 0, then `scratch` scratch buffers, all `bytes` long.
pub fn source_then_scratch(bytes: u64, scratch: usize) -> Vec<Buffer> {
    let source = Buffer {
        bytes,
        init: Init::Source(0),
    };
    let more = (0..scratch).map(|_| Buffer {
        bytes,
        init: Init::Scratch,
    });
    std::iter::once(source).chain(more).collect()
}

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
