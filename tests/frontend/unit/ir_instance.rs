//! Unit tests of `tapc::ir::instance`, kept out of the library so that `cargo test` compiles it once.

use tapc::ir::instance::Projection;

fn p(matrix: Vec<Vec<i64>>, offset: Vec<i64>, shape: Vec<i64>) -> Projection {
    Projection {
        matrix,
        offset,
        shape,
    }
}

#[test]
fn projection_of_a_point_and_of_a_range() {
    let pr = p(
        vec![vec![1, 0], vec![0, 1], vec![1, 1]],
        vec![10, 20, 30],
        vec![4, 4, 1],
    );
    assert_eq!(pr.start(&[5, 6]), vec![15, 26, 41]);
    assert_eq!(
        pr.image(&[(5, 6), (6, 7)]),
        vec![(15, 19), (26, 30), (41, 42)]
    );
    assert_eq!(
        pr.image(&[(5, 7), (6, 8)]),
        vec![(15, 20), (26, 31), (41, 44)]
    );
}

#[test]
fn projection_split_two_by_two() {
    let pr = p(vec![vec![1, 0], vec![0, 0]], vec![-10, 0], vec![1, 5]);
    assert_eq!(pr.image(&[(0, 5), (0, 6)]), vec![(-10, -5), (0, 5)]);
    assert_eq!(pr.image(&[(5, 10), (6, 12)]), vec![(-5, 0), (0, 5)]);
}

#[test]
fn negative_coefficients_map_every_corner() {
    let pr = p(vec![vec![1, -1]], vec![0], vec![1]);
    assert_eq!(pr.image(&[(0, 2), (0, 2)]), vec![(-1, 2)]);
}
