//! Values whose byte size overflows i64 (issue 13, defect 2): `check`, `run` (JIT), `run
//! --interp` and `-o` all stop at the verifier's E0025 with exit code 1, in a real `tapc`
//! process, with no crash, no panic and no output written.

use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch(&format!("sizes-{name}"))
}

/// Runs every command on `src`; each must exit 1 with E0025 naming `value` and write nothing.
fn rejected_everywhere(name: &str, src: &str, value: &str) {
    let dir = scratch(name);
    let file = dir.join(format!("{name}.teg"));
    std::fs::write(&file, src).unwrap();
    let (f, out, exe) = (
        file.display().to_string(),
        dir.join("out"),
        dir.join("prog"),
    );
    let (o, e) = (out.display().to_string(), exe.display().to_string());
    let commands: [Vec<&str>; 4] = [
        vec!["check", &f],
        vec!["run", &f, "--out-dir", &o],
        vec!["run", "--interp", &f, "--out-dir", &o],
        vec![&f, "-o", &e],
    ];
    for args in commands {
        let r = Command::new(env!("CARGO_BIN_EXE_tapc"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "tapc {args:?}: {stderr}");
        assert!(
            stderr.contains("error[E0025]") && stderr.contains(value),
            "tapc {args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "tapc {args:?}: {stderr}");
        assert!(!out.exists() && !exe.exists(), "tapc {args:?} wrote output");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn f32_of_2_pow_62_elements_is_e0025_everywhere() {
    rejected_everywhere(
        "p62",
        "graph @g {\n  %x = zeros : f32[4611686018427387904]\n  sink @x %x\n}\n",
        "`%x` is f32[4611686018427387904]: 18446744073709551616 bytes",
    );
}

#[test]
fn f32_of_2_pow_61_elements_is_e0025_everywhere() {
    rejected_everywhere(
        "p61",
        "graph @g {\n  %x = ones : f32[2305843009213693952]\n  sink @x %x\n}\n",
        "`%x` is f32[2305843009213693952]: 9223372036854775808 bytes",
    );
}

#[test]
fn a_sliced_and_sunk_huge_value_is_e0025_everywhere() {
    rejected_everywhere(
        "sliced",
        "op @inc(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i] + 1.0\n}\n\
         graph @g {\n  %x = zeros : f32[2305843009213693952]\n  %y = apply @inc(%x)\n  \
         %s = slice %y [0:4]\n  sink @s %s\n}\n",
        "`%x` is f32[2305843009213693952]",
    );
}

#[test]
fn a_huge_source_is_e0025_before_any_input_is_read() {
    rejected_everywhere(
        "source",
        "graph @g {\n  %x = source @x : f32[4611686018427387904]\n  %s = slice %x [0:4]\n  sink @s %s\n}\n",
        "`%x` is f32[4611686018427387904]",
    );
}

/// `tapc run --interp FILE` under an address-space limit of `kib` KiB (`ulimit -v`, a shell
/// builtin, so no package is needed).
fn interp_limited(name: &str, src: &str, kib: u64) -> (std::process::Output, PathBuf) {
    let dir = scratch(name);
    let file = dir.join(format!("{name}.teg"));
    std::fs::write(&file, src).unwrap();
    let out = dir.join("out");
    let r = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {kib} && exec \"$0\" run --interp \"$1\" --out-dir \"$2\""
        ))
        .arg(env!("CARGO_BIN_EXE_tapc"))
        .arg(&file)
        .arg(&out)
        .output()
        .unwrap();
    (r, out)
}

const INC_SLICE: &str = "op @inc(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i] + 1.0\n}\n\
graph @g {\n  %x = zeros : f32[SIZE]\n  %y = apply @inc(%x)\n  %s = slice %y [0:4]\n  sink @s %s\n}\n";

#[test]
fn an_interpreter_allocation_failure_is_a_clean_error() {
    // 2 GiB for `%x` under a 1.5 GB limit; and 2^61 bytes, which fits i64 but no machine.
    for (name, size, bytes) in [
        ("oom2g", "536870912", "2147483648"),
        ("oom2e", "576460752303423488", "2305843009213693952"),
    ] {
        let (r, out) = interp_limited(name, &INC_SLICE.replace("SIZE", size), 1_500_000);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains("error[E0102]: out of memory")
                && stderr.contains(&format!("cannot allocate {bytes} bytes for `%x`")),
            "{name}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert!(!out.exists(), "{name} wrote output");
    }
}

#[test]
fn the_interpreter_stores_f32_in_4_bytes() {
    // Two live 256 MiB f32 values fit in a 1.5 GB address space; at 16 bytes per element
    // (the old `Scalar` storage) they needed 2 GiB.
    let (r, out) = interp_limited("typed", &INC_SLICE.replace("SIZE", "67108864"), 1_500_000);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let t = tapc_runtime::npy::read(&out.join("s.npy")).unwrap();
    assert_eq!(t.data, tapc_runtime::Data::F32(vec![1.0; 4]));
}
