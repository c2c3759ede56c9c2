//! The path policy of the output writer (`tapc_runtime::output`, `tapc_runtime::paths`; issue
//! 23): backups never share a name with an output, locks are keyed by the directory's identity
//! so spellings cannot deadlock, staging is linear (20k sinks), the mode of a replaced file is
//! kept, stale staging of dead processes is swept, symbolic links follow the documented rule,
//! FIFOs are written in place, an input is never an output, and paths are bytes.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use tapc_runtime::output::{self, Outputs};
use tapc_runtime::paths::{self, shown, Origin};
use tapc_runtime::{cli, npy, Data, Tensor};

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn write_text(o: &mut Outputs, target: &Path, text: &str) -> Result<(), tapc_runtime::NpyError> {
    o.write(target, |w| w.write_all(text.as_bytes()))
}

/// Commits `o` on another thread; `None` if it has not finished after a minute (a hang).
fn commit_or_hang(o: Outputs) -> Option<Result<Vec<PathBuf>, String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(o.commit().map_err(|e| e.to_string()));
    });
    rx.recv_timeout(Duration::from_secs(60)).ok()
}

#[test]
fn an_output_named_like_a_backup_gets_its_own_content() {
    let d = scratch();
    let dir = d.path();
    fs::write(dir.join("a"), "old a").unwrap();
    fs::write(dir.join("0.old"), "old 0.old").unwrap();
    let mut o = Outputs::new();
    write_text(&mut o, &dir.join("a"), "new a").unwrap();
    write_text(&mut o, &dir.join("0.old"), "new 0.old").unwrap();
    write_text(&mut o, &dir.join("1.old"), "new 1.old").unwrap();
    o.commit().unwrap();
    assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "new a");
    assert_eq!(fs::read_to_string(dir.join("0.old")).unwrap(), "new 0.old");
    assert_eq!(fs::read_to_string(dir.join("1.old")).unwrap(), "new 1.old");
    assert_eq!(names(dir), ["0.old", "1.old", "a"]);
}

#[test]
fn one_directory_spelled_three_ways_is_locked_once() {
    let d = scratch();
    let out = d.path().join("out");
    fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&out, d.path().join("via-link")).unwrap();
    let mut o = Outputs::new();
    write_text(&mut o, &out.join("x"), "x").unwrap();
    write_text(&mut o, &out.join(".").join("t.json"), "t").unwrap();
    write_text(&mut o, &d.path().join("via-link").join("u"), "u").unwrap();
    let done = commit_or_hang(o).expect("the commit waits for its own lock");
    done.unwrap();
    assert_eq!(names(&out), ["t.json", "u", "x"]);
}

#[test]
fn a_name_given_twice_under_two_spellings_is_an_error() {
    let d = scratch();
    let mut o = Outputs::new();
    write_text(&mut o, &d.path().join("x"), "1").unwrap();
    let twice = d.path().join(".").join("x");
    let e = write_text(&mut o, &twice, "2").unwrap_err();
    assert!(e.to_string().contains("it is given twice"), "{e}");
}

#[test]
fn twenty_thousand_sinks_are_staged_and_committed() {
    // On a tmpfs when there is one: 40k fsyncs on a disk take minutes, and the point is the
    // number of files, not the disk.
    let shm = Path::new("/dev/shm");
    let d = match shm.is_dir() {
        true => tempfile::tempdir_in(shm).unwrap(),
        false => scratch(),
    };
    let out = d.path().join("out");
    let n = 20_000;
    let tensors: Vec<Tensor> = (0..n)
        .map(|k| Tensor::new(vec![1], Data::I32(vec![k as i32])).unwrap())
        .collect();
    let names_: Vec<String> = (0..n).map(|k| format!("s{k}")).collect();
    let items: Vec<(&str, &Tensor)> = names_.iter().map(String::as_str).zip(&tensors).collect();
    // Twice: the second commit replaces every file (backups, renames).
    for _ in 0..2 {
        let paths = output::write_all_atomic(&out, &items).unwrap();
        assert_eq!(paths.len(), n);
    }
    assert_eq!(fs::read_dir(&out).unwrap().count(), n, "no staging left");
    for k in [0, 1, 9_999, 19_999] {
        let t = npy::read(&out.join(format!("s{k}.npy"))).unwrap();
        assert_eq!(t.data, Data::I32(vec![k]));
    }
}

#[test]
fn a_replaced_output_keeps_its_mode() {
    let d = scratch();
    let t = Tensor::new(vec![1], Data::F32(vec![1.0])).unwrap();
    let out = d.path();
    output::write_all_atomic(out, &[("y", &t)]).unwrap();
    let y = out.join("y.npy");
    fs::set_permissions(&y, fs::Permissions::from_mode(0o600)).unwrap();
    output::write_all_atomic(out, &[("y", &t)]).unwrap();
    let mode = fs::metadata(&y).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn stale_staging_of_dead_processes_is_swept_and_live_staging_kept() {
    let d = scratch();
    let dir = d.path();
    // A PID above the kernel's maximum (4194304) is never a live process.
    let dead = dir.join(".tapc-4999999-0");
    fs::create_dir_all(dead.join("n")).unwrap();
    fs::write(dead.join("n").join("big.npy"), vec![0u8; 4096]).unwrap();
    // A staging directory whose owner holds its lock (here: this test) is live.
    let held = dir.join(".tapc-4999998-1");
    fs::create_dir(&held).unwrap();
    let _lock = paths::lock_dir_nofollow(&held, libc::LOCK_SH).unwrap();
    let t = Tensor::new(vec![1], Data::F32(vec![1.0])).unwrap();
    output::write_all_atomic(dir, &[("y", &t)]).unwrap();
    assert_eq!(names(dir), [".tapc-4999998-1", "y.npy"]);
}

#[test]
fn staging_names_are_unpredictable() {
    let a = paths::staging_name();
    let b = paths::staging_name();
    assert_ne!(a, b);
    let prefix = format!(".tapc-{}-", std::process::id());
    let rand = a.strip_prefix(&prefix).unwrap();
    assert_eq!(rand.len(), 16, "{a}");
    assert!(rand.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
}

#[test]
fn a_symlink_at_a_sink_is_replaced_and_at_a_named_path_written_through() {
    let d = scratch();
    let dir = d.path();
    fs::write(dir.join("victim"), "keep").unwrap();
    std::os::unix::fs::symlink("victim", dir.join("y.npy")).unwrap();
    let t = Tensor::new(vec![1], Data::F32(vec![1.0])).unwrap();
    output::write_all_atomic(dir, &[("y", &t)]).unwrap();
    assert_eq!(fs::read_to_string(dir.join("victim")).unwrap(), "keep");
    assert!(fs::symlink_metadata(dir.join("y.npy")).unwrap().is_file());

    fs::create_dir(dir.join("real")).unwrap();
    fs::write(dir.join("real").join("t.json"), "old").unwrap();
    std::os::unix::fs::symlink("real/t.json", dir.join("t.json")).unwrap();
    let mut o = Outputs::new();
    write_text(&mut o, &dir.join("t.json"), "new").unwrap();
    o.commit().unwrap();
    let link = fs::symlink_metadata(dir.join("t.json")).unwrap();
    assert!(link.file_type().is_symlink());
    assert_eq!(
        fs::read_to_string(dir.join("real").join("t.json")).unwrap(),
        "new"
    );
    assert!(!names(&dir.join("real"))
        .iter()
        .any(|n| n.starts_with(".tapc")));
}

#[test]
fn a_symlink_to_nothing_directories_and_sockets_are_refused() {
    let d = scratch();
    let dir = d.path();
    std::os::unix::fs::symlink("missing", dir.join("dangling")).unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
    fs::create_dir(dir.join("sub")).unwrap();
    for (name, why) in [
        ("dangling", "a symbolic link to nothing"),
        ("sock", "it is a socket"),
        ("sub", "found a directory"),
    ] {
        let mut o = Outputs::new();
        let e = write_text(&mut o, &dir.join(name), "x").unwrap_err();
        assert!(e.to_string().contains(why), "{name}: {e}");
    }
    assert!(!dir.join("missing").exists());
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn two_fifos_of_one_name_are_both_written_in_place() {
    let d = scratch();
    let mut readers = Vec::new();
    for sub in ["a", "b"] {
        fs::create_dir(d.path().join(sub)).unwrap();
        let f = d.path().join(sub).join("f");
        mkfifo(&f);
        // Read and write: opening never waits, and it is a reader for the commit.
        readers.push(
            fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&f)
                .unwrap(),
        );
    }
    let mut o = Outputs::new();
    write_text(&mut o, &d.path().join("a/f"), "to a").unwrap();
    write_text(&mut o, &d.path().join("b/f"), "to b").unwrap();
    o.commit().unwrap();
    for (r, want) in readers.iter_mut().zip(["to a", "to b"]) {
        let mut got = [0u8; 4];
        r.read_exact(&mut got).unwrap();
        assert_eq!(&got, want.as_bytes());
    }
}

#[test]
fn a_fifo_is_written_in_place_and_one_nobody_reads_is_an_error() {
    let d = scratch();
    let fifo = d.path().join("fifo");
    mkfifo(&fifo);
    let mut o = Outputs::new();
    write_text(&mut o, &fifo, "nobody").unwrap();
    let e = o.commit().unwrap_err();
    assert!(e.to_string().contains("a FIFO that nobody reads"), "{e}");

    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        fs::File::open(reader_path)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        s
    });
    // The reader may not have opened it yet: retry until it has (ENXIO means no reader).
    loop {
        let mut again = Outputs::new();
        write_text(&mut again, &fifo, "through the fifo").unwrap();
        match again.commit() {
            Ok(_) => break,
            Err(e) if e.to_string().contains("nobody reads") => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(reader.join().unwrap(), "through the fifo");
    let ft = fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&ft));
}

#[test]
fn an_output_that_is_an_input_is_refused_before_anything_is_written() {
    let d = scratch();
    let dir = d.path();
    let t = Tensor::new(vec![1], Data::F32(vec![1.0])).unwrap();
    npy::write(&dir.join("x.npy"), &t).unwrap();
    let before = fs::read(dir.join("x.npy")).unwrap();
    fs::hard_link(dir.join("x.npy"), dir.join("y.npy")).unwrap();
    let two = Tensor::new(vec![1], Data::F32(vec![2.0])).unwrap();
    for sink in ["x", "y"] {
        let e = output::write_sinks(dir, &[(sink, &two)], &[dir.join("x.npy")]).unwrap_err();
        assert!(e.to_string().contains("it is the input"), "{e}");
    }
    assert_eq!(fs::read(dir.join("x.npy")).unwrap(), before);
    assert_eq!(names(dir), ["x.npy", "y.npy"]);
}

#[test]
fn an_edit_keeps_hard_links_and_a_symlink() {
    let d = scratch();
    let dir = d.path();
    fs::write(dir.join("f"), "old").unwrap();
    fs::hard_link(dir.join("f"), dir.join("g")).unwrap();
    std::os::unix::fs::symlink("f", dir.join("l")).unwrap();
    let mut o = Outputs::new();
    o.write_as(&dir.join("l"), Origin::Edit, |w| w.write_all(b"new"))
        .unwrap();
    o.commit().unwrap();
    assert_eq!(fs::read_to_string(dir.join("g")).unwrap(), "new");
    assert!(fs::symlink_metadata(dir.join("l"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(names(dir), ["f", "g", "l"]);
}

#[test]
fn paths_are_bytes_in_arguments_and_escaped_in_messages() {
    let bad = OsStr::from_bytes(b"in\xff.npy");
    assert_eq!(shown(bad).to_string(), "in\\xff.npy");
    let mut value = OsString::from("x=");
    value.push(bad);
    let args = [
        OsString::from("--input"),
        value,
        OsString::from("--out-dir"),
        OsStr::from_bytes(b"keep\xff").to_os_string(),
        OsStr::from_bytes(b"--trace=t\xfe.json").to_os_string(),
    ];
    let a = cli::parse("prog", &args).unwrap().unwrap();
    assert_eq!(a.inputs.named, vec![("x".to_string(), PathBuf::from(bad))]);
    assert_eq!(a.out_dir.as_os_str().as_bytes(), b"keep\xff");
    assert_eq!(
        a.trace.unwrap().as_os_str().as_bytes(),
        b"t\xfe.json".as_slice()
    );
    let e = cli::parse("prog", &[OsStr::from_bytes(b"--threads=\xff")]).unwrap_err();
    assert!(e.contains("`--threads \\xff` must be a number"), "{e}");
}
