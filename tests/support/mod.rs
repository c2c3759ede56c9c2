//! Shared pieces of the filetest harness: test discovery, `// RUN:` line parsing and
//! rendering of run results into snapshot text and FileCheck input.

pub mod annotations;
pub mod filecheck;

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// Env var overriding the filetests root (relative paths are relative to the package root).
pub const ROOT_ENV: &str = "TAPC_FILETESTS_DIR";

/// Default filetests root, relative to the package root.
pub const DEFAULT_ROOT: &str = "tests/filetests";

/// The package root (where `cargo test` runs, and what test paths are relative to).
pub fn package_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The filetests root: `$TAPC_FILETESTS_DIR` or `tests/filetests`, made absolute.
pub fn filetests_root() -> PathBuf {
    let dir = std::env::var_os(ROOT_ENV).map_or_else(|| PathBuf::from(DEFAULT_ROOT), PathBuf::from);
    package_root().join(dir)
}

/// One discovered `.teg` test file.
#[derive(Clone, Debug)]
pub struct TestFile {
    /// Absolute path.
    pub path: PathBuf,
    /// Path relative to the package root with `/` separators (what `%s` expands to).
    pub rel: String,
    /// Path relative to the filetests root (the trial name).
    pub name: String,
}

impl TestFile {
    pub fn new(path: PathBuf, root: &Path) -> Self {
        let rel = slash_path(path.strip_prefix(package_root()).unwrap_or(&path));
        let name = slash_path(path.strip_prefix(root).unwrap_or(&path));
        TestFile { path, rel, name }
    }

    /// Directory holding the test (and its snapshot).
    pub fn dir(&self) -> &Path {
        self.path
            .parent()
            .expect("a file always has a parent directory")
    }

    /// File name without `.teg`, used as the snapshot name.
    pub fn stem(&self) -> String {
        self.path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    }
}

fn slash_path(p: &Path) -> String {
    let parts: Vec<_> = p
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    parts.join("/")
}

/// All files under `root` (recursively) whose extension is `ext`, sorted.
pub fn discover(root: &Path, ext: &str) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    walk(root, ext, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, ext, out)?;
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    Ok(())
}

/// `.snap` files under `root` with no `.teg` next to them (left behind by a rename or delete).
pub fn orphan_snapshots(root: &Path) -> io::Result<Vec<PathBuf>> {
    let snaps = discover(root, "snap")?;
    Ok(snaps
        .into_iter()
        .filter(|s| !s.with_extension("teg").exists())
        .collect())
}

/// One `// RUN:` line: its 1-based source line and the expanded arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLine {
    pub line: usize,
    pub args: Vec<String>,
}

/// Extracts `// RUN: args` lines, expanding `%s` to `path` (appended if absent).
pub fn run_lines(source: &str, path: &str) -> Result<Vec<RunLine>, String> {
    let mut out = Vec::new();
    for (i, text) in source.lines().enumerate() {
        let Some(rest) = text.trim_start().strip_prefix("//") else {
            continue;
        };
        let Some(cmd) = rest.trim_start().strip_prefix("RUN:") else {
            continue;
        };
        let args =
            expand_run(cmd, path).map_err(|e| format!("line {}: {e}\n  {}", i + 1, text.trim()))?;
        out.push(RunLine { line: i + 1, args });
    }
    Ok(out)
}

fn expand_run(cmd: &str, path: &str) -> Result<Vec<String>, String> {
    let mut args: Vec<String> = cmd
        .split_whitespace()
        .map(|a| a.replace("%s", path))
        .collect();
    match args.first().map(String::as_str) {
        None => return Err("empty RUN line".into()),
        // Args exclude the program name; a leading `tapc` would be taken as a file name.
        Some("tapc" | "%tapc") => {
            return Err("RUN args exclude the program name: write `// RUN: opt ... %s`".into())
        }
        Some(_) => {}
    }
    if !cmd.contains("%s") {
        args.push(path.to_string());
    }
    Ok(args)
}

/// What one RUN line produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    pub args: Vec<String>,
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// Renders all runs as snapshot text (`$ tapc ...`, `exit:`, non-empty `--- stdout`/`--- stderr`).
pub fn render(runs: &[RunResult]) -> String {
    let root = package_root().to_string_lossy().into_owned();
    let mut out = String::new();
    for (i, r) in runs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        writeln!(out, "$ tapc {}", r.args.join(" ")).unwrap();
        writeln!(out, "exit: {}", r.code).unwrap();
        push_section(&mut out, "stdout", &r.stdout);
        push_section(&mut out, "stderr", &r.stderr);
    }
    // Keeps snapshots machine-independent if the compiler ever prints an absolute path.
    out.replace(&root, "$ROOT")
}

fn push_section(out: &mut String, name: &str, text: &str) {
    if text.is_empty() {
        return;
    }
    writeln!(out, "--- {name}").unwrap();
    push_line_terminated(out, text);
}

fn push_line_terminated(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

/// stdout then stderr of every run, in order: the text FileCheck directives match against.
pub fn combined_output(runs: &[RunResult]) -> String {
    let mut out = String::new();
    for r in runs {
        for text in [&r.stdout, &r.stderr] {
            if !text.is_empty() {
                push_line_terminated(&mut out, text);
            }
        }
    }
    out
}

/// A line-based diff (`-` old, `+` new) with 3 lines of context, for snapshot mismatches.
pub fn diff_lines(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    // The LCS table is quadratic; huge snapshots get a summary instead of a diff.
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        return format!(
            "(too large to diff: {} old lines, {} new lines)\n",
            a.len(),
            b.len()
        );
    }
    let ops = diff_ops(&a, &b);
    let (mut out, mut skipping) = (String::new(), false);
    for (k, (tag, line)) in ops.iter().enumerate() {
        let near_change = ops[k.saturating_sub(3)..(k + 4).min(ops.len())]
            .iter()
            .any(|o| o.0 != ' ');
        if near_change {
            writeln!(out, "{}", format!("{tag} {line}").trim_end()).unwrap();
        } else if !skipping {
            out.push_str("  ...\n");
        }
        skipping = !near_change;
    }
    out
}

/// Edit script from the LCS table: `' '` keep, `'-'` delete, `'+'` insert.
fn diff_ops<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(char, &'a str)> {
    let lcs = lcs_table(a, b);
    let (mut i, mut j, mut ops) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    ops
}

/// `t[i][j]` = length of the longest common subsequence of `a[i..]` and `b[j..]`.
fn lcs_table(a: &[&str], b: &[&str]) -> Vec<Vec<usize>> {
    let mut t = vec![vec![0; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            t[i][j] = if a[i] == b[j] {
                t[i + 1][j + 1] + 1
            } else {
                t[i][j + 1].max(t[i + 1][j])
            };
        }
    }
    t
}

/// The content of an insta `.snap` file (everything after the `---` metadata header).
pub fn read_snapshot(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let body = text.strip_prefix("---\n")?;
    let end = body.find("\n---\n")?;
    Some(body[end + 5..].to_string())
}
