//! A compiled program's cold start (issue 22, `runtime/src/exec/warm.rs`): while it reads its
//! inputs, the worker threads are started and the big buffers its inputs are copied into and
//! the first tasks' outputs are mapped and page-faulted ahead, then taken by the run; later
//! tasks' outputs are left to the kernels that write them. These tests check which buffers are
//! faulted ahead (what the plan says, not what the host times) and that a compiled program
//! whose run takes the faulted buffers still computes what the interpreter does, on 1 and 2
//! threads.

use crate::common;

use common::tolerance::first_mismatch;
use std::collections::HashMap;
use std::process::Command;
use tapc::codegen::{schedule, target};
use tapc_runtime::exec::{fault_ahead, faulted_ahead};
use tapc_runtime::Tensor;

/// 2 Mi f32 elements: 8 MiB, above the executor's huge-buffer size (4 MiB).
const N: usize = 2 << 20;

/// A chain of two tasks: `y` (written by the first task) and `z` (by the second, which waits
/// for it), beside a small source `s`.
fn chain() -> String {
    format!(
        "op @affine(x: f32[N], s: f32[4]) -> (y: f32[N]) {{
  y[i] = x[i] * s[0] + s[1]
}}
op @square(y: f32[N]) -> (z: f32[N]) {{
  z[i] = y[i] * y[i] + 0.5
}}
graph @g {{
  %x = source @x : f32[{N}]
  %s = source @s : f32[4]
  %y = apply @affine(%x, %s)
  %z = apply @square(%y)
  sink @z %z
}}
"
    )
}

#[test]
fn big_sources_and_first_outputs_are_faulted_ahead_and_later_outputs_left_to_their_writers() {
    let (m, facts) = common::compile_ok("chain", &chain());
    let lanes = target::host().unwrap().lanes;
    let s = schedule::build(&m, &m.graphs[0], &facts[0], lanes).unwrap();
    let plan = &s.plan;
    assert_eq!(plan.tasks.len(), 2, "two tasks: {:?}", plan.tasks);
    let big = (N * 4) as u64;
    // `x` (a big source) and `y` (the first task's output, allocated when the run starts) are
    // faulted ahead: `s` is small, and `z` is the output of a task that waits for `y`'s, first
    // touched by the kernel that writes it.
    let ahead = faulted_ahead(plan);
    assert_eq!(ahead, vec![big, big], "buffers faulted ahead");
    let counted: u64 = plan.buffers.iter().map(|b| b.bytes).sum();
    assert_eq!(counted, 3 * big + 16, "x, y, z and s: {:?}", plan.buffers);
}

/// Buffers of one size faulted ahead are distinct buffers, each kept for the run: each was
/// dropped into the spare buffers at once, so the next of its size took it again and faulted
/// the same pages (GELU's and layernorm's outputs, as big as their inputs, were not faulted).
#[test]
fn buffers_of_one_size_are_each_faulted_ahead() {
    // Sizes no executor buffer of the other tests has (odd numbers of 2 MiB pages).
    let sizes = [(3u64 << 21) - 5, (3 << 21) - 5, (3 << 21) - 5, 5 << 21];
    let addrs = fault_ahead(&sizes, 2);
    assert_eq!(addrs.len(), sizes.len(), "buffers faulted: {addrs:x?}");
    let mut distinct = addrs.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), sizes.len(), "distinct buffers: {addrs:x?}");
}

#[test]
fn a_compiled_program_taking_the_faulted_buffers_matches_the_interpreter() {
    let src = chain();
    let dir = common::scratch("cold-chain");
    let teg = dir.join("chain.teg");
    std::fs::write(&teg, &src).unwrap();
    let exe = dir.join("chain");
    let o = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .arg(&teg)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (m, facts) = common::compile_ok("chain", &src);
    let ins: HashMap<String, Tensor> = common::inputs(&m, 0);
    let mut args = Vec::new();
    for (name, t) in &ins {
        let f = dir.join(format!("{name}.npy"));
        tapc_runtime::npy::write(&f, t).unwrap();
        args.push("--input".to_string());
        args.push(format!("{name}={}", f.display()));
    }
    let want = &common::run(&m, &facts, 0, &ins)["z"];
    let mut checked = 0;
    for threads in [1, 2] {
        let out = dir.join(format!("out{threads}"));
        let o = Command::new(&exe)
            .args(&args)
            .args(["--threads", &threads.to_string(), "--time", "--out-dir"])
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{threads} thread(s): {err}");
        assert!(err.contains("wall "), "--time prints the wall: {err}");
        let got = tapc_runtime::npy::read(&out.join("z.npy")).unwrap();
        assert_eq!(got.shape, want.shape);
        if let Some(e) = first_mismatch(want, &got) {
            let (a, g) = (common::f64s(want), common::f64s(&got));
            panic!(
                "{threads} thread(s): z[{e}]: interpreter {:e}, compiled {:e}",
                a[e], g[e]
            );
        }
        checked += got.len();
    }
    assert_eq!(checked, 2 * N, "elements checked on 1 and 2 threads");
}
