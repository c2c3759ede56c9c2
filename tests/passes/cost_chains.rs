//! The cost pass on chains of stencil steps (issue 17, sharding that scales): the search starts
//! from aligned plans, so every step split alike over the nodes (only halo rows move) is found;
//! and a plan whose fusions the `fuse` pass cannot do together (a stencil fused into a stencil
//! that already holds its producer) is carried out without them instead of failing (E0105).

use crate::common;
use tapc::print::print_module;

/// `steps` stencil steps without a boundary (`common::mpi::heat`).
fn heat(rows: usize, cols: usize, steps: usize) -> String {
    common::mpi::heat(rows, cols, steps, false)
}

/// Runs `pipeline` on `src`; returns the printed module and the cost report.
fn cost(src: &str, pipeline: &str) -> (String, String) {
    let (m, cx) = common::pipeline_context("heat", src, pipeline);
    let report = cx.report("cost").expect("a cost report").to_string();
    (print_module(&m), report)
}

#[test]
fn a_stencil_chain_whose_fusions_cannot_all_be_done_is_carried_out_and_keeps_its_values() {
    let src = heat(64, 48, 4);
    let (m, facts) = common::compile_ok("heat", &src);
    let inputs = common::inputs(&m, 0);
    let before = common::run(&m, &facts, 0, &inputs);
    let mut checked = 0;
    for nodes in [2, 4] {
        // Before: the chosen plan fused %u1 into %u2 and %u2 into %u3, and the pass failed.
        let (printed, report) = cost(&src, &format!("canonicalize,cost{{nodes={nodes}}}"));
        assert!(report.contains("chosen: %u1"), "{report}");
        let (m2, facts2) = common::compile_ok("output", &printed);
        let after = common::run(&m2, &facts2, 0, &inputs);
        let (x, y) = (common::f64s(&before["e"]), common::f64s(&after["e"]));
        assert_eq!(x.len(), y.len());
        let scale = x.iter().fold(1e-30f64, |a, v| a.max(v.abs()));
        let err = (x.iter().zip(&y)).fold(0.0f64, |a, (u, v)| a.max((u - v).abs())) / scale;
        assert!(err < 1e-5, "{nodes} nodes: differs by {err}\n{printed}");
        checked += 1;
    }
    assert_eq!(checked, 2);
}

#[test]
fn a_stencil_chain_on_four_nodes_is_split_alike_and_moves_only_halos() {
    let (rows, cols) = (4096, 4096);
    let (_, report) = cost(&heat(rows, cols, 4), "canonicalize,cost{nodes=4}");
    let chosen: Vec<&str> = (report.lines())
        .skip_while(|l| !l.trim_start().starts_with("chosen:"))
        .take(2)
        .collect();
    assert_eq!(chosen.len(), 2, "{report}");
    for s in ["%u1", "%u2", "%u3", "%u4"] {
        let want = format!("{s}: i/4 on [0,1,2,3]");
        assert!(chosen[0].contains(&want), "{want} in {}", chosen[0]);
    }
    // Each of the 3 inner boundaries of each step moves a row or two each way: far below one
    // row block (a quarter of the grid).
    let at = chosen[1].find("bytes moved ").unwrap() + "bytes moved ".len();
    let moved: f64 = chosen[1][at..].split(',').next().unwrap().parse().unwrap();
    let row = (cols * 4) as f64;
    assert!(
        moved > 0.0 && moved <= 4.0 * 3.0 * 2.0 * 2.0 * row,
        "{}",
        chosen[1]
    );
}
