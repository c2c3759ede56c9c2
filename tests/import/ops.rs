//! Every per-operator case of tests/data/onnx/ops, imported and run interpreted and JIT-compiled
//! against onnxruntime's outputs.

use crate::support;

#[test]
fn every_op_case_matches_onnxruntime_interpreted_and_jit() {
    let cases = support::cases("ops");
    let work = crate::common::scratch("import-ops");
    let mut compared = 0;
    for c in &cases {
        let teg = support::import(c, &work.join(&c.name));
        compared += support::check_modes(c, &teg, &["--interp", "--native"]);
    }
    println!(
        "{} op cases, {compared} outputs compared (interpreted and JIT)",
        cases.len()
    );
    assert!(cases.len() >= 80, "only {} op cases", cases.len());
    let _ = std::fs::remove_dir_all(&work);
}
