//! Unit tests of `tapc::codegen::schedule`, kept out of the library so that `cargo test` compiles it once.

use tapc::codegen::schedule::reshape_strides;

#[test]
fn reshapes_that_keep_merged_dims_contiguous_are_views() {
    // Columns 768..1536 of a [T, 2304] buffer split into 12 heads of 64.
    assert_eq!(
        reshape_strides(&[8, 768], &[2304, 1], &[8, 12, 64]),
        Some(vec![2304, 64, 1])
    );
    // A reversed row split in two, size-1 dims in and out, a prime-sized dim (a size-1
    // dim inside a group gets the row-major stride; it is never stepped).
    assert_eq!(
        reshape_strides(&[1, 6, 7], &[42, -7, 1], &[2, 3, 1, 7]),
        Some(vec![-21, -7, 7, 1])
    );
    assert_eq!(
        reshape_strides(&[5, 1, 3], &[6, 3, 2], &[5, 3, 1]),
        Some(vec![6, 2, 0])
    );
    // Merging a transposed pair, or a slice's rows with its columns, needs a copy.
    assert_eq!(reshape_strides(&[4, 3], &[1, 4], &[12]), None);
    assert_eq!(reshape_strides(&[8, 768], &[2304, 1], &[6144]), None);
}
