//! Reliability of compiled programs and of `tapc` end to end (issue 13): outputs are all or
//! nothing under SIGINT, SIGTERM, a file-size limit and concurrent runs; the exit status is 0
//! only when every output (the trace too) was written; messages are one clean line; a corrupt
//! embedded plan is an error, never a crash or a different output.
//!
//! Signals are delivered at a known phase with the runtime's test-only hook
//! `TAPC_RT_TEST_PAUSE=PHASE:MS` (runtime/src/signals.rs), which prints `tapc-test-pause PHASE`
//! and sleeps at each step of that phase.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use tapc_runtime::{npy, Data, Tensor};

const MULTI: &str = r#"
op @scale(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] * 2.0
}
op @shift(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] + 1.0
}

graph @multi {
  %x = source @x : f32[4096]
  %y = apply @scale(%x)
  %z = apply @shift(%x)
  sink @a %y
  sink @b %z
  sink @c %y
}
"#;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tapc-reliability-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn tapc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tapc"))
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Compiles `src` to `DIR/NAME` once per test binary and name.
fn compile(name: &str, src: &str) -> PathBuf {
    let dir = scratch(&format!("exe-{name}"));
    let file = dir.join(format!("{name}.teg"));
    std::fs::write(&file, src).unwrap();
    let exe = dir.join(name);
    let o = tapc().arg(&file).arg("-o").arg(&exe).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    exe
}

fn multi() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile("multi", MULTI))
}

/// `x = [v; 4096]` as a `.npy` file in `dir`.
fn input(dir: &Path, v: f32) -> PathBuf {
    let p = dir.join(format!("x-{v}.npy"));
    let t = Tensor::new(vec![4096], Data::F32(vec![v; 4096])).unwrap();
    npy::write(&p, &t).unwrap();
    p
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => vec![],
    };
    v.sort();
    v
}

/// The first element of every sink of `@multi` in `out` (a, b, c).
fn sink_values(out: &Path) -> Vec<f32> {
    ["a", "b", "c"]
        .iter()
        .map(
            |n| match npy::read(&out.join(format!("{n}.npy"))).unwrap().data {
                Data::F32(v) => v[0],
                d => panic!("{d:?}"),
            },
        )
        .collect()
}

fn multi_cmd(x: &Path, out: &Path) -> Command {
    let mut c = Command::new(multi());
    c.arg(format!("--input=x={}", x.display()))
        .arg("--out-dir")
        .arg(out);
    c
}

/// Spawns `cmd` with the pause hook on `phase` and returns once it paused there.
fn spawn_paused(mut cmd: Command, phase: &str, ms: u64) -> (Child, String) {
    let mut child = cmd
        .env("TAPC_RT_TEST_PAUSE", format!("{phase}:{ms}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "the program never paused at {phase}: {seen}"
        );
        seen.push_str(&line);
        if line.trim() == format!("tapc-test-pause {phase}") {
            break;
        }
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
    });
    (child, seen)
}

fn kill(child: &Child, sig: &str) {
    let s = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(s.success());
}

#[test]
fn sigint_while_writing_leaves_the_old_outputs_and_no_temporaries() {
    let dir = scratch("sigint-write");
    let out = dir.join("out");
    let o = multi_cmd(&input(&dir, 1.0), &out).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(sink_values(&out), vec![2.0, 2.0, 2.0]);
    for sig in ["INT", "TERM"] {
        let (mut child, _) = spawn_paused(multi_cmd(&input(&dir, 5.0), &out), "write", 10_000);
        kill(&child, sig);
        let status = child.wait().unwrap();
        assert!(status.signal().is_some(), "{sig}: {status:?}");
        assert_eq!(files_in(&out), vec!["a.npy", "b.npy", "c.npy"], "{sig}");
        assert_eq!(sink_values(&out), vec![2.0, 2.0, 2.0], "{sig}");
    }
}

#[test]
fn sigterm_while_committing_finishes_the_whole_set_first() {
    let dir = scratch("sigterm-commit");
    let out = dir.join("out");
    let o = multi_cmd(&input(&dir, 1.0), &out).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let (mut child, _) = spawn_paused(multi_cmd(&input(&dir, 5.0), &out), "commit", 300);
    kill(&child, "TERM");
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(15), "{status:?}");
    assert_eq!(files_in(&out), vec!["a.npy", "b.npy", "c.npy"]);
    assert_eq!(sink_values(&out), vec![10.0, 6.0, 10.0]);
}

#[test]
fn concurrent_runs_into_one_directory_serialize_and_the_last_wins_whole() {
    let dir = scratch("concurrent");
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    let (first, _) = spawn_paused(multi_cmd(&input(&dir, 1.0), &out), "commit", 300);
    let second = multi_cmd(&input(&dir, 5.0), &out)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", text(&first));
    assert!(second.status.success(), "{}", text(&second));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("waiting for another run to finish writing its outputs to"),
        "{err}"
    );
    assert_eq!(files_in(&out), vec!["a.npy", "b.npy", "c.npy"]);
    assert_eq!(sink_values(&out), vec![10.0, 6.0, 10.0]);
}

/// `sh -c 'ulimit -f BLOCKS; exec CMD...'`.
fn under_file_limit(blocks: u32, cmd: &Command) -> Output {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -f {blocks} && exec \"$0\" \"$@\""))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    sh.output().unwrap()
}

#[test]
fn a_file_size_limit_is_an_error_with_no_output_left() {
    let dir = scratch("fsize");
    let out = dir.join("out");
    let x = input(&dir, 1.0);
    let o = under_file_limit(8, &multi_cmd(&x, &out));
    fails_cleanly(&o, &out, &["File too large"]);
    assert!(!text(&o).contains("os error"));

    for emit in ["llvm", "exe"] {
        let o = under_file_limit(2, &compile_multi(&dir, emit));
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{emit}: {t}");
        assert!(
            t.contains("cannot write") || t.contains("File too large"),
            "{t}"
        );
        assert_eq!(files_in(&dir), vec!["multi.teg", "out", "x-1.npy"], "{t}");
    }
}

/// `tapc DIR/multi.teg --emit EMIT -o DIR/prog` (writing `multi.teg` first).
fn compile_multi(dir: &Path, emit: &str) -> Command {
    let teg = dir.join("multi.teg");
    std::fs::write(&teg, MULTI).unwrap();
    let mut c = tapc();
    c.arg(&teg)
        .args(["--emit", emit, "-o"])
        .arg(dir.join("prog"));
    c
}

#[test]
fn an_interrupted_compile_leaves_no_temporary() {
    let dir = scratch("sigint-compile");
    for emit in ["llvm", "exe"] {
        let (mut child, _) = spawn_paused(compile_multi(&dir, emit), "write", 10_000);
        kill(&child, "INT");
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(2), "{status:?}");
        assert_eq!(files_in(&dir), vec!["multi.teg"], "{emit}");
    }
}

#[test]
fn a_failed_trace_writes_no_output_and_says_so_once() {
    let dir = scratch("trace");
    let out = dir.join("out");
    let o = multi_cmd(&input(&dir, 1.0), &out)
        .arg("--trace")
        .arg(dir.join("missing/t.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(err.matches("multi").count(), 1, "{err}");
    assert!(
        err.starts_with("multi: error: cannot write") && err.contains("t.json"),
        "{err}"
    );
    assert!(!err.contains("os error"), "{err}");
    assert_eq!(files_in(&out), Vec::<String>::new());
}

#[test]
fn sink_names_up_to_the_file_name_limit_are_written() {
    let name = "s".repeat(251);
    let src = format!("graph @long {{\n  %x = source @x : f32[4096]\n  sink @{name} %x\n}}\n");
    let exe = compile("long", &src);
    let dir = scratch("long");
    let out = dir.join("out");
    let o = Command::new(exe)
        .arg(input(&dir, 1.0))
        .arg("--out-dir")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(files_in(&out), vec![format!("{name}.npy")]);
}

#[test]
fn a_closed_stdout_is_not_fatal() {
    let dir = scratch("sigpipe");
    let out = dir.join("out");
    let mut child = multi_cmd(&input(&dir, 1.0), &out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(sink_values(&out), vec![2.0, 2.0, 2.0]);
}

/// Runs `@multi` on 2 threads with `TAPC_RT_TEST_FAULT=HOOK`; checks exit code 1, one line
/// on stderr and no output; returns that line.
fn one_fault_line(x: &Path, out: &Path, hook: &str) -> String {
    let o = multi_cmd(x, out)
        .env("TAPC_RT_TEST_FAULT", hook)
        .args(["--threads", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(files_in(out), Vec::<String>::new(), "{err}");
    err
}

#[test]
fn a_task_panic_is_one_clean_line() {
    let dir = scratch("panic");
    let out = dir.join("out");
    let err = one_fault_line(&input(&dir, 1.0), &out, "panic:apply");
    assert!(err.starts_with("multi: error: task `apply @"), "{err}");
    assert!(
        !err.contains("panicked at") && !err.contains("thread '"),
        "{err}"
    );
}

#[test]
fn simultaneous_faults_write_one_whole_message() {
    let dir = scratch("faults");
    let out = dir.join("out");
    let x = input(&dir, 1.0);
    for _ in 0..20 {
        let err = one_fault_line(&x, &out, "segv:apply");
        assert_eq!(err.matches("error:").count(), 1, "{err}");
        assert!(err.starts_with("multi: error: segmentation fault (SIGSEGV) in task `apply @"));
    }
}

/// Flips every byte of a compiled program's plan (the MLP's, as `tapc -o` embeds it) in three
/// ways; each must decode to a clean error, or validate and run to the same outputs.
#[test]
fn every_flipped_plan_byte_is_a_clean_error_or_the_same_outputs() {
    use tapc_runtime::exec::{execute, Options};
    use tapc_runtime::plan::Plan;
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp.teg"))
            .unwrap();
    let (m, facts, diags) = tapc::compile_source(&src);
    assert!(!diags.has_errors());
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mlp");
    let opts = Options {
        threads: 1,
        record: false,
    };
    let (bytes, errors) = tapc::codegen::with_jit(&m, 0, &facts[0], &Default::default(), |p| {
        let inputs: Vec<Tensor> = p
            .plan
            .sources
            .iter()
            .map(|s| npy::read(&data.join(format!("{}.npy", s.name))).unwrap())
            .collect();
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let bytes = p.plan.encode();
        let want = execute(&Plan::decode(&bytes).unwrap(), p.kernels(), &refs, &opts)
            .unwrap()
            .0;
        let mut errors = 0;
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut v = bytes.clone();
                v[i] ^= flip;
                match Plan::decode(&v) {
                    Err(e) => {
                        assert!(
                            e.starts_with("corrupt plan")
                                || e.contains("tapc plan")
                                || e.contains("version"),
                            "{e}"
                        );
                        errors += 1;
                    }
                    Ok(plan) => {
                        if let Ok((got, _)) = execute(&plan, p.kernels(), &refs, &opts) {
                            assert_eq!(got, want, "byte {i} ^ {flip:#x}");
                        }
                    }
                }
            }
        }
        (bytes, errors)
    })
    .unwrap();
    assert!(bytes.len() > 500, "{}", bytes.len());
    assert_eq!(errors, 3 * bytes.len());
}

const BIG: &str = r#"
graph @big {
  %x = source @x : f32[4096]
  %z = rand seed 1 : f32[67108864]
  sink @x %x
  sink @z %z
}
"#;

fn big() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile("big", BIG))
}

/// `prlimit --as=BYTES CMD...`.
fn under_address_limit(bytes: u64, cmd: &Command) -> Output {
    Command::new("prlimit")
        .arg(format!("--as={bytes}"))
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .output()
        .unwrap()
}

#[test]
fn a_plan_that_cannot_fit_is_one_message_naming_its_biggest_buffers() {
    let dir = scratch("no-fit");
    let out = dir.join("out");
    let x = input(&dir, 1.0);
    let o = multi_cmd(&x, &out)
        .args(["--max-memory", "20KiB"])
        .output()
        .unwrap();
    fails_cleanly(
        &o,
        &out,
        &[
            "multi: error: graph @multi needs ",
            "more than the 20.0 KiB that --max-memory allows",
            "source @x (16.0 KiB)",
        ],
    );
    let mut c = Command::new(big());
    c.arg(&x).args(["--threads", "1", "--out-dir"]).arg(&out);
    let o = under_address_limit(200 << 20, &c);
    fails_cleanly(
        &o,
        &out,
        &["graph @big needs", "RLIMIT_AS", "sink @z (256.0 MiB)"],
    );
}

/// Exit code 1, stderr containing every one of `wants`, and nothing in `out`.
fn fails_cleanly(o: &Output, out: &Path, wants: &[&str]) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    for w in wants {
        assert!(t.contains(w), "{w}: {t}");
    }
    assert_eq!(files_in(out), Vec::<String>::new(), "{t}");
}

/// The 256 MiB sink is written from its buffer: it fits in an address space that could not
/// also hold a copy of it (the old copy-out aborted with "memory allocation failed"), and
/// `--time` reports the true peak.
#[test]
fn a_big_sink_is_written_without_a_copy_and_time_reports_the_peak() {
    let dir = scratch("big-sink");
    let out = dir.join("out");
    let mut c = Command::new(big());
    c.arg(input(&dir, 1.0))
        .args(["--threads", "1", "--time", "--out-dir"])
        .arg(&out);
    let o = under_address_limit(420 << 20, &c);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("peak memory 256.0 MiB"), "{t}");
    assert_eq!(
        std::fs::metadata(out.join("z.npy")).unwrap().len(),
        128 + (256 << 20)
    );
}
