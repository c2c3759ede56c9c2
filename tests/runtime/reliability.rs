//! Reliability of compiled programs and of `tapc` end to end (issue 13): outputs are all or
//! nothing under SIGINT, SIGTERM, a file-size limit and concurrent runs; the exit status is 0
//! only when every output (the trace too) was written; messages are one clean line; a corrupt
//! embedded plan is an error, never a crash or a different output.
//!
//! Signals are delivered at a known phase with the runtime's test-only hook
//! `TAPC_RT_TEST_PAUSE=PHASE:MS` (runtime/src/signals.rs), which prints `tapc-test-pause PHASE`
//! at each step of that phase. The program's stderr is a pipe the test filled beforehand, so
//! that line holds the program right there until the test reads: the test acts once the
//! program is seen blocked on it (a condition, never a race with the clock).

use std::io::{BufRead, BufReader, PipeReader, PipeWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
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

pub(crate) fn scratch(name: &str) -> PathBuf {
    crate::common::scratch(&format!("reliability-{name}"))
}

pub(crate) fn tapc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tapc"))
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Compiles `src` to `DIR/NAME` once per test binary and name.
pub(crate) fn compile(name: &str, src: &str) -> PathBuf {
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

/// A program held at its first pause in `phase`: blocked writing the pause line to a full
/// stderr pipe, which only the test empties.
struct Held {
    child: Child,
    stderr: PipeReader,
    /// The bytes the test put in the pipe before the program started.
    filler: usize,
    phase: String,
}

/// Spawns `cmd` with the pause hook on `phase` and returns once it is held there.
fn spawn_held(mut cmd: Command, phase: &str) -> Held {
    let (stderr, mut writer) = std::io::pipe().unwrap();
    let filler = fill(&mut writer);
    let mut child = cmd
        .env("TAPC_RT_TEST_PAUSE", format!("{phase}:0"))
        .stdout(Stdio::null())
        .stderr(writer)
        .spawn()
        .unwrap();
    drop(cmd); // our copy of the pipe's write end: the reader sees the end when the child exits
    let pid = child.id();
    let what = format!("the program to block writing its stderr at {phase}");
    wait_for(&mut child, &what, || blocked_writing_stderr(pid));
    Held {
        child,
        stderr,
        filler,
        phase: phase.into(),
    }
}

/// Fills the pipe of `w` until not one more byte fits; returns how many bytes that took.
fn fill(w: &mut PipeWriter) -> usize {
    let fd = w.as_raw_fd();
    let blocking = |on: bool| {
        // SAFETY: F_GETFL/F_SETFL on an open descriptor have no memory-safety preconditions.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            let flags = if on {
                flags & !libc::O_NONBLOCK
            } else {
                flags | libc::O_NONBLOCK
            };
            assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags), 0);
        }
    };
    blocking(false);
    let mut n = 0;
    // Pages first, then single bytes into the last page.
    for chunk in [4096, 1] {
        let bytes = vec![b'.'; chunk];
        loop {
            match w.write(&bytes) {
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("filling a pipe: {e}"),
            }
        }
    }
    blocking(true);
    n
}

/// Whether a thread of process `pid` is inside `write(2, ...)`.
fn blocked_writing_stderr(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let write = libc::SYS_write.to_string();
    tasks.flatten().any(|t| {
        let call = std::fs::read_to_string(t.path().join("syscall")).unwrap_or_default();
        let mut fields = call.split_whitespace();
        fields.next() == Some(write.as_str()) && fields.next() == Some("0x2")
    })
}

/// Whether signal `sig` is pending for process `pid`, not yet taken by its signal thread.
fn signal_pending(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("ShdPnd:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

/// Polls `ready` until it holds; fails if `child` exits first (or after two minutes).
fn wait_for(child: &mut Child, what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ready() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the program exited ({status}) before {what}");
        }
        assert!(Instant::now() < deadline, "waited two minutes for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Lets a held program go on: reads its stderr to the end (so it never blocks again) and
/// waits for it. Checks that it was held by the pause line; returns its status and stderr.
fn release(held: Held) -> (ExitStatus, String) {
    let Held {
        mut child,
        mut stderr,
        filler,
        phase,
    } = held;
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        stderr.read_to_end(&mut all).unwrap();
        all
    });
    let status = child.wait().unwrap();
    let all = reader.join().unwrap();
    let text = String::from_utf8_lossy(&all[filler..]).into_owned();
    let line = format!("tapc-test-pause {phase}\n");
    assert!(
        text.starts_with(&line),
        "held elsewhere than at {phase}: {text}"
    );
    (status, text)
}

/// Sends `sig` to `cmd` held after staging its first output in `dir` (checked: a staging
/// directory is there); returns how it ended.
fn interrupt_while_writing(cmd: Command, dir: &Path, sig: &str) -> ExitStatus {
    let mut held = spawn_held(cmd, "write");
    let staged = files_in(dir).iter().any(|f| f.starts_with(".tapc-"));
    assert!(
        staged,
        "{sig}: held with nothing staged: {:?}",
        files_in(dir)
    );
    kill(&held.child, sig);
    held.child.wait().unwrap()
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
        let status = interrupt_while_writing(multi_cmd(&input(&dir, 5.0), &out), &out, sig);
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
    let mut held = spawn_held(multi_cmd(&input(&dir, 5.0), &out), "commit");
    // Held after its first rename: one sink is new, two are old.
    let new = sink_values(&out).iter().filter(|&&v| v != 2.0).count();
    assert_eq!(new, 1, "{:?}", sink_values(&out));
    kill(&held.child, "TERM");
    let pid = held.child.id();
    let what = "its signal thread to take SIGTERM";
    wait_for(&mut held.child, what, || {
        !signal_pending(pid, libc::SIGTERM)
    });
    let (status, _) = release(held);
    assert_eq!(status.signal(), Some(15), "{status:?}");
    assert_eq!(files_in(&out), vec!["a.npy", "b.npy", "c.npy"]);
    assert_eq!(sink_values(&out), vec![10.0, 6.0, 10.0]);
}

#[test]
fn concurrent_runs_into_one_directory_serialize_and_the_last_wins_whole() {
    let dir = scratch("concurrent");
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    // The first run is held inside its commit, holding the directory's lock ...
    let first = spawn_held(multi_cmd(&input(&dir, 1.0), &out), "commit");
    let mut second = multi_cmd(&input(&dir, 5.0), &out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // ... until the second says that it waits for it.
    let mut err = String::new();
    let mut second_err = BufReader::new(second.stderr.take().unwrap());
    second_err.read_line(&mut err).unwrap();
    assert!(
        err.contains("waiting for another run to finish writing its outputs to"),
        "{err}"
    );
    let (status, first_err) = release(first);
    assert!(status.success(), "{first_err}");
    second_err.read_to_string(&mut err).unwrap();
    let status = second.wait().unwrap();
    assert!(status.success(), "{err}");
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
        let status = interrupt_while_writing(compile_multi(&dir, emit), &dir, "INT");
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
