//! Unit tests of `tapc::passes::canonicalize::chain`, kept out of the library so that `cargo test` compiles it once.

use tapc::passes::canonicalize::chain::*;

#[test]
fn permute_reverse_permute_is_one_reverse() {
    let c = canonicalize(
        &[2, 3, 4],
        &[
            Op::Perm(vec![1, 2, 0]),
            Op::Rev(vec![0]),
            Op::Perm(vec![2, 0, 1]),
        ],
    );
    assert_eq!(c, vec![Op::Rev(vec![1])]);
}

#[test]
fn chains_that_cancel_become_empty() {
    let c = canonicalize(
        &[2, 3, 4],
        &[
            Op::Perm(vec![2, 0, 1]),
            Op::Rev(vec![0]),
            Op::Perm(vec![1, 2, 0]),
            Op::Rev(vec![2]),
        ],
    );
    assert_eq!(c, vec![]);
    let c = canonicalize(
        &[2, 3],
        &[
            Op::Rev(vec![0]),
            Op::Perm(vec![1, 0]),
            Op::Rev(vec![1]),
            Op::Perm(vec![1, 0]),
        ],
    );
    assert_eq!(c, vec![]);
}

#[test]
fn slice_then_reverse_becomes_reverse_then_slice() {
    assert_eq!(
        canonicalize(&[10], &[Op::Slice(vec![(1, 1, 2)]), Op::Rev(vec![0])]),
        vec![Op::Rev(vec![0]), Op::Slice(vec![(7, 1, 2)])]
    );
}

#[test]
fn slice_then_permute_swaps() {
    let c = canonicalize(
        &[4, 5, 6],
        &[
            Op::Slice(vec![(1, 1, 2), (0, 1, 5), (0, 1, 6)]),
            Op::Perm(vec![1, 2, 0]),
        ],
    );
    assert_eq!(
        c,
        vec![
            Op::Perm(vec![1, 2, 0]),
            Op::Slice(vec![(0, 1, 5), (0, 1, 6), (1, 1, 2)])
        ]
    );
}

#[test]
fn reshape_permute_swaps_only_where_dims_split_or_merge_cleanly() {
    // (25,3,2) reshape(5,5,6) -> permute(2 0 1)  ==  permute(1 2 0) -> reshape(6,5,5)
    let c = canonicalize(
        &[25, 3, 2],
        &[Op::Reshape(vec![5, 5, 6]), Op::Perm(vec![2, 0, 1])],
    );
    assert_eq!(c, vec![Op::Perm(vec![1, 2, 0]), Op::Reshape(vec![6, 5, 5])]);
    // (3,2) reshape(2,3) -> permute(1 0) cannot be swapped.
    let ops = vec![Op::Reshape(vec![2, 3]), Op::Perm(vec![1, 0])];
    assert_eq!(canonicalize(&[3, 2], &ops), ops);
}

#[test]
fn long_chains_take_linear_work() {
    // transpose, then drop the first row, 20,000 times: the work per op stays constant.
    let n: i64 = 20_000;
    let ops: Vec<Op> = (0..n)
        .flat_map(|k| {
            let rows = n + 8 - k;
            [
                Op::Perm(vec![1, 0]),
                Op::Slice(if k % 2 == 0 {
                    vec![(1, 1, rows - 1), (0, 1, 8)]
                } else {
                    vec![(0, 1, 8), (1, 1, rows - 1)]
                }),
            ]
        })
        .collect();
    let (c, settled) = canonicalize_counting(&[8, n + 8], &ops);
    assert_eq!(c, vec![Op::Slice(vec![(0, 1, 8), (n, 1, 8)])]);
    assert!(
        settled <= 4 * ops.len(),
        "{settled} settles for {} ops",
        ops.len()
    );
}

#[test]
fn slices_compose_including_negative_steps() {
    // [8:2:-2] then [1:3] of that = elements 6, 4
    let c = canonicalize(
        &[10],
        &[Op::Slice(vec![(8, -2, 3)]), Op::Slice(vec![(1, 1, 2)])],
    );
    assert_eq!(c, vec![Op::Slice(vec![(6, -2, 2)])]);
}
