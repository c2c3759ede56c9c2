//! Unit tests of `tapc::codegen::kernel`, kept out of the library so that `cargo test` compiles it once.

use tapc::codegen::kernel::*;
use tapc::ir::instance::Affine;

#[test]
fn linearizes_with_origins_and_strides() {
    // x[i + 1, 2 * j] in a view with strides [10, -1] whose element 0 is at (1, 0).
    let idx = vec![
        Affine {
            terms: vec![(0, 1)],
            constant: 1,
        },
        Affine {
            terms: vec![(1, 2)],
            constant: 0,
        },
    ];
    let a = linear(&idx, &[10, -1], &[1, 0]);
    assert_eq!(a.coeff(0), 10);
    assert_eq!(a.coeff(1), -2);
    assert_eq!(a.constant, 0);
}
