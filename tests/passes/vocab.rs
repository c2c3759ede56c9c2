//! `shard{table=E}`: a gathered table split along its gathered dimension (vocabulary-parallel,
//! a masked partial sum; docs/passes/shard.md). The split graph re-parses, verifies and gives the
//! interpreter's values bit for bit (prime vocabularies in 2, 3 and 5 parts, the edge ids `0`,
//! `V-1`, `-1`, `-V`, a table holding `-0.0`, inf and NaN, an integer table, a GatherElements
//! split along its second axis); each part's footprint, and so its cost, is its rows of the
//! table; kernels that are not a plain lookup are refused with E0106.

use crate::common;
use common::before_after;
use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

fn embed(v: usize, h: usize, b: usize, s: usize, td: &str) -> String {
    format!(
        "op @embed(E: {td}[V, H], ids: i64[B, S]) -> (y: {td}[B, S, H]) {{
  y[b, s, h] = E[ids[b, s], h]
}}
graph @g {{
  %E = source @E : {td}[{v}, {h}]
  %ids = source @ids : i64[{b}, {s}]
  %y = apply @embed(%E, %ids)
  sink @y %y
}}
"
    )
}

/// Ids over the whole valid range `-v .. v-1`, the edges `0, v-1, -1, -v` first.
fn ids(v: i64, n: usize) -> Vec<i64> {
    let mut x = vec![0, v - 1, -1, -v];
    x.extend((0..n as i64 - 4).map(|k| (k * 5 + 3) % (2 * v) - v));
    x.truncate(n);
    x
}

/// A float table with `-0.0`, `-inf`, inf and NaN among ordinary values.
fn table(v: usize, h: usize) -> Vec<f32> {
    let mut e: Vec<f32> = (0..v * h).map(|k| (k % 17) as f32 * 0.25 - 2.0).collect();
    e[0] = -0.0;
    e[h + 1] = f32::NEG_INFINITY;
    e[(v - 1) * h] = f32::INFINITY;
    e[2 * h % (v * h)] = f32::NAN;
    e
}

fn inputs(e: Data, v: usize, h: usize, b: usize, s: usize) -> HashMap<String, Tensor> {
    HashMap::from([
        (
            "E".into(),
            Tensor {
                shape: vec![v, h],
                data: e,
            },
        ),
        (
            "ids".into(),
            Tensor {
                shape: vec![b, s],
                data: Data::I64(ids(v as i64, b * s)),
            },
        ),
    ])
}

fn bits(t: &Tensor) -> Vec<u64> {
    match &t.data {
        Data::F32(x) => x.iter().map(|v| u64::from(v.to_bits())).collect(),
        Data::I32(x) => x.iter().map(|&v| v as u32 as u64).collect(),
        other => panic!("unexpected {:?}", other.dtype()),
    }
}

/// Before and after `shard{table=...}`: the same sinks bit for bit, with `parts` row parts.
fn same_bits(src: &str, pass: &str, ins: &HashMap<String, Tensor>, parts: usize) -> usize {
    let (before, after, printed) = before_after(src, pass, ins);
    let rows = printed.matches(".rows<lo = ").count();
    assert_eq!(rows, parts, "{pass}: one part per row range:\n{printed}");
    let mut n = 0;
    for (k, want) in &before[0] {
        let got = &after[0][k];
        assert_eq!(bits(got), bits(want), "{pass} @{k}:\n{printed}");
        n += want.len();
    }
    n
}

#[test]
fn a_split_table_gives_the_lookup_bit_for_bit() {
    let mut compared = 0;
    let mut cases = 0;
    for (v, parts) in [(13, 2), (13, 3), (13, 5), (7, 3), (2, 2), (5, 5)] {
        let (h, b, s) = (3, 3, 5);
        let src = embed(v, h, b, s, "f32");
        let ins = inputs(Data::F32(table(v, h)), v, h, b, s);
        let pass = format!("canonicalize,shard{{parts={parts},table=E}},canonicalize");
        compared += same_bits(&src, &pass, &ins, parts);
        // An integer table: the masked parts add 0.
        let src = embed(v, h, b, s, "i32");
        let e: Vec<i32> = (0..v * h).map(|k| k as i32 * 7919 - 40000).collect();
        compared += same_bits(&src, &pass, &inputs(Data::I32(e), v, h, b, s), parts);
        cases += 2;
    }
    assert_eq!(cases, 12);
    assert_eq!(compared, 12 * 3 * 5 * 3);
}

#[test]
fn a_gather_elements_table_splits_along_its_gathered_second_axis() {
    let src = "op @pick(x: f32[N, M], idx: i64[N, K]) -> (y: f32[N, K]) {
  y[i, j] = x[i, idx[i, j] - 1]
}
graph @g {
  %x = source @x : f32[4, 11]
  %idx = source @idx : i64[4, 6]
  %y = apply @pick(%x, %idx)
  sink @y %y
}
";
    let x: Vec<f32> = (0..44).map(|k| k as f32 - 20.5).collect();
    // Coordinates `idx - 1` over -11 .. 10: the edges 0, 10, -1 and -11 included.
    let idx: Vec<i64> = [1, 11, 0, -10]
        .into_iter()
        .chain((0..20).map(|k| (k * 7) % 22 - 10))
        .collect();
    let ins = HashMap::from([
        (
            "x".into(),
            Tensor {
                shape: vec![4, 11],
                data: Data::F32(x),
            },
        ),
        (
            "idx".into(),
            Tensor {
                shape: vec![4, 6],
                data: Data::I64(idx),
            },
        ),
    ]);
    let n = same_bits(src, "shard{parts=3,table=x}", &ins, 3);
    assert_eq!(n, 24);
}

/// Each part reads only its rows of the table (its footprint), so the cost model charges a
/// part its rows; the coordinate is computed once.
#[test]
fn each_part_reads_only_its_rows() {
    let (v, h, b, s) = (13, 6, 4, 5);
    let src = embed(v, h, b, s, "f32");
    let (m, facts) = common::after_pipeline("vocab", &src, "shard{parts=3,table=E}");
    let g = &m.graphs[0];
    let mut rows = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let tapc::ir::graph::NodeKind::Apply(a) = &n.kind else {
            continue;
        };
        if a.op != "embed.rows" {
            continue;
        }
        let inst = &facts[0].instances[&i];
        let (ins, _) = tapc::ir::footprint::io_boxes(inst);
        assert_eq!(ins[0][1], (0, h as i64), "every column");
        rows.push((ins[0][0].1 - ins[0][0].0, a.placement));
    }
    assert_eq!(rows, [(5, Some(0)), (4, Some(1)), (4, Some(2))]);
    // The cost model's bytes of each part: its rows, the clamped row (i64) and the hit mask
    // (bool) it reads, and its partial output.
    let (m2, facts2) = common::compile_ok("split", &tapc::print::print_module(&m));
    let cfg = tapc::passes::cost::config(
        &[("nodes".to_string(), "3".to_string())],
        &Default::default(),
    )
    .unwrap();
    let p = tapc::passes::cost::problem(&m2, 0, &facts2[0], &cfg).unwrap();
    let parts: Vec<f64> = (p.applies.iter())
        .filter(|a| a.op == "embed.rows")
        .map(|a| a.bytes)
        .collect();
    let io = (b * s * (8 + 1) + b * s * h * 4) as f64;
    let want: Vec<f64> = [5, 4, 4].iter().map(|r| (r * h * 4) as f64 + io).collect();
    assert_eq!(parts, want);
}

#[test]
fn kernels_that_are_not_a_plain_lookup_are_refused() {
    let bag = "op @bag(E: f32[V, H], ids: i64[B, S]) -> (y: f32[B, H]) {
  y[b, h] = sum[s](E[ids[b, s], h])
}
graph @g {
  %E = source @E : f32[7, 2]
  %ids = source @ids : i64[2, 3]
  %y = apply @bag(%E, %ids)
  sink @y %y
}
";
    let refuse = |src: &str, pipeline: &str| {
        let (mut m, facts) = common::compile_ok("input", src);
        let r = tapc::passes::manager::run_pipeline(
            &mut m,
            facts,
            pipeline,
            &Default::default(),
            &mut String::new(),
        );
        let e = r.err().expect("refused");
        (e.code.map(|c| c.0), e.message)
    };
    let (code, msg) = refuse(bag, "shard{parts=2,table=E}");
    assert_eq!(code, Some("E0106"), "{msg}");
    assert!(msg.contains("the gathered load itself"), "{msg}");
    // `table` and `dim` together are an option error.
    let (code, msg) = refuse(bag, "shard{parts=2,table=E,dim=b}");
    assert_eq!(code, Some("E0103"), "{msg}");
    assert!(msg.contains("without `dim`"), "{msg}");
}
