//! Values whose byte size overflows i64 (issue 13, defect 2): `check`, `run` (JIT), `run
//! --interp` and `-o` all stop at the verifier's E0025 with exit code 1, in a real `tapc`
//! process, with no crash, no panic and no output written.

use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tapc-sizes-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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
