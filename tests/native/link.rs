//! Which runtime library `tapc` links programs with: the one built together with it, found by
//! the symbol its build exports, never merely the newest `libtapc_runtime-*.a` of the target
//! directory (a `--features mpi` build in the same directory once made every ordinary link fail).

use std::path::{Path, PathBuf};
use std::process::Command;
use tapc::codegen::link::{archive_defines, runtime_in};

/// A real archive made by the system `cc` and `ar`, defining `symbol`.
fn archive(dir: &Path, name: &str, symbol: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(
        &c,
        format!("unsigned char {symbol} = 0;\nint {name}_other(void) {{ return 1; }}\n"),
    )
    .unwrap();
    let o = dir.join(format!("{name}.o"));
    let cc = Command::new("cc")
        .arg("-c")
        .arg(&c)
        .arg("-o")
        .arg(&o)
        .status()
        .unwrap();
    assert!(cc.success(), "cc -c {}", c.display());
    let a = dir.join(format!("{name}.a"));
    let ar = Command::new("ar")
        .arg("rcs")
        .arg(&a)
        .arg(&o)
        .status()
        .unwrap();
    assert!(ar.success(), "ar rcs {}", a.display());
    a
}

#[test]
fn the_symbol_table_is_read_not_guessed() {
    let dir = crate::common::scratch("link-symbols");
    let a = archive(&dir, "one", "TAPC_RUNTIME_BUILD_AAAA");
    assert!(archive_defines(&a, "TAPC_RUNTIME_BUILD_AAAA"));
    assert!(
        !archive_defines(&a, "TAPC_RUNTIME_BUILD_AAA"),
        "a prefix is not the symbol"
    );
    assert!(!archive_defines(&a, "TAPC_RUNTIME_BUILD_BBBB"));
    assert!(
        !archive_defines(&dir.join("one.c"), "TAPC_RUNTIME_BUILD_AAAA"),
        "not an archive"
    );
}

#[test]
fn a_newer_runtime_of_another_build_is_not_picked() {
    let dir = crate::common::scratch("link-newer");
    let deps = dir.join("deps");
    std::fs::create_dir(&deps).unwrap();
    let ours = archive(&dir, "ours", "TAPC_RUNTIME_BUILD_0001");
    std::fs::rename(&ours, deps.join("libtapc_runtime-0001.a")).unwrap();
    // Written second, so newer: what the old newest-file rule linked.
    let mpi = archive(&dir, "mpi", "TAPC_RUNTIME_BUILD_0002");
    std::fs::rename(&mpi, deps.join("libtapc_runtime-0002.a")).unwrap();
    let dirs = [dir.clone(), deps.clone()];
    assert_eq!(
        runtime_in(&dirs, "TAPC_RUNTIME_BUILD_0001"),
        Some(deps.join("libtapc_runtime-0001.a"))
    );
    assert_eq!(
        runtime_in(&dirs, "TAPC_RUNTIME_BUILD_0002"),
        Some(deps.join("libtapc_runtime-0002.a"))
    );
    assert_eq!(runtime_in(&dirs, "TAPC_RUNTIME_BUILD_0003"), None);
}

#[test]
fn this_tapc_finds_the_runtime_it_was_built_with() {
    let lib = tapc::codegen::link::runtime_lib().expect("cargo built the runtime beside tapc");
    let symbol = format!("TAPC_RUNTIME_BUILD_{}", tapc_runtime::build::BUILD_ID);
    assert!(
        archive_defines(&lib, &symbol),
        "{} lacks {symbol}",
        lib.display()
    );
}
