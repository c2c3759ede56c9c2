//! Filetest harness (`cargo test --test filetests`): every `tests/filetests/**/*.teg` is one
//! test. Its `// RUN: <args>` lines run `tapc` in-process; their output is snapshotted next
//! to the file (`foo.teg` -> `foo.snap`), matched against `// CHECK...:` directives, and
//! `// ERROR@+1: E0012 msg` annotations are compared with `check --error-format=json`.
//! `%t` in a RUN line is a scratch directory of the test's own (printed as `%t`).
//! Set `TAPC_FILETESTS_DIR` to use another root; `INSTA_UPDATE=always` accepts new output.

mod support;

use libtest_mimic::{Arguments, Failed, Trial};
use std::path::Path;
use support::{annotations, filecheck, RunLine, RunResult, TestFile};

fn main() {
    let args = Arguments::from_args();
    prepare_process();
    let trials = collect_trials();
    libtest_mimic::run(&args, trials).exit();
}

/// Process-wide setup, done before any trial thread starts.
fn prepare_process() {
    // RUN paths are relative to the package root, wherever the binary is started from.
    std::env::set_current_dir(support::package_root()).expect("cannot enter the package root");
    // insta's own diff printing would interleave across parallel trials; our messages carry the diff.
    if std::env::var_os("INSTA_OUTPUT").is_none() {
        std::env::set_var("INSTA_OUTPUT", "none");
    }
    panics::install_hook();
}

/// One trial per filetest; a missing or empty root is one failing trial, never a silent pass.
fn collect_trials() -> Vec<Trial> {
    let root = support::filetests_root();
    match trials_in(&root) {
        Ok(trials) => trials,
        Err(e) => vec![failing_trial(
            "filetests discovery",
            format!("{}: {e}", root.display()),
        )],
    }
}

fn trials_in(root: &Path) -> std::io::Result<Vec<Trial>> {
    let files = support::discover(root, "teg")?;
    if files.is_empty() {
        return Err(std::io::Error::other("no .teg filetests found"));
    }
    let mut trials: Vec<Trial> = files
        .into_iter()
        .map(|path| file_trial(TestFile::new(path, root)))
        .collect();
    for snap in support::orphan_snapshots(root)? {
        trials.push(orphan_trial(&snap, root));
    }
    Ok(trials)
}

fn file_trial(file: TestFile) -> Trial {
    Trial::test(file.name.clone(), move || run_test(&file))
}

fn failing_trial(name: &str, message: String) -> Trial {
    Trial::test(name, move || Err(Failed::from(message)))
}

fn orphan_trial(snap: &Path, root: &Path) -> Trial {
    let name = TestFile::new(snap.to_path_buf(), root).name;
    let msg = format!("{name}: snapshot without a matching .teg file; delete it");
    failing_trial(&name, msg)
}

/// Runs one filetest: RUN lines, then FileCheck, annotations and snapshot (all reported together).
fn run_test(file: &TestFile) -> Result<(), Failed> {
    let source = std::fs::read_to_string(&file.path)
        .map_err(|e| format!("cannot read {}: {e}", file.rel))?;
    let runs = support::run_lines(&source, &file.rel)
        .map_err(|e| format!("bad RUN line in {}:\n{e}", file.rel))?;
    if runs.is_empty() {
        return Err(format!(
            "{} has no `// RUN: <args>` line; every filetest needs at least one",
            file.rel
        )
        .into());
    }
    let scratch = Scratch::new(&file.name);
    let results = runs
        .iter()
        .map(|run| execute(&scratch.expand(run)).map(|r| scratch.hide(r)))
        .collect::<Result<Vec<_>, _>>()?;
    let checks = [
        run_filecheck(&source, &results),
        check_annotations(file, &source),
        assert_snapshot(file, &support::render(&results)),
    ];
    all_checks(checks, "\n\n").map_err(Failed::from)
}

/// `%t` in a RUN line: a directory of this test's own, removed when the test ends (as lit's
/// `%t`), so parallel and concurrent runs never share an output path. Snapshots print `%t`.
struct Scratch {
    dir: std::path::PathBuf,
}

impl Scratch {
    fn new(test: &str) -> Scratch {
        let name: String = test
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let dir = std::env::temp_dir().join(format!("tapc-filetest-{}-{name}", std::process::id()));
        Scratch { dir }
    }

    /// Replaces an argument `%t` or `%t/...` with the scratch directory.
    fn expand(&self, run: &RunLine) -> RunLine {
        let dir = self.dir.to_string_lossy();
        let expand = |a: &String| match a.strip_prefix("%t") {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{dir}{rest}"),
            _ => a.clone(),
        };
        RunLine {
            line: run.line,
            args: run.args.iter().map(expand).collect(),
        }
    }

    /// Prints the scratch directory back as `%t`, for CHECK lines and snapshots alike.
    fn hide(&self, run: RunResult) -> RunResult {
        let dir = self.dir.to_string_lossy();
        let hide = |text: &str| text.replace(dir.as_ref(), "%t");
        RunResult {
            args: run.args.iter().map(|a| hide(a)).collect(),
            stdout: hide(&run.stdout),
            stderr: hide(&run.stderr),
            code: run.code,
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs every check and reports their failures together, separated by `sep`.
fn all_checks(
    checks: impl IntoIterator<Item = Result<(), String>>,
    sep: &str,
) -> Result<(), String> {
    let problems: Vec<String> = checks.into_iter().filter_map(Result::err).collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join(sep))
    }
}

fn execute(run: &RunLine) -> Result<RunResult, String> {
    let out = run_tapc(&run.args).map_err(|e| format!("RUN line {}: {e}", run.line))?;
    Ok(RunResult {
        args: run.args.clone(),
        stdout: out.stdout,
        stderr: out.stderr,
        code: out.code,
    })
}

/// Calls the compiler in-process, turning a compiler panic into an error message.
fn run_tapc(args: &[String]) -> Result<tapc::driver::Outcome, String> {
    panics::catch(|| tapc::driver::run(args))
        .map_err(|p| format!("`tapc {}` panicked: {p}", args.join(" ")))
}

fn run_filecheck(source: &str, runs: &[RunResult]) -> Result<(), String> {
    if !filecheck::has_directives(source, "CHECK") {
        return Ok(());
    }
    let output = support::combined_output(runs);
    filecheck::check(source, &output).map_err(|e| format!("FileCheck failed:\n{e}"))
}

/// Compares `// ERROR@...:` annotations with the diagnostics of `check FILE --error-format=json`.
fn check_annotations(file: &TestFile, source: &str) -> Result<(), String> {
    let expected =
        annotations::parse(source).map_err(|e| format!("bad diagnostic annotation:\n{e}"))?;
    if expected.is_empty() {
        return Ok(());
    }
    let args: Vec<String> = vec![
        "check".into(),
        file.rel.clone(),
        "--error-format=json".into(),
    ];
    let context = |e: String| format!("expected diagnostics (`tapc {}`):\n{e}", args.join(" "));
    let out = run_tapc(&args).map_err(context)?;
    let actual = annotations::parse_diagnostics(&out.stderr).map_err(context)?;
    let checks = [
        exit_code_consistency(&actual, out.code),
        annotations::compare(&expected, &actual),
    ];
    all_checks(checks, "\n").map_err(context)
}

/// A failing exit without an error diagnostic (or the reverse) is a driver bug worth flagging.
fn exit_code_consistency(diags: &[annotations::Diagnostic], code: i32) -> Result<(), String> {
    let has_error = diags
        .iter()
        .any(|d| d.severity == annotations::Severity::Error);
    match (has_error, code) {
        (true, 0) => Err("errors were reported but the exit code is 0".into()),
        (false, c) if c != 0 => Err(format!("exit code is {c} but no error was reported")),
        _ => Ok(()),
    }
}

/// Asserts the rendered output against `<stem>.snap` next to the test file, via insta.
fn assert_snapshot(file: &TestFile, text: &str) -> Result<(), String> {
    let snap = file.dir().join(format!("{}.snap", file.stem()));
    let old = support::read_snapshot(&snap);
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(file.dir());
    settings.set_prepend_module_to_snapshot(false);
    settings.set_input_file(&file.path);
    settings.set_omit_expression(true);
    let name = file.stem();
    let result = panics::catch(|| settings.bind(|| insta::assert_snapshot!(name.as_str(), text)));
    result.map_err(|panic| snapshot_message(&snap, old.as_deref(), text, &panic))
}

fn snapshot_message(snap: &Path, old: Option<&str>, new: &str, panic: &str) -> String {
    let shown = relative(snap);
    let hint =
        "accept with `INSTA_UPDATE=always cargo test --test filetests` or `cargo insta review`";
    match old {
        None => format!(
            "snapshot {shown} is missing; new output:\n{}({hint})",
            indent(new)
        ),
        Some(old) if old.trim_end() != new.trim_end() => {
            let diff = support::diff_lines(old, new);
            format!("snapshot {shown} differs (- snapshot, + actual):\n{diff}({hint})")
        }
        Some(_) => format!("snapshot {shown}: insta failed: {panic}"),
    }
}

fn relative(path: &Path) -> String {
    let root = support::package_root();
    path.strip_prefix(&root)
        .map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}

fn indent(text: &str) -> String {
    let pad = |l: &str| {
        if l.is_empty() {
            "\n".to_string()
        } else {
            format!("  {l}\n")
        }
    };
    text.lines().map(pad).collect()
}

/// Panic capture: a panicking compiler or insta assertion becomes a message, not stderr noise.
mod panics {
    use std::backtrace::{Backtrace, BacktraceStatus};
    use std::cell::{Cell, RefCell};
    use std::panic::{AssertUnwindSafe, PanicHookInfo};

    thread_local! {
        static CATCHING: Cell<bool> = const { Cell::new(false) };
        static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    /// Records panics raised inside [`catch`]; all others go to the default hook.
    pub fn install_hook() {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                LAST.with(|l| *l.borrow_mut() = Some(describe(info)));
            } else {
                default(info);
            }
        }));
    }

    fn describe(info: &PanicHookInfo<'_>) -> String {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("<non-string panic payload>");
        let at = info
            .location()
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        let bt = Backtrace::capture();
        let bt = if bt.status() == BacktraceStatus::Captured {
            format!("\n{bt}")
        } else {
            String::new()
        };
        format!("{msg}{at}{bt}")
    }

    /// Runs `f`, returning the recorded panic description if it panics.
    pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
        let was = CATCHING.with(|c| c.replace(true));
        let result = std::panic::catch_unwind(AssertUnwindSafe(f));
        CATCHING.with(|c| c.set(was));
        result.map_err(|_| {
            LAST.with(|l| l.borrow_mut().take())
                .unwrap_or_else(|| "panicked".into())
        })
    }
}
