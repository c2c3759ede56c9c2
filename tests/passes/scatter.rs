//! Scatters through the passes: every pipeline's output re-parses to the same module,
//! verifies, and computes what the input computed (bit for bit: the values are small integers,
//! so every sum is exact); a scatter is kept whole, CSE merges two identical scatters and DCE
//! removes an unused one, and the alias analysis sees its result as a buffer of its own.

use crate::common;
use common::before_after;
use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

const SRC: &str = "
op @scale(x: f32[N, H]) -> (y: f32[N, H]) {
  y[n, h] = x[n, h] * 2.0
}

op @embed(E: f32[V, H], ids: i64[N]) -> (y: f32[N, H]) {
  y[n, h] = E[ids[n], h]
}

graph @main {
  %E = source @E : f32[7, 6]
  %ids = source @ids : i64[10]
  %dy = source @dy : f32[10, 6]
  %s = apply @scale(%dy)
  %c = unsqueeze %ids [1]
  %idx = broadcast %c [10, 6]
  %y = scatter %E, %idx, %s axis 0 reduce add
  %y2 = scatter %E, %idx, %s axis 0 reduce add
  %unused = scatter %E, %idx, %s axis 0 reduce max
  %m = scatter %E, %idx, %dy axis 0 reduce none
  %t = apply @embed(%y, %ids)
  sink @y %y
  sink @y2 %y2
  sink @m %m
  sink @t %t
}
";

fn inputs() -> HashMap<String, Tensor> {
    let t = |shape: Vec<usize>, data| Tensor { shape, data };
    let e: Vec<f32> = (0..42).map(|v| (v % 11) as f32 - 5.0).collect();
    let ids: Vec<i64> = vec![0, 6, -1, 3, -7, 2, 5, 5, 1, -3];
    let dy: Vec<f32> = (0..60).map(|v| (v * 7 % 13) as f32 - 6.0).collect();
    HashMap::from([
        ("E".into(), t(vec![7, 6], Data::F32(e))),
        ("ids".into(), t(vec![10], Data::I64(ids))),
        ("dy".into(), t(vec![10, 6], Data::F32(dy))),
    ])
}

#[test]
fn pipelines_keep_scatters_and_their_values() {
    let pipelines = [
        "canonicalize",
        "alias",
        "canonicalize,fuse,canonicalize",
        "canonicalize,shard{parts=2,dim=n},fuse,canonicalize",
        "canonicalize,shard{parts=3,dim=h},canonicalize",
        // dim=auto splits the scatters too, along their second dimension.
        "canonicalize,shard{parts=2},fuse,canonicalize",
        "canonicalize,shard{parts=3,dim=1},canonicalize",
        "canonicalize,cost{nodes=2,objective=memory},fuse,canonicalize",
    ];
    let mut checked = 0;
    for p in pipelines {
        let (before, after, printed) = before_after(SRC, p, &inputs());
        assert_eq!(before, after, "{p}:\n{printed}");
        assert!(
            printed.contains("reduce none"),
            "{p}: the scatters are kept:\n{printed}"
        );
        let split = p.contains("shard{parts=2}") || p.contains("dim=1");
        let whole = printed.contains("reduce add : f32[7, 6]");
        assert_eq!(
            whole, !split,
            "{p}: split along dimension 1 or whole:\n{printed}"
        );
        if p.starts_with("canonicalize") {
            // CSE: %y2 is %y (one scatter, or one per part); DCE: %unused is gone.
            let parts = if p.contains("parts=3,dim=1") {
                3
            } else if split {
                2
            } else {
                1
            };
            assert_eq!(
                printed.matches("reduce add").count(),
                parts,
                "{p}:\n{printed}"
            );
            assert!(!printed.contains("reduce max"), "{p}:\n{printed}");
        }
        checked += 1;
    }
    assert_eq!(checked, pipelines.len());
}

#[test]
fn the_alias_analysis_sees_a_scatter_as_a_buffer_of_its_own() {
    let (m, _) = common::compile_ok("scatter", SRC);
    let g = &m.graphs[0];
    let info = tapc::passes::alias::analysis::analyze(g).expect("a verified graph");
    let id = |n: &str| g.find_value(n).unwrap();
    assert!(info.is_root(id("y")) && info.is_root(id("m")));
    assert!(
        !info.aliases(id("y"), id("E")).unwrap(),
        "the result is not the base"
    );
    assert!(
        !info.aliases(id("y"), id("y2")).unwrap(),
        "two scatters, two buffers"
    );
    assert!(
        info.aliases(id("idx"), id("ids")).unwrap(),
        "a broadcast is a view"
    );
    let report = info.report().unwrap();
    assert!(report.contains("%y: root (scatter) f32[7, 6]"), "{report}");
}

/// A scatter split for several nodes places its parts like an apply's shards (`on N`, round
/// robin), the report says where, and the printed form re-parses with the placements. Before,
/// the scatter form had no `on N` and every part ran on node 0.
#[test]
fn a_scatter_split_for_several_nodes_places_its_parts() {
    let (_, out) = common::pipeline_context("scatter", SRC, "canonicalize,shard{parts=2,nodes=2}");
    let report: String = (out.reports.iter())
        .filter(|(pass, _)| pass == "shard")
        .map(|(_, r)| r.as_str())
        .collect();
    assert!(
        report.contains("%y: scatter split along dimension 1 into 2 on nodes [0, 1]"),
        "{report}"
    );
    let (m, _) = common::after_pipeline("scatter", SRC, "canonicalize,shard{parts=2,nodes=2}");
    let printed = tapc::print::print_module(&m);
    let scatters: Vec<&str> = (printed.lines())
        .filter(|l| l.contains("= scatter "))
        .collect();
    for k in 0..2 {
        let part = format!("%y.{k} = scatter ");
        let line = scatters.iter().find(|l| l.contains(&part));
        let line = line.unwrap_or_else(|| panic!("no `{part}` in {printed}"));
        assert!(line.contains(&format!("reduce add on {k}")), "{printed}");
    }
    let (again, _) = common::compile_ok("scatter-placed", &printed);
    assert_eq!(
        tapc::print::print_module(&again),
        printed,
        "re-parses to the same text"
    );
}

/// `on N` places a scatter; any other instruction given one is refused (E0080, on the number),
/// and so is a negative node.
#[test]
fn only_a_scatter_among_instructions_takes_a_placement() {
    let ok = "graph @g {\n  %b = source @b : f32[4, 3]\n  %i = source @i : i64[2, 3]\n  \
              %u = source @u : f32[2, 3]\n  %y = scatter %b, %i, %u axis 0 reduce add on 1\n  \
              sink @y %y\n}\n";
    let (m, _) = common::compile_ok("placed", ok);
    let printed = tapc::print::print_module(&m);
    assert!(printed.contains("axis 0 reduce add on 1"), "{printed}");
    for (bad, want) in [
        (
            ok.replace("reduce add on 1", "reduce add on -1"),
            "placement `on -1` is not a node number",
        ),
        (
            ok.replace("sink @y %y", "%t = transpose %y [1, 0] on 1\n  sink @y %t"),
            "`transpose` takes no placement `on N`",
        ),
    ] {
        let (_, _, diags) = tapc::compile_source(&bad);
        let d = (diags.0.iter()).find(|d| d.message.contains(want));
        let d = d.unwrap_or_else(|| panic!("no `{want}` in {:?}", diags.0));
        assert_eq!(d.code.map(|c| c.0), Some("E0080"), "{bad}");
    }
}
