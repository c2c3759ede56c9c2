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

/// 1×1 convolutions with stride 1, no padding and two or more spatial dims import as a matmul
/// over the flattened positions (so they run on the GEMM path); 1-D, strided, padded and
/// grouped ones keep the generic window. Their values are checked against onnxruntime by the test above.
#[test]
fn pointwise_convs_import_as_a_matmul_over_positions() {
    let work = crate::common::scratch("import-pointwise");
    let expect = [
        ("conv1x1_bias", true),
        ("conv1x1_nobias_1d", false),
        ("conv1x1_3d", true),
        ("conv1x1_stride2", false),
        ("conv1x1_pad1", false),
        ("conv1x1_group2", false),
        ("conv3x3_pad1", false),
    ];
    let cases = support::cases("ops");
    let mut checked = 0;
    for (name, pointwise) in expect {
        let c = cases.iter().find(|c| c.name == name).expect(name);
        let teg = std::fs::read_to_string(support::import(c, &work.join(name))).unwrap();
        let matmul = teg.contains("y[n, o, p] = sum[c](x[n, c, p] * w[o, c])");
        assert_eq!(matmul, pointwise, "{name}:\n{teg}");
        checked += 1;
    }
    assert_eq!(checked, expect.len());
    let _ = std::fs::remove_dir_all(&work);
}
