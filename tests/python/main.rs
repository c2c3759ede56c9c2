//! The Python package (`python/`): builds it with maturin and installs it (editable) into the
//! test environment of tests/common/pyenv.rs, in this build's target directory (so only the
//! extension crate is compiled on top of what `cargo test` built), then runs pytest on
//! python/tests and checks that every test ran and passed.

#[path = "../common/pyenv.rs"]
mod pyenv;

use std::path::Path;
use std::process::Command;

/// The pytest cases in python/tests (parametrized cases counted one by one). Fewer ran means
/// some were skipped or not collected: a failure.
const PYTEST_CASES: usize = 57;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd`, panicking with its output when it fails; returns stdout and stderr.
fn run(cmd: &mut Command, what: &str) -> String {
    let out = (cmd.output()).unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    text
}

/// Builds and installs the package into the environment of `python`.
fn install(python: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(
        Command::new(python)
            .args(["-m", "maturin", "develop", "--locked"])
            .arg("--manifest-path")
            .arg(root().join("python").join("Cargo.toml"))
            .env("VIRTUAL_ENV", pyenv::env_dir())
            .env("CARGO", &cargo)
            .env("CARGO_TARGET_DIR", pyenv::target_dir()),
        "maturin develop (python/)",
    );
}

/// The count in pytest's closing line for `word` (`48 passed, 1 failed in 3.2s`).
fn count(summary: &str, word: &str) -> usize {
    let mut n = 0;
    for part in summary.split(',') {
        let mut it = part.split_whitespace();
        if let (Some(num), Some(w)) = (it.next(), it.next()) {
            if w == word {
                n = num.parse().unwrap_or(0);
            }
        }
    }
    n
}

#[test]
fn pytest_passes_every_python_package_test() {
    let python = pyenv::python();
    install(&python);
    let out = run(
        Command::new(&python)
            .args([
                "-m",
                "pytest",
                "python/tests",
                "-q",
                "-p",
                "no:cacheprovider",
            ])
            .current_dir(root()),
        "pytest python/tests",
    );
    let summary = out
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no pytest summary in:\n{out}"));
    for bad in [
        "failed",
        "error",
        "errors",
        "skipped",
        "xfailed",
        "deselected",
    ] {
        assert_eq!(count(summary, bad), 0, "pytest: {summary}\n{out}");
    }
    let passed = count(summary, "passed");
    assert!(
        passed >= PYTEST_CASES,
        "pytest ran {passed} tests, expected {PYTEST_CASES}: {summary}\n{out}"
    );
}
