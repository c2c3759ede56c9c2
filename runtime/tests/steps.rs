//! Steps of a compiled program (`--steps N`, `--log-every K`; docs/teg.md §8) on a hand-built
//! plan whose kernel is a Rust function: state `@x` doubled each step (`update @x`), a scalar
//! sink logged; a distributed plan run in one process runs its steps; a plan's state section
//! round-trips and is validated; and the step helpers every front end shares.

mod common;
use common::{double, source_then_scratch, whole};
use std::collections::HashMap;
use tapc_runtime::cli::{self, Outcome};
use tapc_runtime::plan::{Plan, Sink, Source, Task, View};
use tapc_runtime::program::run_program_logging;
use tapc_runtime::steps::{parse_count, run_named, scalar_text, LogTo, StepLog, Steps};
use tapc_runtime::{npy, DType, Data, Tensor};

const N: usize = 4;

/// `%x = state @x : f32[4]`, `%h = apply @double(%x)`, `update @x %h`, `sink @first` (h[0],
/// one element) and `sink @h %h`.
fn plan() -> Plan {
    let bytes = 4 * N as u64;
    let sink = |name: &str, shape: Vec<usize>, strides: Vec<i64>| Sink {
        name: name.into(),
        dtype: DType::F32,
        shape,
        view: View {
            buffer: 1,
            offset: 0,
            strides,
        },
        deps: vec![0],
        blocks: None,
    };
    Plan {
        graph: "g".into(),
        buffers: source_then_scratch(bytes, 1),
        sources: vec![Source {
            name: "x".into(),
            dtype: DType::F32,
            shape: vec![N],
            buffer: 0,
            window: None,
        }],
        tasks: vec![Task {
            name: "apply @double -> %h".into(),
            kernel: 0,
            args: vec![whole(0, bytes), whole(1, bytes)],
            range: vec![(0, N as i64)],
            split: None,
            align: 1,
            work: 4.0,
            deps: vec![],
        }],
        sinks: vec![
            sink("x", vec![N], vec![1]),
            sink("first", vec![], vec![]),
            sink("h", vec![N], vec![1]),
        ],
        dist: Default::default(),
        states: vec![(0, 0)],
    }
}

/// Runs `plan` with `x = [1, 2, 3, 4]` and `extra` arguments; the outcome and the out dir.
fn run(plan: &Plan, extra: &[&str]) -> (Outcome, tempfile::TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("tapc-steps-")
        .tempdir()
        .unwrap();
    let x = Tensor::new(vec![N], Data::F32(vec![1.0, 2.0, 3.0, 4.0])).unwrap();
    npy::write(&dir.path().join("x.npy"), &x).unwrap();
    let out = dir.path().join("out");
    let mut args = vec![
        "--input".to_string(),
        format!("x={}", dir.path().join("x.npy").display()),
        "--out-dir".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args = cli::parse("prog", &args).unwrap().expect("not --help");
    let outcome = run_program_logging("prog", &args, plan, &[double], LogTo::Kept);
    (outcome, dir)
}

fn f32s(path: &std::path::Path) -> Vec<f32> {
    match npy::read(path).unwrap().data {
        Data::F32(v) => v,
        d => panic!("{d:?}"),
    }
}

#[test]
fn each_step_takes_the_update_of_the_step_before() {
    let (o, dir) = run(&plan(), &["--steps", "3", "--log-every", "1"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let out = dir.path().join("out");
    // Three doublings of [1, 2, 3, 4]; `h` is the last step's, equal to the final state.
    assert_eq!(f32s(&out.join("x.npy")), [8.0, 16.0, 24.0, 32.0]);
    assert_eq!(f32s(&out.join("h.npy")), [8.0, 16.0, 24.0, 32.0]);
    assert_eq!(f32s(&out.join("first.npy")), [8.0]);
    let log: Vec<&str> = o.stdout.lines().take(3).collect();
    assert_eq!(log, ["1,first,2", "2,first,4", "3,first,8"], "{}", o.stdout);
    assert!(
        o.stdout
            .lines()
            .nth(3)
            .unwrap()
            .starts_with("@x: f32[4] -> "),
        "{}",
        o.stdout
    );
    // The input was read once and never written.
    assert_eq!(f32s(&dir.path().join("x.npy")), [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn one_step_is_the_default_and_logs_only_multiples_of_k() {
    let (o, dir) = run(&plan(), &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(f32s(&dir.path().join("out/x.npy")), [2.0, 4.0, 6.0, 8.0]);
    assert!(o.stdout.starts_with("@x"), "{}", o.stdout);
    let (o, _) = run(&plan(), &["--steps=5", "--log-every=2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let log: Vec<&str> = o.stdout.lines().filter(|l| !l.starts_with('@')).collect();
    assert_eq!(log, ["2,first,4", "4,first,16"], "{}", o.stdout);
}

#[test]
fn a_distributed_plan_in_one_process_runs_its_steps() {
    // Before, a plan with a distributed section refused `--steps` (issue 19 lifted it: a rank
    // keeps its state between steps, `tests/runtime/mpi_train.rs`); run whole, it doubles twice.
    let mut p = plan();
    p.dist.nodes = vec![0];
    let (o, dir) = run(&p, &["--steps", "2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(f32s(&dir.path().join("out/x.npy")), [4.0, 8.0, 12.0, 16.0]);
}

#[test]
fn the_state_section_round_trips_and_is_validated() {
    let p = plan();
    assert_eq!(Plan::decode(&p.encode()).unwrap(), p);
    p.validate(1).unwrap();
    for (states, what) in [
        (vec![(0, 1)], "is not one source and its update"),
        (vec![(0, 0), (0, 2)], "is not one source and its update"),
        (vec![(0, 7)], "names source 0 and sink 7"),
        (vec![(3, 0)], "names source 3 and sink 0"),
    ] {
        let q = Plan {
            states: states.clone(),
            ..plan()
        };
        let e = q.validate(1).unwrap_err();
        assert!(e.contains(what), "{states:?}: {e}");
    }
}

#[test]
fn step_helpers() {
    assert_eq!(parse_count("--steps", "7"), Ok(7));
    assert!(parse_count("--steps", "0")
        .unwrap_err()
        .contains("at least once"));
    assert!(parse_count("--log-every", "-1")
        .unwrap_err()
        .contains("positive integer"));
    let t = |d: Data| Tensor::new(vec![], d).unwrap();
    assert_eq!(
        scalar_text(&t(Data::F32(vec![0.1]))).as_deref(),
        Some("0.1")
    );
    assert_eq!(scalar_text(&t(Data::I64(vec![-3]))).as_deref(), Some("-3"));
    let two = Tensor::new(vec![2], Data::F32(vec![1.0, 2.0])).unwrap();
    assert_eq!(scalar_text(&two), None);
    // run_named: a counter state; the update `n` is not logged, the sink `m` is.
    let steps = Steps {
        count: 4,
        log_every: Some(2),
    };
    let mut inputs = HashMap::from([("n".to_string(), t(Data::I64(vec![0])))]);
    let mut log = StepLog::new(&steps, LogTo::Kept);
    let sinks = run_named(
        &steps,
        &mut inputs,
        &["n".to_string()],
        |ins| -> Result<_, ()> {
            let Data::I64(v) = &ins["n"].data else {
                unreachable!()
            };
            let next = t(Data::I64(vec![v[0] + 1]));
            let m = t(Data::I64(vec![10 * v[0]]));
            Ok(vec![("n".to_string(), next), ("m".to_string(), m)])
        },
        &mut log,
    )
    .unwrap();
    assert_eq!(log.finish(), "2,m,10\n4,m,30\n");
    assert_eq!(sinks[0].1.data, Data::I64(vec![4]));
}
