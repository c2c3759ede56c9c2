//! The Python environment the import and Python-package tests run in: one virtual environment
//! under the target directory with numpy, pytest, maturin, onnx and onnxruntime, made with pip
//! when missing (the README's test command installs what it needs). When pip cannot install the
//! packages the test fails with how to install them by hand; it never skips.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The packages every Python-side test may import (pinned so fixtures stay comparable).
pub const PACKAGES: &[&str] = &[
    "numpy==2.4.6",
    "pytest==9.2.0",
    "maturin==1.16.0",
    "onnx==1.23.2",
    "onnxruntime==1.32.0",
];

/// One creation at a time inside a test binary; the atomic rename below covers other binaries.
static MAKE: Mutex<()> = Mutex::new(());

/// The environment's `python` executable, creating the environment first when it is missing.
/// Run tools through it (`python -m pytest`, `python -m maturin`): the environment is built in a
/// scratch directory and renamed, so the scripts in its `bin/` name the scratch path.
/// Panics with a how-to-install message when it cannot be made.
pub fn python() -> PathBuf {
    let _guard = MAKE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = env_dir();
    let python = dir.join("bin").join("python");
    if !ready(&dir) {
        make(&dir);
    }
    python
}

/// The directory that holds the environment: `<target>/pyenv`.
pub fn env_dir() -> PathBuf {
    target_dir().join("pyenv")
}

/// Cargo's target directory (CARGO_TARGET_DIR, or `target/` next to the manifest).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
    }
}

/// The `onnx` wheel's backend test models (`onnx/backend/test/data/light/*.onnx`: ImageNet
/// nets whose weights are `ConstantOfShape` fills), sorted by name.
#[allow(dead_code)] // the import tests and bench use it; the python tests include this file too
pub fn onnx_light_models() -> Vec<PathBuf> {
    let o = Command::new(python())
        .args(["-c", "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/light'))"])
        .output()
        .expect("cannot run the test environment's python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    v
}

/// Whether `dir` holds a finished environment with this list of packages.
fn ready(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("tapc-packages.txt")).is_ok_and(|s| s == PACKAGES.join("\n"))
}

/// Builds the environment in a scratch directory and renames it into place, so a concurrent test
/// binary never sees half of one.
fn make(dir: &Path) {
    let scratch = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    run(Command::new("python3").args(["-m", "venv"]).arg(&scratch));
    let pip = scratch.join("bin").join("pip");
    run(Command::new(&pip)
        .args(["install", "-q", "--disable-pip-version-check"])
        .args(PACKAGES));
    std::fs::write(scratch.join("tapc-packages.txt"), PACKAGES.join("\n"))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", scratch.display()));
    if !ready(dir) {
        let _ = std::fs::remove_dir_all(dir);
        if std::fs::rename(&scratch, dir).is_ok() {
            return;
        }
    }
    // Another test binary finished first; its environment is the same.
    let _ = std::fs::remove_dir_all(&scratch);
}

fn run(command: &mut Command) {
    let how = format!(
        "these tests need Python 3 with venv and pip; by hand: python3 -m venv {} && {}/bin/pip install {}",
        env_dir().display(),
        env_dir().display(),
        PACKAGES.join(" ")
    );
    match command.output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "{:?} failed ({}): {}\n{how}",
            command,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!("cannot run {:?} ({e}); {how}", command),
    }
}
