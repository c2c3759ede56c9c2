//! Unit tests of `tapc::passes::fuse::views`, kept out of the library so that `cargo test` compiles it once.

use tapc::ir::graph::View;
use tapc::ir::graph::{SliceDim, ValueId};
use tapc::passes::fuse::views::*;

fn apply(m: &ViewMap, coord: &[i64]) -> Vec<i64> {
    m.rows.iter().map(|r| r.eval(coord)).collect()
}

#[test]
fn transpose_and_slice_maps() {
    let t = View::Transpose {
        arg: ValueId(0),
        perm: vec![1, 2, 0],
    };
    let m = view_map(&t, &[2, 3, 4], &[3, 4, 2]).unwrap();
    // out[c] = x[c'] with c'[p_i] = c[i]
    assert_eq!(apply(&m, &[1, 2, 0]), vec![0, 1, 2]);
    let s = View::Slice {
        arg: ValueId(0),
        dims: vec![SliceDim::from_count(8, -2, 3)],
    };
    let m = view_map(&s, &[10], &[3]).unwrap();
    assert_eq!(apply(&m, &[2]), vec![4]);
}

#[test]
fn reshape_splits_fold_but_merges_do_not() {
    let r = |arg| View::Reshape { arg, shape: vec![] };
    let m = view_map(&r(ValueId(0)), &[6, 5], &[1, 2, 3, 5, 1]).unwrap();
    assert_eq!(apply(&m, &[0, 1, 2, 4, 0]), vec![5, 4]);
    assert!(view_map(&r(ValueId(0)), &[2, 3], &[6]).is_none());
    assert!(view_map(&r(ValueId(0)), &[4, 3], &[3, 4]).is_none());
    let m = view_map(&r(ValueId(0)), &[1, 6], &[6]).unwrap();
    assert_eq!(apply(&m, &[5]), vec![0, 5]);
}

#[test]
fn broadcast_squeeze_unsqueeze_maps() {
    let b = View::Broadcast {
        arg: ValueId(0),
        shape: vec![4, 3, 5],
    };
    let m = view_map(&b, &[3, 1], &[4, 3, 5]).unwrap();
    assert_eq!(apply(&m, &[2, 1, 4]), vec![1, 0]);
    let s = View::Squeeze {
        arg: ValueId(0),
        dims: vec![0, 2],
    };
    let m = view_map(&s, &[1, 3, 1], &[3]).unwrap();
    assert_eq!(apply(&m, &[2]), vec![0, 2, 0]);
    let un = View::Unsqueeze {
        arg: ValueId(0),
        dims: vec![1],
    };
    let m = view_map(&un, &[3, 4], &[3, 1, 4]).unwrap();
    assert_eq!(apply(&m, &[2, 0, 3]), vec![2, 3]);
}
