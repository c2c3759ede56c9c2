//! The path policy end to end (issue 23, items 1-6, 13 and 14; docs/teg.md §14): `tapc` and
//! compiled programs never replace a device or their own source, `fmt --in-place` edits the
//! file safely, paths are bytes, a trace spelled differently from the out dir cannot deadlock,
//! and signals during staging or a SIGKILL leave nothing behind for long.
//!
//! Device nodes are only ever written in a private mount namespace with a tmpfs `/dev`
//! (`unshare -m`, as root), never the host's `/dev`.

use crate::common::syspkg;
use crate::reliability::{compile, scratch, tapc, text};
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tapc_runtime::{npy, Data, Tensor};

const SCALE: &str = r#"
op @scale(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] * 2.0
}
graph @g {
  %x = source @x : f32[4]
  %y = apply @scale(%x)
  sink @y %y
}
"#;

fn scale() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile("scale", SCALE))
}

/// A graph of `n` sinks of 4096 floats each (for signals while staging).
fn many() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let mut src = String::from("graph @many {\n  %x = rand seed 1 : f32[4096]\n");
        for k in 0..300 {
            src.push_str(&format!("  sink @s{k} %x\n"));
        }
        src.push_str("}\n");
        compile("many", &src)
    })
}

fn input(path: &Path, v: f32) {
    let t = Tensor::new(vec![4], Data::F32(vec![v; 4])).unwrap();
    npy::write(path, &t).unwrap();
}

fn first(path: &Path) -> f32 {
    match npy::read(path).unwrap().data {
        Data::F32(v) => v[0],
        d => panic!("{d:?}"),
    }
}

fn staging_in(dir: &Path) -> Vec<String> {
    (std::fs::read_dir(dir).unwrap().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tapc-"))
        .collect()
}

/// Waits for `child` at most two minutes (a hang fails the test instead of blocking it).
fn finish(mut child: Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what}: still running after two minutes (a hang)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn devices_are_written_in_place_in_a_private_dev() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test writes device nodes in a private mount namespace and needs root (as CI runs); \
         run it as root: `sudo cargo test --test runtime paths::devices`"
    );
    syspkg::ensure("unshare", &["util-linux"]);
    let dir = scratch("dev");
    let src = dir.join("m.teg");
    std::fs::write(&src, SCALE).unwrap();
    let script = r#"set -e
mount -t tmpfs tmpfs /dev
mknod -m 666 /dev/null c 1 3
ln -s /proc/self/fd/1 /dev/stdout
"$TAPC" "$DIR/m.teg" -o /dev/null
"$TAPC" "$DIR/m.teg" --emit llvm -o /dev/null
"$TAPC" "$DIR/m.teg" --emit llvm -o /dev/stdout > "$DIR/file.ll"
"$TAPC" "$DIR/m.teg" --emit llvm -o /dev/stdout | cat > "$DIR/piped.ll"
"$EXE" --input x="$DIR/x.npy" --out-dir "$DIR/out" --trace /dev/null > "$DIR/run.txt"
stat -c '%F' /dev/null /dev/stdout
"#;
    input(&dir.join("x.npy"), 1.0);
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script])
        .env("TAPC", env!("CARGO_BIN_EXE_tapc"))
        .env("EXE", scale())
        .env("DIR", &dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let types = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        types,
        "character special file\nsymbolic link\n",
        "{}",
        text(&o)
    );
    for f in ["file.ll", "piped.ll"] {
        let ir = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(ir.contains("ModuleID"), "{f}: {ir}");
    }
    assert_eq!(first(&dir.join("out/y.npy")), 2.0);
    assert!(staging_in(&dir).is_empty() && staging_in(&dir.join("out")).is_empty());
}

#[test]
fn tapc_never_writes_over_its_source() {
    let dir = scratch("source");
    let run = |args: &[&OsStr]| tapc().current_dir(&dir).args(args).output().unwrap();
    let os = |s: &'static str| OsStr::new(s);
    std::fs::write(dir.join("m"), SCALE).unwrap();
    std::os::unix::fs::symlink("m", dir.join("link")).unwrap();
    let cases: Vec<(&str, Vec<&OsStr>)> = vec![
        ("m", vec![os("m")]),
        ("m.ll", vec![os("m.ll"), os("--emit"), os("llvm")]),
        ("m.s", vec![os("m.s"), os("--emit"), os("asm")]),
        ("m.o", vec![os("m.o"), os("--emit"), os("obj")]),
        (
            "m",
            vec![os("m"), os("--emit"), os("llvm"), os("-o"), os("m")],
        ),
        (
            "m",
            vec![os("m"), os("--emit"), os("llvm"), os("-o"), os("link")],
        ),
        ("m", vec![os("m"), os("-o"), os("./m")]),
    ];
    for (source, args) in cases {
        std::fs::write(dir.join(source), SCALE).unwrap();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("(the same file); nothing was written"),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read_to_string(dir.join(source)).unwrap(), SCALE);
        assert!(staging_in(&dir).is_empty());
    }
}

#[test]
fn fmt_in_place_follows_links_keeps_hard_links_and_mode_and_ignores_planted_names() {
    let dir = scratch("fmt");
    let ugly = SCALE.replace("  y[i]", "y[i]");
    std::fs::write(dir.join("f.teg"), &ugly).unwrap();
    std::fs::set_permissions(dir.join("f.teg"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::write(dir.join("victim"), "victim").unwrap();
    std::os::unix::fs::symlink("victim", dir.join("f.teg.tmp-fmt")).unwrap();
    std::os::unix::fs::symlink("f.teg", dir.join("link.teg")).unwrap();
    let o = tapc()
        .args(["fmt", "--in-place"])
        .arg(dir.join("link.teg"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let pretty = std::fs::read_to_string(dir.join("f.teg")).unwrap();
    assert_ne!(pretty, ugly);
    assert_eq!(
        std::fs::read_to_string(dir.join("victim")).unwrap(),
        "victim"
    );
    let link = std::fs::symlink_metadata(dir.join("link.teg")).unwrap();
    assert!(link.file_type().is_symlink(), "the link stays a link");
    let mode = std::fs::metadata(dir.join("f.teg"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);

    std::fs::write(dir.join("f.teg"), &ugly).unwrap();
    std::fs::hard_link(dir.join("f.teg"), dir.join("hard.teg")).unwrap();
    let o = tapc()
        .args(["fmt", "--in-place"])
        .arg(dir.join("f.teg"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join("hard.teg")).unwrap(),
        pretty
    );
    assert!(staging_in(&dir).is_empty());
}

/// `prefix` followed by the byte 0xff (not UTF-8).
fn non_utf8(dir: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let mut b = prefix.as_bytes().to_vec();
    b.push(0xff);
    b.extend_from_slice(suffix.as_bytes());
    dir.join(OsStr::from_bytes(&b))
}

#[test]
fn paths_that_are_not_utf8_name_the_same_files() {
    let dir = scratch("bytes");
    let bad_in = non_utf8(&dir, "in", ".npy");
    input(&bad_in, 1.0);
    // The file a lossy reading of the name would open instead.
    input(&dir.join("in\u{FFFD}.npy"), 7.0);
    let out = non_utf8(&dir, "keep", "");
    let mut named = OsString::from("x=");
    named.push(&bad_in);
    let o = Command::new(scale())
        .arg("--input")
        .arg(&named)
        .arg("--out-dir")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(first(&out.join("y.npy")), 2.0);
    assert!(!dir.join("keep\u{FFFD}").exists());
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("keep\\xff/y.npy"),
        "{}",
        text(&o)
    );

    let src = non_utf8(&dir, "m", ".teg");
    std::fs::write(&src, SCALE).unwrap();
    let o = tapc().arg("check").arg(&src).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out2 = non_utf8(&dir, "run", "");
    let o = tapc()
        .args(["run", "--interp"])
        .arg(&src)
        .arg("--input")
        .arg(&named)
        .arg("--out-dir")
        .arg(&out2)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(first(&out2.join("y.npy")), 2.0);

    // Pass options are text: a byte path is refused, never written as a lossy neighbour.
    let svg = non_utf8(&dir, "f", ".svg");
    let o = tapc()
        .current_dir(&dir)
        .args(["opt", "--passes=cost", "--frontier-svg"])
        .arg(&svg)
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("f\\xff.svg`: the path must be UTF-8"));
    assert!(!svg.exists() && !dir.join("f\u{FFFD}.svg").exists());
}

#[test]
fn outputs_named_like_backups_get_their_own_content() {
    let dir = scratch("backup-names");
    let d = dir.join("d");
    std::fs::create_dir(&d).unwrap();
    let src = dir.join("m.teg");
    std::fs::write(&src, SCALE).unwrap();
    std::fs::write(d.join("0.old"), "old").unwrap();
    let o = tapc()
        .arg(&src)
        .args(["--emit", "llvm", "-o"])
        .arg(d.join("0.old"))
        .output();
    let o = o.unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::read_to_string(d.join("0.old"))
        .unwrap()
        .contains("ModuleID"));

    let out = dir.join("out");
    input(&dir.join("x.npy"), 1.0);
    for _ in 0..2 {
        let o = Command::new(scale())
            .arg(format!("--input=x={}", dir.join("x.npy").display()))
            .arg("--out-dir")
            .arg(&out)
            .arg("--trace")
            .arg(out.join("0.old"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    let trace = std::fs::read_to_string(out.join("0.old")).unwrap();
    assert!(
        trace.starts_with('{') || trace.starts_with('['),
        "{trace:.80}"
    );
}

#[test]
fn a_trace_spelled_differently_from_the_out_dir_does_not_wait_for_itself() {
    let dir = scratch("spelling");
    input(&dir.join("x.npy"), 1.0);
    std::fs::create_dir(dir.join("out")).unwrap();
    std::os::unix::fs::symlink("out", dir.join("alias")).unwrap();
    let abs = dir.join("out").join("t3.json");
    let traces: [&OsStr; 3] = [
        "./out/t1.json".as_ref(),
        "alias/t2.json".as_ref(),
        abs.as_ref(),
    ];
    for trace in traces {
        let child = Command::new(scale())
            .current_dir(&dir)
            .args(["--input", "x=x.npy", "--out-dir", "out", "--trace"])
            .arg(trace)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let status = finish(child, &format!("--trace {}", trace.to_string_lossy()));
        assert!(status.success(), "{trace:?}: {status:?}");
    }
    for t in ["t1.json", "t2.json", "t3.json", "y.npy"] {
        assert!(dir.join("out").join(t).is_file(), "{t}");
    }
}

#[test]
fn two_runs_locking_two_directories_under_crossed_spellings_do_not_deadlock() {
    let dir = scratch("crossed");
    input(&dir.join("x.npy"), 1.0);
    for d in ["a", "b"] {
        std::fs::create_dir(dir.join(d)).unwrap();
    }
    std::os::unix::fs::symlink(".", dir.join("zz")).unwrap();
    // By spelling, the first run locks `a` then `b`, the second `b` then `zz/a`; each holds
    // its first lock for 300 ms (the pause hook), so locks taken in spelling order deadlock.
    let run = |out: &str, trace: &str| {
        Command::new(scale())
            .current_dir(&dir)
            .args(["--input", "x=x.npy", "--out-dir", out, "--trace", trace])
            .env("TAPC_RT_TEST_PAUSE", "lock:300")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let first = run("a", "b/t.json");
    let second = run("b", "zz/a/t.json");
    assert!(finish(first, "the first run").success());
    assert!(finish(second, "the second run").success());
}

#[test]
fn an_input_is_never_an_output_of_a_compiled_program() {
    let dir = scratch("input-output");
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    input(&out.join("y.npy"), 3.0);
    let o = Command::new(scale())
        .arg(format!("--input=x={}", out.join("y.npy").display()))
        .arg("--out-dir")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("it is the input"),
        "{}",
        text(&o)
    );
    assert_eq!(first(&out.join("y.npy")), 3.0);
}

#[test]
fn sigterm_while_staging_many_sinks_leaves_no_staging() {
    let dir = scratch("sigterm-staging");
    for (k, after) in [1usize, 3, 10, 30, 60, 100, 150, 220]
        .into_iter()
        .enumerate()
    {
        let out = dir.join(format!("out{k}"));
        let mut child = Command::new(many())
            .arg("--out-dir")
            .arg(&out)
            .env("TAPC_RT_TEST_PAUSE", "write:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        for _ in 0..after {
            lines.next().unwrap().unwrap();
        }
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let drain = std::thread::spawn(move || lines.count());
        let status = finish(child, "a program given SIGTERM");
        drain.join().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "after {after} sinks");
        assert_eq!(
            staging_in(&out),
            Vec::<String>::new(),
            "after {after} sinks"
        );
    }
}

#[test]
fn sigkill_leftovers_are_swept_and_a_rerun_keeps_modes() {
    let dir = scratch("sigkill");
    let out = dir.join("out");
    input(&dir.join("x.npy"), 1.0);
    let cmd = || {
        let mut c = Command::new(scale());
        c.arg(format!("--input=x={}", dir.join("x.npy").display()))
            .arg("--out-dir")
            .arg(&out)
            .stdout(Stdio::null());
        c
    };
    let mut child = (cmd().env("TAPC_RT_TEST_PAUSE", "write:600000"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !out.is_dir() || staging_in(&out).is_empty() {
        assert!(Instant::now() < deadline, "nothing was staged");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(staging_in(&out).len(), 1, "SIGKILL leaves its staging");
    assert!(cmd().status().unwrap().success());
    assert_eq!(
        staging_in(&out),
        Vec::<String>::new(),
        "swept by the next run"
    );
    let y = out.join("y.npy");
    std::fs::set_permissions(&y, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(cmd().status().unwrap().success());
    assert_eq!(
        std::fs::metadata(&y).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn a_run_with_no_sinks_writes_its_trace_inside_a_new_out_dir() {
    let exe = compile("nosinks", "graph @g {\n  %x = zeros : f32[2]\n}\n");
    let dir = scratch("nosinks");
    let out = dir.join("new");
    let o = Command::new(exe)
        .arg("--out-dir")
        .arg(&out)
        .arg("--trace")
        .arg(out.join("t.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("t.json").is_file());
}
