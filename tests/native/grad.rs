//! `grad` through the native backend: every gradient case of `common::grad_cases`, lowered,
//! run by the JIT and compared with the interpreter within the documented float tolerance
//! (§5.3), and the gradients of `examples/grad_mlp.teg` computed by a compiled program.

use crate::common;
use common::grad_cases::{cases, lowered, CASES};
use common::tolerance::first_mismatch;
use std::collections::HashMap;
use std::process::Command;
use tapc_runtime::Tensor;

/// Graph 0 of `m` run by the JIT on 2 threads; sinks by name.
pub(crate) fn jit(
    m: &tapc::ir::Module,
    f: &[tapc::verify::GraphFacts],
    inputs: &HashMap<String, Tensor>,
) -> HashMap<String, Tensor> {
    let opts = tapc_runtime::exec::Options {
        threads: 2,
        ..Default::default()
    };
    let (sinks, _) = tapc::codegen::run_jit(m, 0, &f[0], inputs, &Default::default(), &opts)
        .expect("the lowered graph runs natively");
    sinks.into_iter().collect()
}

#[test]
fn jit_gradients_match_the_interpreter() {
    let mut done = 0;
    for c in cases() {
        let (m, f) = lowered(c.construct, &c.src);
        let inputs = common::inputs(&m, 0);
        let want = common::run(&m, &f, 0, &inputs);
        let got = jit(&m, &f, &inputs);
        assert_eq!(want.len(), got.len(), "{}: the same sinks", c.construct);
        for (name, w) in &want {
            let at = first_mismatch(w, &got[name]);
            assert!(at.is_none(), "{}: @{name} differs at {at:?}", c.construct);
        }
        done += 1;
    }
    assert_eq!(done, CASES, "every case ran through the JIT");
}

#[test]
fn compiled_program_computes_the_mlp_gradients() {
    let src = common::example("grad_mlp.teg");
    let (m, f) = lowered("grad_mlp.teg", &src);
    let inputs = common::inputs(&m, 0);
    let want = common::run(&m, &f, 0, &inputs);
    let dir = common::scratch("grad-mlp");
    for (n, t) in &inputs {
        tapc_runtime::npy::write(&dir.join(format!("{n}.npy")), t).unwrap();
    }
    let exe = dir.join("grad_mlp");
    let file = format!("{}/examples/grad_mlp.teg", env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args([file.as_str(), "-o", exe.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.join("out");
    let o = Command::new(&exe)
        .args([
            "--input-dir",
            dir.to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for name in ["loss", "dw1", "db1", "dw2", "db2"] {
        let got = tapc_runtime::npy::read(&out.join(format!("{name}.npy"))).unwrap();
        let at = first_mismatch(&want[name], &got);
        assert!(at.is_none(), "@{name} differs at {at:?}");
    }
}
