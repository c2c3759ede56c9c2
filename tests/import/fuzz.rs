//! The ONNX reader fuzzed (tests/fuzzing/onnx.rs): mutated copies of the committed models
//! through the whole import; every one is imported or refused with a diagnostic, none panics.

use crate::onnx_fuzz;
use crate::support::data_dir;

#[test]
fn mutated_models_import_or_fail_cleanly() {
    let mut seeds = Vec::new();
    for sub in ["ops", "models"] {
        for c in crate::support::cases(sub) {
            seeds.push(std::fs::read(&c.model).unwrap());
        }
    }
    seeds.push(std::fs::read(data_dir().join("bad/external_ok.onnx")).unwrap());
    let dir = crate::common::scratch("import-fuzz");
    let r = onnx_fuzz::run(&seeds, 3000, 0x0_11a7, &dir);
    println!(
        "onnx reader fuzz: {} cases, {} imported, {} refused",
        r.cases, r.imported, r.refused
    );
    assert!(r.findings.is_empty(), "{}", r.findings.join("\n"));
    assert_eq!(r.cases, 3000);
    assert!(
        r.refused > 0 && r.imported > 0,
        "{} imported, {} refused",
        r.imported,
        r.refused
    );
    let _ = std::fs::remove_dir_all(&dir);
}
