//! Kernels with gathered indices through the passes: every pipeline's output re-parses to the
//! same module, verifies, and computes what the input computed (bit for bit: the table holds
//! small integers, so a reassociated sum is exact); the gathered dimension is projected whole
//! (signature and footprint), so sharding splits only the variables and reads the whole table.

use crate::common;
use common::before_after;
use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

const SRC: &str = "
op @embed(E: f32[V, H], ids: i32[B, S]) -> (y: f32[B, S, H]) {
  y[b, s, h] = E[ids[b, s], h]
}

op @bag(E: f32[V, H], ids: i32[B, S]) -> (y: f32[B, H]) {
  y[b, h] = sum[s](E[ids[b, s], h] * 2.0)
}

op @pick(x: f32[N, M], idx: i64[N, K]) -> (y: f32[N, K]) {
  y[i, j] = x[i, idx[i, j] - 1] + 1.0
}

graph @main {
  %E = source @E : f32[7, 6]
  %ids = source @ids : i32[4, 3]
  %idx = source @idx : i64[12, 5]
  %e = apply @embed(%E, %ids)
  %r = reshape %e [12, 6]
  %b = apply @bag(%E, %ids)
  %p = apply @pick(%r, %idx)
  sink @e %e
  sink @b %b
  sink @p %p
}
";

fn inputs() -> HashMap<String, Tensor> {
    let e: Vec<f32> = (0..42).map(|v| (v % 11) as f32 - 5.0).collect();
    let ids = vec![0, 6, -1, 3, -7, 2, 5, 5, 1, -3, 4, 0];
    let idx: Vec<i64> = (0..60).map(|v| (v * 7 % 12) - 5).collect();
    HashMap::from([
        (
            "E".into(),
            Tensor {
                shape: vec![7, 6],
                data: Data::F32(e),
            },
        ),
        (
            "ids".into(),
            Tensor {
                shape: vec![4, 3],
                data: Data::I32(ids),
            },
        ),
        (
            "idx".into(),
            Tensor {
                shape: vec![12, 5],
                data: Data::I64(idx),
            },
        ),
    ])
}

#[test]
fn pipelines_keep_gathers_and_their_values() {
    let pipelines = [
        "canonicalize",
        "canonicalize,fuse,canonicalize",
        "canonicalize,shard{parts=2,dim=b},fuse,canonicalize",
        "canonicalize,shard{parts=3,dim=h},fuse,canonicalize",
        "canonicalize,shard{parts=2,dim=i},canonicalize",
        // A reduction over the gathered rows: partial sums per part of `s`, then a combine.
        "canonicalize,shard{parts=2,dim=s},canonicalize",
        "canonicalize,cost{nodes=2,objective=memory},fuse,canonicalize",
    ];
    let mut checked = 0;
    for p in pipelines {
        let (before, after, printed) = before_after(SRC, p, &inputs());
        assert_eq!(before, after, "{p}:\n{printed}");
        assert!(
            printed.contains("E[ids[b, s], h]"),
            "{p}: the gather is kept:\n{printed}"
        );
        checked += 1;
    }
    let (_, _, printed) = before_after(
        SRC,
        "canonicalize,shard{parts=2,dim=s},canonicalize",
        &inputs(),
    );
    assert!(
        printed.contains("@bag.partial.s(%E, ") && printed.contains("@tapc.sum.f32("),
        "{printed}"
    );
    assert_eq!(checked, pipelines.len());
}

#[test]
fn the_gathered_dimension_is_projected_and_read_whole() {
    let (m, facts) = common::after_pipeline("gather", SRC, "canonicalize,shard{parts=3,dim=h}");
    let g = &m.graphs[0];
    let mut shards = 0;
    for (i, n) in g.nodes.iter().enumerate() {
        let tapc::ir::graph::NodeKind::Apply(a) = &n.kind else {
            continue;
        };
        if a.op != "embed" {
            continue;
        }
        let inst = &facts[0].instances[&i];
        // E's projection: row 0, offset 0, the whole 7 rows; one column per `h`.
        let e = &inst.signature.inputs[0].projection;
        assert_eq!((e.offset[0], e.shape[0]), (0, 7));
        assert_eq!(e.shape[1], 1);
        let (ins, _) = tapc::ir::footprint::io_boxes(inst);
        assert_eq!(
            ins[0][0],
            (0, 7),
            "every shard reads every row of its slice of E"
        );
        assert_eq!(ins[0][1].1 - ins[0][1].0, 2, "and only its 2 columns");
        shards += 1;
    }
    assert_eq!(shards, 3);
}
