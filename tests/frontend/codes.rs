//! Every error code is documented in docs/teg.md and exercised by at least one filetest.

use std::path::Path;

fn filetest_texts(dir: &Path, out: &mut String) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            filetest_texts(&p, out);
        } else if p.extension().is_some_and(|x| x == "teg" || x == "snap") {
            out.push_str(&std::fs::read_to_string(&p).unwrap());
        }
    }
}

#[test]
fn every_code_is_documented_and_tested() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(root.join("docs/teg.md")).expect("docs/teg.md exists");
    let mut tests = String::new();
    filetest_texts(&root.join("tests/filetests"), &mut tests);
    let mut missing = Vec::new();
    for (code, _) in tapc::diag::codes::ALL {
        if !docs.contains(code.0) {
            missing.push(format!("{code} is not in docs/teg.md"));
        }
        if !tests.contains(code.0) {
            missing.push(format!("{code} has no filetest"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
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
