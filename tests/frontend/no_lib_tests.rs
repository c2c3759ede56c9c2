//! The `tapc` library is built with `test = false` (Cargo.toml), so a `#[test]` inside it would
//! never run. Its unit tests live in the test binaries instead (`tests/AREA/unit/`, through the
//! library's public API), and this test fails on any test left in `src/` or `passes/`.

use crate::import_circles::rs_files;
use std::path::Path;

/// Lines that declare a test or test-only code (comments aside).
fn test_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.starts_with("//"))
        .filter(|(_, l)| {
            l.starts_with("#[test]") || l.contains("cfg(test)") || l.starts_with("proptest!")
        })
        .map(|(i, l)| (i, l.to_string()))
        .collect()
}

#[test]
fn the_library_holds_no_tests_that_would_never_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "passes"] {
        rs_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() >= 100,
        "only {} library files found",
        files.len()
    );
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let rel = f.strip_prefix(root).unwrap().display().to_string();
            test_lines(&text)
                .into_iter()
                .map(move |(i, l)| format!("{rel}:{i}: {l}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "the library is built with `test = false`; move these tests to tests/AREA/unit/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_detector_sees_tests_but_not_comments() {
    let text = "fn a() {}\n#[cfg(test)]\nmod t {\n    #[test]\n    fn b() {}\n}\n// #[test] in a comment\n";
    let lines: Vec<usize> = test_lines(text).into_iter().map(|(i, _)| i).collect();
    assert_eq!(lines, vec![2, 4]);
}
