//! Unit tests of `tapc::passes::fuse::affine`, kept out of the library so that `cargo test` compiles it once.

use tapc::ir::instance::{Affine, Var};
use tapc::passes::fuse::affine::*;

fn var(name: &str, lo: i64, hi: i64) -> Var {
    Var {
        name: name.into(),
        range: (lo, hi),
    }
}

#[test]
fn injectivity_needs_every_wide_loop_variable_alone_in_some_dim() {
    let vars = [
        var("i", 0, 4),
        var("j", 0, 5),
        var("k", 0, 3),
        var("u", 0, 1),
    ];
    let a = |terms: Vec<(usize, i64)>, c| Affine { terms, constant: c };
    // x[i, k] inside y[i, j] = sum[k](...): j never indexes it.
    assert!(!injective(
        &[a(vec![(0, 1)], 0), a(vec![(2, 1)], 0)],
        &[0, 1, 2],
        &vars
    ));
    assert!(injective(
        &[a(vec![(0, 1)], 0), a(vec![(2, 1)], 0)],
        &[0, 2],
        &vars
    ));
    // Reversed and strided indices are still injective; a window (i + k) is not.
    assert!(injective(
        &[a(vec![(0, -1)], 3), a(vec![(1, 2)], 1)],
        &[0, 1],
        &vars
    ));
    assert!(!injective(&[a(vec![(0, 1), (2, 1)], 0)], &[0, 2], &vars));
    // A variable with a single value does not count.
    assert!(injective(&[a(vec![(0, 1), (3, 1)], 0)], &[0, 3], &vars));
}
