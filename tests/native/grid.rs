//! Grid-sharded applies (`shard{dim=i*j, parts=RxC}`: blocks of rows × columns, assembled by
//! nested concats placed into one buffer) run natively as the interpreter runs the unsharded
//! graph, on 1 and 2 threads, at odd and prime sizes and with more than 8 blocks.

use crate::native::assert_pipelines;

#[test]
fn grid_sharded_matmuls_match_the_interpreter() {
    let mut checked = 0;
    for (m, k, n, grid) in [(17, 5, 13, "2x3"), (33, 7, 31, "3x4"), (5, 3, 64, "1x5")] {
        let src = format!(
            "op @mm(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {{
  c[i, j] = sum[k](a[i, k] * b[k, j])
}}
op @scale(x: f32[M, N]) -> (y: f32[M, N]) {{
  y[i, j] = 0.5 * x[i, j] + 1.0
}}
graph @g {{
  %a = source @a : f32[{m}, {k}]
  %b = source @b : f32[{k}, {n}]
  %c = apply @mm(%a, %b)
  %d = apply @scale(%c)
  sink @d %d
  sink @c %c
}}"
        );
        let pipelines = [
            format!("canonicalize,shard{{parts={grid},dim=i*j}},canonicalize"),
            format!("canonicalize,shard{{parts={grid},dim=i*j}},fuse,canonicalize"),
        ];
        let pipelines: Vec<&str> = pipelines.iter().map(String::as_str).collect();
        assert_pipelines(&format!("grid {m}x{k}x{n} {grid}"), &src, &pipelines);
        checked += 1;
    }
    assert_eq!(checked, 3);
}
