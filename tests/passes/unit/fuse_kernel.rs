//! Unit tests of `tapc::passes::fuse::kernel`, kept out of the library so that `cargo test` compiles it once.

use tapc::ir::instance::{Affine, CKind};
use tapc::ir::kernel::BinOp;
use tapc::passes::fuse::kernel::*;
use tapc_runtime::DType;

#[test]
fn affine_values_print_as_integer_expressions() {
    let a = Affine {
        terms: vec![(0, -1)],
        constant: 4,
    };
    let e = affine_value(&a).unwrap();
    // 4 - i
    assert!(matches!(e.kind, CKind::Binary(BinOp::Sub, _, _)));
    assert_eq!(e.dtype, DType::I64);
    let big = Affine {
        terms: vec![(0, i64::MIN)],
        constant: 0,
    };
    assert!(affine_value(&big).is_err());
}

#[test]
fn reserved_words_are_not_names() {
    let late = [
        "bf16", "f16", "u8", "i16", "u64", "popcount", "argmax", "argmin", "mean",
    ];
    for bad in ["sum", "max", "f32", "index", "1x", "a.b", ""]
        .into_iter()
        .chain(late)
    {
        assert!(!ident_ok(bad), "{bad}");
    }
    assert!(ident_ok("h_0"));
}
