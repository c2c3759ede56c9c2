//! A real editor client: headless Neovim (Debian's `neovim`, 0.7 has `vim.lsp`) opens a broken
//! file with `tapc lsp` attached and writes the diagnostics it received as JSON; and it completes
//! and formats a file with comments. Neovim is
//! installed by the test when missing (as root, as CI runs); otherwise the test fails with how
//! to install it. It never skips.

use crate::editing::{COMMENTED, COMMENTED_FORMATTED};
use crate::syspkg;

use serde_json::Value;
use std::process::Command;

/// Two graphs, one mistake each: an error in one item does not hide the other's.
const BROKEN: &str = "\
op @relu(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(x[..i], 0.0)
}

graph @a {
  %x = source @x : f32[4]
  %y = apply @rleu(%x)
  sink @y %y
}

graph @b {
  %x = source @x : f32[4]
  sink @z %q
}
";

/// Runs `script` (in tests/lsp/) in headless Neovim on `text` written to `file_name`, with
/// `extra` Lua globals, and asserts that nvim exits successfully; returns the JSON the script
/// wrote to `_G.OUT`.
fn run_nvim(script: &str, file_name: &str, text: &str, extra: &str) -> Value {
    syspkg::ensure("nvim", &["neovim"]);
    let dir =
        std::env::temp_dir().join(format!("tapc-lsp-nvim-{}-{file_name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    crate::common::remove_at_exit(&dir);
    let file = dir.join(file_name);
    let out = dir.join("out.json");
    std::fs::write(&file, text).unwrap();
    let _ = std::fs::remove_file(&out);
    let here = format!("{}/tests/lsp", env!("CARGO_MANIFEST_DIR"));
    let globals = format!(
        "lua _G.TAPC = {:?}; _G.FILE = {:?}; _G.OUT = {:?}; {extra}",
        env!("CARGO_BIN_EXE_tapc"),
        file.display().to_string(),
        out.display().to_string()
    );
    let run = Command::new("nvim")
        .args([
            "--headless",
            "--clean",
            "-n",
            "-i",
            "NONE",
            "--cmd",
            &globals,
        ])
        .args(["-c", &format!("luafile {here}/nvim_attach.lua")])
        .args(["-c", &format!("luafile {here}/{script}")])
        .output()
        .expect("run nvim");
    let json = std::fs::read_to_string(&out).unwrap_or_else(|e| {
        panic!(
            "nvim wrote nothing ({e}); status {}, stderr: {}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
        )
    });
    assert!(run.status.success(), "nvim failed: {run:?}");
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::from_str(&json).unwrap()
}

#[test]
fn neovim_shows_the_servers_diagnostics() {
    let v = run_nvim("nvim_diagnostics.lua", "broken.teg", BROKEN, "");
    assert_eq!(v["arrived"], true, "{v}");
    assert_eq!(v["stopped"], true, "the server did not shut down: {v}");
    let mut got: Vec<(u64, &str, &str)> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["source"], "tapc", "{d}");
            (
                d["line"].as_u64().unwrap(),
                d["code"].as_str().unwrap(),
                d["message"].as_str().unwrap(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(got.len(), 2, "{v}");
    assert_eq!((got[0].0, got[0].1), (7, "E0012"), "{v}");
    assert!(got[0].2.contains("did you mean `@relu`"), "{v}");
    assert_eq!((got[1].0, got[1].1), (13, "E0011"), "{v}");
}

#[test]
fn neovim_completes_and_formats_keeping_comments() {
    // The file and its hand-formatted text are those of tests/lsp/editing.rs.
    let line = COMMENTED
        .lines()
        .position(|l| l.contains("%b = apply"))
        .unwrap();
    let col = COMMENTED.lines().nth(line).unwrap().find('@').unwrap() + 1;
    let extra = format!("_G.LINE = {line}; _G.COL = {col}");
    let v = run_nvim("nvim_editing.lua", "commented.teg", COMMENTED, &extra);
    assert_eq!(v["ready"], true, "{v}");
    assert_eq!(v["stopped"], true, "the server did not shut down: {v}");
    assert_eq!(
        v["completion"],
        serde_json::json!([{"label": "@double", "detail": "op @double(x: f32[N]) -> (y: f32[N])"}]),
        "{v}"
    );
    let lines: Vec<&str> = v["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let want: Vec<&str> = COMMENTED_FORMATTED.lines().collect();
    assert_eq!(lines, want, "{v}");
}
