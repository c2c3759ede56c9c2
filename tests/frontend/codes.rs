//! Every error code is documented in docs/teg.md and produced by a test: a filetest's checked
//! output shows it (its snapshot, compared with what `tapc` prints, has a diagnostic with that
//! code, or one of its `ERROR` annotations, compared with `tapc check`'s diagnostics, names
//! it), or, for a code that needs an environment a RUN line cannot set up, a scenario below
//! produces it. A code that is only mentioned (in a comment, a `CHECK-NOT`) counts for nothing.

use crate::support::{self, annotations};
use regex::Regex;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// A code no filetest can produce, and the scenario that does: it returns `tapc`'s exit
/// code and stderr.
struct Scenario {
    code: &'static str,
    run: fn() -> (Option<i32>, String),
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        code: "E0101",
        run: no_runtime_library,
    },
    Scenario {
        code: "E0120",
        run: || import("truncated.onnx", &[]),
    },
    Scenario {
        code: "E0121",
        run: || import("missing_external.onnx", &[]),
    },
    Scenario {
        code: "E0122",
        run: || import("unsupported_op.onnx", &[]),
    },
    Scenario {
        code: "E0123",
        run: || import("unsupported_form.onnx", &[]),
    },
    Scenario {
        code: "E0124",
        run: || import("dynamic.onnx", &[]),
    },
    Scenario {
        code: "E0125",
        run: || import("dynamic.onnx", &["--input-shape", "x=2"]),
    },
    Scenario {
        code: "E0126",
        run: || import("undefined_value.onnx", &[]),
    },
    Scenario {
        code: "E0127",
        // 2^63 f32 elements: a count `usize` holds, but a byte size TEG cannot.
        run: || {
            import(
                "dynamic.onnx",
                &["--input-shape", "x=2305843009213693952,4"],
            )
        },
    },
];

/// `tapc import tests/data/onnx/bad/MODEL -o DIR/m.teg EXTRA`; the failed import leaves DIR
/// empty (the `tapc import` codes need a model file, which a filetest's RUN line lacks).
fn import(model: &str, extra: &[&str]) -> (Option<i32>, String) {
    let stem = model.trim_end_matches(".onnx");
    let dir = crate::common::scratch(&format!("codes-{stem}-{}", extra.len()));
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/onnx/bad")
        .join(model);
    let o = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .arg("import")
        .arg(&path)
        .arg("-o")
        .arg(dir.join("m.teg"))
        .args(extra)
        .output()
        .unwrap();
    let left = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(left, 0, "a failed import leaves nothing behind");
    std::fs::remove_dir_all(&dir).unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `tapc FILE -o OUT` with `TAPC_RUNTIME_LIB` naming no file: the backend cannot link.
fn no_runtime_library() -> (Option<i32>, String) {
    let dir = crate::common::scratch("codes-e0101");
    let file = dir.join("g.teg");
    std::fs::write(
        &file,
        "graph @g {\n  %x = rand seed 1 : f32[4]\n  sink @x %x\n}\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .arg(&file)
        .arg("-o")
        .arg(dir.join("g"))
        .env("TAPC_RUNTIME_LIB", dir.join("missing.a"))
        .output()
        .unwrap();
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["g.teg"], "a failed link leaves nothing behind");
    std::fs::remove_dir_all(&dir).unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The codes the filetests' checked outputs show, and how many files were read.
fn filetest_codes() -> (BTreeSet<String>, usize) {
    let root = support::package_root().join(support::DEFAULT_ROOT);
    let headers = Regex::new(r#"(?:error|warning|note)\[(E\d{4})\]|"code":\s*"(E\d{4})""#).unwrap();
    let mut codes = BTreeSet::new();
    let files = support::discover(&root, "teg").expect("tests/filetests is readable");
    for teg in &files {
        let source = std::fs::read_to_string(teg).unwrap();
        let expected =
            annotations::parse(&source).unwrap_or_else(|e| panic!("{}: {e}", teg.display()));
        codes.extend(expected.into_iter().filter_map(|a| a.code));
        let snap = support::read_snapshot(&teg.with_extension("snap")).unwrap_or_default();
        for c in headers.captures_iter(&snap) {
            codes.extend(c.iter().skip(1).flatten().map(|m| m.as_str().to_string()));
        }
    }
    (codes, files.len())
}

#[test]
fn every_code_is_documented_and_tested() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(root.join("docs/teg.md")).expect("docs/teg.md exists");
    let (produced, files) = filetest_codes();
    assert!(files > 0, "no filetests found");
    let mut missing = Vec::new();
    for (code, _) in tapc::diag::codes::ALL {
        if !docs.contains(code.0) {
            missing.push(format!("{code} is not in docs/teg.md"));
        }
        let by_scenario = SCENARIOS.iter().any(|s| s.code == code.0);
        if !produced.contains(code.0) && !by_scenario {
            missing.push(format!(
                "{code} is produced by no filetest and no scenario here"
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn each_scenario_produces_its_code() {
    for Scenario { code, run } in SCENARIOS {
        let (exit, stderr) = run();
        assert_eq!(exit, Some(1), "{code}: {stderr}");
        assert!(
            stderr.contains(&format!("error[{code}]")),
            "{code}: {stderr}"
        );
    }
}

#[test]
fn codes_are_unique_and_well_formed() {
    let all = tapc::diag::codes::ALL;
    for (i, (a, _)) in all.iter().enumerate() {
        assert!(
            a.0.len() == 5 && a.0.starts_with('E') && a.0[1..].chars().all(|c| c.is_ascii_digit()),
            "{a}"
        );
        assert!(
            all[i + 1..].iter().all(|(b, _)| a != b),
            "{a} is listed twice"
        );
    }
}
