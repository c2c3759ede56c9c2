//! The executor on hand-built plans whose kernels are Rust functions: a chain of two tasks
//! split into chunks over 1 to 3 threads, with a strided sink, timing and a trace; inputs of
//! the wrong type; and failures. A task that panics or whose kernel reports failure stops
//! the run of a compiled program (`program::run_program`, the same code `main` runs): the
//! message names the task and the index range it was running, the exit code is 1, and no
//! output file is written, with one worker thread or several (the other workers stop instead
//! of waiting forever).

mod common;
use common::{double, source_then_scratch, whole};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tapc_runtime::cli::{self, Outcome};
use tapc_runtime::exec::{
    execute, execute_owned, Borrowed, Input, KernelFn, Options, Owned, SinkData, SourceBuf,
};
use tapc_runtime::memory;
use tapc_runtime::plan::{Plan, Sink, Source, Task, View};
use tapc_runtime::program::run_program;
use tapc_runtime::{npy, DType, Data, Tensor};

const N: usize = 4096;
/// The element whose chunk the bad kernels fail on.
const BAD: i64 = 3000;

/// Like `double`, but panics in the chunk that holds element `BAD`.
unsafe extern "C-unwind" fn double_or_panic(bases: *const *mut u8, range: *const i64) -> i32 {
    let (lo, hi) = (*range, *range.add(1));
    if (lo..hi).contains(&BAD) {
        panic!("element {BAD} is cursed");
    }
    double(bases, range)
}

/// Like `double`, but reports failure (status 1) in the chunk that holds element `BAD`.
unsafe extern "C-unwind" fn double_or_fail(bases: *const *mut u8, range: *const i64) -> i32 {
    let (lo, hi) = (*range, *range.add(1));
    if (lo..hi).contains(&BAD) {
        return 1;
    }
    double(bases, range)
}

/// `%h = double(%x)` (task "apply @double -> %h", kernel 0), then `%y = twice(%h)` (task
/// "apply @twice -> %y", kernel 1), both split into chunks over their one dimension; the
/// sink `@y` is every other element of `%y`, reversed: `y[k] = 4 * x[n - 1 - 2k]`.
fn plan_of(n: usize) -> Plan {
    let bytes = 4 * n as u64;
    let task = |k: u32, name: &str| Task {
        name: name.into(),
        kernel: k,
        args: vec![whole(k, bytes), whole(k + 1, bytes)],
        range: vec![(0, n as i64)],
        split: Some(0),
        align: 16,
        work: 1e9,
        deps: if k == 0 { vec![] } else { vec![0] },
    };
    Plan {
        graph: "g".into(),
        buffers: source_then_scratch(bytes, 2),
        sources: vec![Source {
            name: "x".into(),
            dtype: DType::F32,
            shape: vec![n],
            buffer: 0,
            window: None,
        }],
        tasks: vec![
            task(0, "apply @double -> %h"),
            task(1, "apply @twice -> %y"),
        ],
        sinks: vec![Sink {
            name: "y".into(),
            dtype: DType::F32,
            shape: vec![n / 2],
            view: View {
                buffer: 2,
                offset: (n - 1) as i64,
                strides: vec![-2],
            },
            deps: vec![1],
            blocks: None,
        }],
        dist: Default::default(),
        states: vec![],
    }
}

fn plan() -> Plan {
    plan_of(N)
}

#[test]
fn runs_a_chain_split_over_threads() {
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    for threads in [1, 2, 3] {
        let input = Tensor::new(vec![n], Data::F32(x.clone())).unwrap();
        let opts = Options {
            threads,
            record: true,
        };
        let (sinks, rep) = execute(&plan_of(n), &[double, double], &[&input], &opts).unwrap();
        let Data::F32(y) = &sinks[0].1.data else {
            panic!("f32 sink")
        };
        assert_eq!(y.len(), n / 2);
        for (k, &v) in y.iter().enumerate() {
            assert_eq!(v, 4.0 * x[n - 1 - 2 * k]);
        }
        // Source and %h, or %h and %y, are live at once; never all three.
        assert!(rep.peak_bytes >= 8 * n as u64 && rep.peak_bytes <= 12 * n as u64);
        if threads > 1 {
            assert!(rep.events.len() > 2, "{} jobs", rep.events.len());
        }
        assert!(rep.time_summary().contains("apply @twice -> %y"));
        assert!(rep.trace_json().contains("\"ph\":\"X\""));
    }
}

#[test]
fn wrong_inputs_are_errors() {
    let input = Tensor::new(vec![3], Data::F32(vec![0.0; 3])).unwrap();
    let e = execute(
        &plan_of(8),
        &[double, double],
        &[&input],
        &Options::default(),
    )
    .unwrap_err();
    assert!(e.contains("expected f32[8], found f32[3]"), "{e}");
}

/// A fresh directory with the input `x.npy`; returns it and the (not yet existing) output
/// directory inside it.
fn setup(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("tapc-task-failures-{name}-"))
        .tempdir()
        .unwrap();
    let x = Tensor::new(vec![N], Data::F32((0..N).map(|i| i as f32).collect())).unwrap();
    npy::write(&dir.path().join("x.npy"), &x).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    (dir, out)
}

fn run(dir: &Path, out: &Path, threads: usize, bad: KernelFn) -> Outcome {
    let args: Vec<String> = vec![
        "--input".into(),
        format!("x={}", dir.join("x.npy").display()),
        "--out-dir".into(),
        out.display().to_string(),
        "--threads".into(),
        threads.to_string(),
    ];
    let args = cli::parse("prog", &args).unwrap().expect("not --help");
    run_program("prog", &args, &plan(), &[double, bad])
}

fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The `[lo:hi]` chunk range in `msg` after "index range [".
fn reported_range(msg: &str) -> (i64, i64) {
    let at = msg.find("(index range [").expect("a range") + "(index range [".len();
    let rest = &msg[at..];
    let (lo, rest) = rest.split_once(':').unwrap();
    let hi = &rest[..rest.find(']').unwrap()];
    (lo.parse().unwrap(), hi.parse().unwrap())
}

#[test]
fn the_same_plan_with_good_kernels_writes_its_sink() {
    // The control for the tests below: only the bad kernel makes them fail.
    let (dir, out) = setup("ok");
    let o = run(dir.path(), &out, 2, double);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(files_in(&out), vec!["y.npy".to_string()]);
    let y = npy::read(&out.join("y.npy")).unwrap();
    let Data::F32(v) = y.data else {
        panic!("f32 sink")
    };
    assert_eq!(v.len(), N / 2);
    for (k, &v) in v.iter().enumerate() {
        assert_eq!(v, 4.0 * (N - 1 - 2 * k) as f32);
    }
}

#[test]
fn a_panicking_task_is_named_with_its_range_and_writes_nothing() {
    for threads in [1, 2, 3] {
        let (dir, out) = setup(&format!("panic{threads}"));
        let o = run(dir.path(), &out, threads, double_or_panic);
        assert_eq!(o.code, 1, "{threads} threads: {}", o.stderr);
        assert!(
            o.stderr
                .starts_with("prog: error: task `apply @twice -> %y` (index range ["),
            "{}",
            o.stderr
        );
        assert!(
            o.stderr.contains("panicked: element 3000 is cursed"),
            "{}",
            o.stderr
        );
        let (lo, hi) = reported_range(&o.stderr);
        assert!(lo <= BAD && BAD < hi, "{}", o.stderr);
        if threads > 1 {
            // Split into chunks: the message names the chunk, not the whole task.
            assert!(hi - lo < N as i64, "{}", o.stderr);
        }
        assert!(o.stdout.is_empty(), "{}", o.stdout);
        assert!(files_in(&out).is_empty(), "left: {:?}", files_in(&out));
    }
}

#[test]
fn a_failing_kernel_is_named_with_its_range_and_writes_nothing() {
    for threads in [1, 2] {
        let (dir, out) = setup(&format!("fail{threads}"));
        let o = run(dir.path(), &out, threads, double_or_fail);
        assert_eq!(o.code, 1, "{}", o.stderr);
        assert!(
            o.stderr
                .contains("task `apply @twice -> %y` (index range [")
                && o.stderr
                    .contains("failed: could not allocate its temporaries"),
            "{}",
            o.stderr
        );
        let (lo, hi) = reported_range(&o.stderr);
        assert!(lo <= BAD && BAD < hi, "{}", o.stderr);
        assert!(files_in(&out).is_empty(), "left: {:?}", files_in(&out));
    }
}

#[test]
fn a_borrowed_input_is_read_in_place() {
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let shape = [n];
    // SAFETY: `x` holds n f32s and is not written during the run.
    let b = unsafe { Borrowed::new(x.as_ptr().cast(), DType::F32, &shape) };
    let plan = plan_of(n);
    let (sinks, rep) = execute_owned(
        &plan,
        &[double, double],
        &[Input::Borrowed(b)],
        &Options::default(),
    )
    .unwrap();
    assert_eq!(rep.source_addrs, vec![x.as_ptr() as usize]);
    let [SinkData::Copy(t)] = &sinks[..] else {
        panic!("a strided sink is copied")
    };
    assert_eq!(
        t.data,
        Data::F32((0..n / 2).map(|k| 4.0 * x[n - 1 - 2 * k]).collect())
    );
}

/// A rank reads its source windows straight into a [`SourceBuf`] and hands it over
/// (`Input::Owned`): the run uses that buffer as the source's (its address), takes it (the
/// slot is empty after), and counts it once: the run's allocation peak is the plan's
/// (`memory::peak`), with no copy of the input beside it. Before, a rank held each input
/// twice: the tensor as read and its copy in the run's buffer.
#[test]
fn an_owned_input_is_the_sources_buffer_and_counted_once() {
    let n = 1000;
    let mut buf = SourceBuf::zeroed(4 * n as u64).unwrap();
    for (k, c) in buf.bytes_mut().chunks_exact_mut(4).enumerate() {
        c.copy_from_slice(&(k as f32).to_le_bytes());
    }
    let addr = buf.bytes_mut().as_ptr() as usize;
    let slot = Mutex::new(Some(buf));
    let shape = [n];
    let input = Input::Owned(Owned {
        buf: &slot,
        dtype: DType::F32,
        shape: &shape,
    });
    let plan = plan_of(n);
    let (sinks, rep) =
        execute_owned(&plan, &[double, double], &[input], &Options::default()).unwrap();
    assert_eq!(rep.source_addrs, vec![addr]);
    assert!(slot.lock().unwrap().is_none(), "the run took the buffer");
    assert_eq!(rep.peak_bytes, memory::peak(&plan).0);
    let [SinkData::Copy(t)] = &sinks[..] else {
        panic!("a strided sink is copied")
    };
    let want = (0..n / 2).map(|k| 4.0 * (n - 1 - 2 * k) as f32).collect();
    assert_eq!(t.data, Data::F32(want));
    // Handed over once: a second run has no buffer to take.
    let again = execute_owned(&plan, &[double, double], &[input], &Options::default());
    assert!(again.is_err());
}

#[test]
fn a_whole_buffer_sink_is_handed_over_and_others_copied() {
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let input = Tensor::new(vec![n], Data::F32(x.clone())).unwrap();
    let mut plan = plan_of(n);
    plan.sinks[0].view = View {
        buffer: 2,
        offset: 0,
        strides: vec![1],
    };
    plan.sinks[0].shape = vec![n];
    let opts = Options::default();
    let (sinks, _) =
        execute_owned(&plan, &[double, double], &[Input::Tensor(&input)], &opts).unwrap();
    let [SinkData::Buffer(b)] = &sinks[..] else {
        panic!("the sink is all of its buffer")
    };
    assert_eq!(b.len(), 4 * n);
    assert_eq!(b.as_ptr() as usize % 64, 0);
    // SAFETY: the buffer holds the sink's n f32s and is ours now.
    let y = unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<f32>(), n) };
    assert!(y.iter().zip(&x).all(|(&y, &x)| y == 4.0 * x));
    // A second sink in the same buffer: neither takes it.
    let mut shared = plan.clone();
    shared.sinks.push(Sink {
        name: "y2".into(),
        ..plan.sinks[0].clone()
    });
    let (sinks, _) =
        execute_owned(&shared, &[double, double], &[Input::Tensor(&input)], &opts).unwrap();
    assert!(matches!(&sinks[..], [SinkData::Copy(a), SinkData::Copy(b)] if a.data == b.data));
}
