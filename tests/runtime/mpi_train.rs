//! Training under `mpirun` (issue 19): `--steps N` and `--log-every K` run an `--mpi` program's
//! N steps with its state kept on the ranks that hold it (docs/mpi.md, *State and steps*).
//! Before, an `--mpi` program refused both flags.
//!
//! - `examples/sgd_momentum.teg` sharded `shard{parts=2,nodes=2}` over 2 ranks (shared memory
//!   and TCP), 50 steps logged every step: the same CSV lines and the same files, bit for bit,
//!   as the single-process program of the same plan, the losses numpy computes
//!   (`tests/data/train/expected_sgd_loss.npy`) within the f64 contract, and the bytes moved
//!   per step (the gradient sent to the update's replica on rank 1, the residual's half sent
//!   to rank 0) the cost model's prediction for the plan. The same for `examples/train_mlp.teg`
//!   (`grad` and AdamW: weights, moments and the step count as state) for 20 steps over shared
//!   memory (270,880 B per step).
//! - Data-parallel training of a linear regression (a test graph with its gradients written
//!   out), the batch sharded `shard{parts=2,dim=i,nodes=2}` over 2 ranks for 20 steps: the
//!   weight gradients combine through one `MPI_Iallreduce` each and the loss through an
//!   `MPI_Ireduce`, nothing else moves (no weight, no activation), the bytes moved per step
//!   are those collectives' (docs/mpi.md, *Bytes, by convention*) and the cost model's
//!   prediction for the plan (before the model knew that an update runs on every node that
//!   reads its state, it predicted 72 B: the reduces without the allreduces' second halves),
//!   and the losses of every step equal the single-process program's
//!   of the same plan bit for bit (two partials add the same in either order) and the unsharded
//!   program's within the f32 contract (the batch sum is split in two).
//! - Data-parallel training of `examples/train_mlp.teg` as written (`grad` and AdamW), the
//!   batch sharded along `i` over 2 ranks: only the gradients' allreduces, the loss's reduce
//!   and the step count move, as the cost model predicts.
//! - The same on 1 rank, on 3 (one idle) and with `--gather-sinks`.
//! - With `--inputs-on-root`, a run of several steps of a graph with state is refused before
//!   anything is read, with one message, and writes nothing.

use crate::common;
use crate::mpi::{bytes_moved, compile, cost_report, files, measured_bytes, root, scratch};
use common::mpi::{mpirun, Btl};
use std::path::Path;
use std::process::Command;
use tapc_runtime::{Data, Tensor};

/// `--input-dir INPUTS --out-dir OUT` and `extra`.
fn args(inputs: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        "--input-dir".to_string(),
        inputs.display().to_string(),
        "--out-dir".to_string(),
        out.display().to_string(),
        "--threads".to_string(),
        "1".to_string(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// The `step,name,value` lines of a run's stdout.
fn csv(stdout: &[u8]) -> Vec<String> {
    (String::from_utf8_lossy(stdout).lines())
        .filter(|l| !l.starts_with('@'))
        .map(String::from)
        .collect()
}

/// The values of the `STEP,loss,VALUE` lines.
fn losses(lines: &[String]) -> Vec<f64> {
    (lines.iter())
        .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
        .collect()
}

/// Runs the single-process program `prog` with `args`; returns its CSV lines.
fn single(prog: &Path, args: &[String]) -> Vec<String> {
    let o = Command::new(prog).args(args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    csv(&o.stdout)
}

/// Runs `steps` steps of graph `graph` of `file` after `passes` on `data`, logged every `k`,
/// as one process and on 2 ranks over each of `btls`: the same log lines and files, bit for
/// bit, and the bytes moved per step the cost model's prediction. Returns the log lines.
fn matches_single_process(
    name: &str,
    (file, graph, passes, data): (&Path, &str, &str, &Path),
    (steps, k): (u64, u64),
    btls: &[Btl],
) -> Vec<String> {
    let dir = scratch(&format!("train-{name}"));
    let (prog, one) = (dir.join(name), dir.join(format!("{name}1")));
    compile(file, graph, passes, &prog, true);
    compile(file, graph, passes, &one, false);
    let (steps, k) = (steps.to_string(), k.to_string());
    let flags = ["--steps", &steps, "--log-every", &k];
    let want_dir = dir.join("want");
    let want = single(&one, &args(data, &want_dir, &flags));
    for &btl in btls {
        let out = dir.join(format!("out-{btl:?}"));
        let run = args(data, &out, &[&flags[..], &["--time"]].concat());
        let o = mpirun(2, btl, &prog, &run);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}, {btl:?}: {err}");
        assert_eq!(csv(&o.stdout), want, "{name}, {btl:?}: the log lines");
        assert_eq!(
            files(&out),
            files(&want_dir),
            "{name}, {btl:?}: the outputs"
        );
        let per_step = per_step_bytes(&err);
        assert_eq!(
            per_step * steps.parse::<u64>().unwrap(),
            measured_bytes(&err)
        );
        let model = predicted(file, passes);
        assert_eq!(
            per_step, model,
            "{name}, {btl:?}: the model's bytes per step"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    want
}

#[test]
fn state_stays_on_its_ranks_over_steps_and_the_log_is_the_single_process_one() {
    let data = root().join("tests/data/train");
    let file = root().join("examples/sgd_momentum.teg");
    let passes = "canonicalize,shard{parts=2,nodes=2}";
    let sgd = (file.as_path(), "train", passes, data.as_path());
    let btls = [Btl::SharedMemory, Btl::Tcp];
    let want = matches_single_process("sgd", sgd, (50, 1), &btls);
    assert_eq!(want.len(), 50, "one loss per step: {want:?}");
    let numpy = tapc_runtime::npy::read(&data.join("expected_sgd_loss.npy")).unwrap();
    let got = Tensor::new(vec![50], Data::F64(losses(&want))).unwrap();
    assert_eq!(common::tolerance::first_mismatch(&numpy, &got), None);
    // The MLP of `grad` and AdamW: weights, both moments and the step count as state.
    let file = root().join("examples/train_mlp.teg");
    let data = data.join("mlp/f32");
    let passes = "canonicalize,shard{parts=2,nodes=2},canonicalize";
    let mlp = (file.as_path(), "train_mlp", passes, data.as_path());
    let want = matches_single_process("mlp", mlp, (20, 5), &btls[..1]);
    assert_eq!(want.len(), 4, "{want:?}");
}

/// The same run of `examples/sgd_momentum.teg` (7 steps, logged every 2) on 1 rank (both
/// nodes and their replicas on one rank), on 3 (one idle) and on 2 with `--gather-sinks`: the
/// single process's log lines and files.
#[test]
fn steps_run_on_1_and_3_ranks_and_with_gathered_sinks() {
    let data = root().join("tests/data/train");
    let file = root().join("examples/sgd_momentum.teg");
    let dir = scratch("train-ranks");
    let passes = "canonicalize,shard{parts=2,nodes=2}";
    let (prog, one) = (dir.join("sgd"), dir.join("sgd1"));
    compile(&file, "train", passes, &prog, true);
    compile(&file, "train", passes, &one, false);
    let flags = ["--steps", "7", "--log-every", "2"];
    let want_dir = dir.join("want");
    let want = single(&one, &args(&data, &want_dir, &flags));
    assert_eq!(want.len(), 3, "{want:?}");
    for (np, extra) in [(1, &[][..]), (3, &[]), (2, &["--gather-sinks"])] {
        let out = dir.join(format!("out-{np}-{}", extra.len()));
        let o = mpirun(
            np,
            Btl::SharedMemory,
            &prog,
            &args(&data, &out, &[&flags[..], extra].concat()),
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{np} ranks {extra:?}: {err}");
        assert_eq!(csv(&o.stdout), want, "{np} ranks {extra:?}: the log lines");
        assert_eq!(
            files(&out),
            files(&want_dir),
            "{np} ranks {extra:?}: the outputs"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `bytes moved per step: N (S steps)` of a `--time` report.
fn per_step_bytes(stderr: &str) -> u64 {
    let line = (stderr.lines())
        .find_map(|l| l.strip_prefix("bytes moved per step: "))
        .unwrap_or_else(|| panic!("no bytes moved per step in:\n{stderr}"));
    line.split(' ').next().unwrap().parse().unwrap()
}

/// The cost model's bytes moved per step for the plan `passes` make of `file`, as placed (its
/// `unsharded:` line: the plan before any search move), sinks written where computed.
fn predicted(file: &Path, passes: &str) -> u64 {
    let cost = format!("{passes},cost{{nodes=2,sinks=distributed}}");
    let report = cost_report(file, &cost);
    (report.lines())
        .find(|l| l.trim_start().starts_with("unsharded: "))
        .map(bytes_moved)
        .unwrap_or_else(|| panic!("no prediction in:\n{report}"))
}

/// A linear regression trained by SGD, its gradients written out, the batch variable `i`.
const DATA_PARALLEL: &str =
    "op @residual(x: f32[B, K], w: f32[K], b: f32[], y: f32[B]) -> (r: f32[B]) {
  r[i] = sum[k](x[i, k] * w[k]) + b[] - y[i]
}
op @sse(r: f32[B], s: f32[]) -> (loss: f32[]) {
  loss[] = s[] * sum[i](r[i] * r[i])
}
op @grad_w(x: f32[B, K], r: f32[B], t: f32[]) -> (g: f32[K]) {
  g[k] = sum[i](t[] * r[i] * x[i, k])
}
op @grad_b(r: f32[B], t: f32[]) -> (g: f32[]) {
  g[] = sum[i](t[] * r[i])
}
op @sgd(w: f32[..S], g: f32[..S], lr: f32[]) -> (y: f32[..S]) {
  y[..j] = w[..j] - lr[] * g[..j]
}
graph @train {
  %x = source @x : f32[64, 16]
  %y = source @y : f32[64]
  %s = full 0.015625 : f32[]
  %t = full 0.03125 : f32[]
  %lr = full 0.05 : f32[]
  %w = state @w : f32[16]
  %b = state @b : f32[]
  %r = apply @residual(%x, %w, %b, %y)
  %loss = apply @sse(%r, %s)
  %gw = apply @grad_w(%x, %r, %t)
  %gb = apply @grad_b(%r, %t)
  %w2 = apply @sgd(%w, %gw, %lr)
  %b2 = apply @sgd(%b, %gb, %lr)
  update @w %w2
  update @b %b2
  sink @loss %loss
}
";

/// Inputs of [`DATA_PARALLEL`]: `y` a noisy linear function of `x`, the state zero.
fn write_regression(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = common::rng::Rng(19);
    let x: Vec<f32> = (0..64 * 16)
        .map(|_| rng.uniform(-1.0, 1.0) as f32)
        .collect();
    let y: Vec<f32> = (0..64)
        .map(|i| {
            (0..16)
                .map(|k| x[i * 16 + k] * (k as f32 - 7.5) / 8.0)
                .sum::<f32>()
                + 0.5
        })
        .collect();
    let put = |name: &str, shape: Vec<usize>, v: Vec<f32>| {
        let t = Tensor::new(shape, Data::F32(v)).unwrap();
        tapc_runtime::npy::write(&dir.join(format!("{name}.npy")), &t).unwrap();
    };
    put("x", vec![64, 16], x);
    put("y", vec![64], y);
    put("w", vec![16], vec![0.0; 16]);
    put("b", vec![], vec![0.0]);
}

/// A data-parallel plan's run: graph `graph` of `file` compiled after `passes` (`--mpi` and
/// single-process) and after `whole` (unsharded), 20 steps logged every step on `inputs`; the
/// 2-rank run's log lines and files must be the single process's. Returns the single
/// process's and the unsharded program's losses as f32 tensors and the 2-rank `--time` report.
fn data_parallel_run(
    dir: &Path,
    (file, graph, passes, whole): (&Path, &str, &str, &str),
    inputs: &Path,
) -> (Tensor, Tensor, String) {
    let (prog, one, unsplit) = (dir.join("dp"), dir.join("dp1"), dir.join("whole"));
    compile(file, graph, passes, &prog, true);
    compile(file, graph, passes, &one, false);
    compile(file, graph, whole, &unsplit, false);
    let flags = ["--steps", "20", "--log-every", "1"];
    let want_dir = dir.join("want");
    let want = single(&one, &args(inputs, &want_dir, &flags));
    let unsharded = single(&unsplit, &args(inputs, &dir.join("whole-out"), &flags));
    assert_eq!(want.len(), 20);
    let out = dir.join("out");
    let run = &[&flags[..], &["--time"]].concat();
    let o = mpirun(2, Btl::SharedMemory, &prog, &args(inputs, &out, run));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert_eq!(csv(&o.stdout), want, "the losses of every step");
    assert_eq!(files(&out), files(&want_dir), "the final state and loss");
    (f32s(losses(&want)), f32s(losses(&unsharded)), err)
}

/// `v` as an f32 tensor.
fn f32s(v: Vec<f64>) -> Tensor {
    let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    Tensor::new(vec![v.len()], Data::F32(v)).unwrap()
}

/// Checks a 20-step `--time` report `err`: the values sent or received (`  %NAME: sent ...`
/// lines) are among `combined`, and the bytes moved per step are `per_step`, the measured
/// total 20 times that, and the cost model's prediction for `passes` on `file` the same.
fn moves_only(err: &str, combined: &[&str], per_step: u64, (file, passes): (&Path, &str)) {
    let moved: Vec<&str> = (err.lines())
        .filter(|l| l.starts_with("  %") && l.contains(": sent "))
        .map(|l| l.trim_start().split(':').next().unwrap())
        .collect();
    assert!(!moved.is_empty(), "{err}");
    assert!(moved.iter().all(|v| combined.contains(v)), "{moved:?}");
    assert_eq!(per_step_bytes(err), per_step, "{err}");
    assert_eq!(measured_bytes(err), 20 * per_step);
    let model = predicted(file, passes);
    assert_eq!(model, per_step, "the cost model's bytes per step");
}

#[test]
fn data_parallel_training_on_2_ranks_moves_only_the_gradient_allreduce() {
    let dir = scratch("train-dp");
    let file = dir.join("dp.teg");
    std::fs::write(&file, DATA_PARALLEL).unwrap();
    let inputs = dir.join("in");
    write_regression(&inputs);
    let passes = "shard{parts=2,dim=i,nodes=2},canonicalize";
    let plans = (file.as_path(), "train", passes, "canonicalize");
    let (want, unsharded, err) = data_parallel_run(&dir, plans, &inputs);
    assert_eq!(
        common::tolerance::first_mismatch(&unsharded, &want),
        None,
        "the split batch sum against the whole one"
    );
    let l = common::f64s(&want);
    assert!(l[19] < l[0] / 4.0, "it trains: {} to {}", l[0], l[19]);
    let mpi: Vec<&str> = (err.lines())
        .filter(|l| l.starts_with("mpi: ") && !l.contains("rank(s), a plan"))
        .collect();
    assert_eq!(
        mpi,
        [
            "mpi: reduce of %loss.iacc1 (4 B, sum f32) to rank 0 from rank(s) 1",
            "mpi: allreduce of %gw.iacc1 (64 B, sum f32) over rank(s) 0, 1",
            "mpi: allreduce of %gb.iacc1 (4 B, sum f32) over rank(s) 0, 1",
        ],
        "{err}"
    );
    // Per rank, the values that moved: only the collectives' (no weight, no activation).
    let combined = ["%loss.iacc1", "%gw.iacc1", "%gb.iacc1"];
    // A reduce over 2 ranks moves n bytes, an allreduce 2n (docs/mpi.md).
    let convention = 4 + 2 * 64 + 2 * 4;
    moves_only(&err, &combined, convention, (&file, passes));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `examples/train_mlp.teg` as written (its gradients from `grad`, AdamW), its batch sharded
/// `shard{parts=2,dim=i,nodes=2}` over 2 ranks for 20 steps: `grad`'s ops have symbolic
/// signatures and keep the forward's batch variable, so the weight gradients split along the
/// batch like the forward and combine through one allreduce each, the loss through a reduce
/// (its mean's `B * N` kept whole in the epilogue); besides them only the step count moves
/// (no weight, no activation). The losses of every
/// step are the single-process program's of the same plan, bit for bit, within the f32
/// contract of the unsharded program's and of JAX's (`tests/data/train/gen_mlp.py`), and the
/// bytes moved per step are the collectives' and the cost model's prediction. Before, the
/// shard pass refused `grad`'s ops (E0106: concrete signatures), and a `mean` written as
/// `/ f32(B * N)` split along `i` gave a module that did not verify (E0105).
#[test]
fn data_parallel_mlp_from_grad_on_2_ranks_moves_only_the_gradient_allreduces() {
    let dir = scratch("train-dp-grad");
    let file = root().join("examples/train_mlp.teg");
    let inputs = root().join("tests/data/train/mlp/f32");
    let passes = "grad,canonicalize,shard{parts=2,dim=i,nodes=2},canonicalize";
    let plans = (file.as_path(), "train_mlp", passes, "grad,canonicalize");
    let (want, unsharded, err) = data_parallel_run(&dir, plans, &inputs);
    let tol = common::tolerance::first_mismatch;
    assert_eq!(
        tol(&unsharded, &want),
        None,
        "against the unsharded program"
    );
    let jax = tapc_runtime::npy::read(&inputs.join("expected_loss.npy")).unwrap();
    let jax20 = f32s(common::f64s(&jax)[..20].to_vec());
    assert_eq!(tol(&jax20, &want), None, "against JAX");
    // The collectives' values, and the step count `%t2` (a scalar computed on node 0, which
    // the update of `@t` on node 1 reads).
    let combined = [
        "%loss.iacc1",
        "%gw1.iacc1",
        "%gb1.iacc1",
        "%gw2.iacc1",
        "%gb2.iacc1",
        "%t2",
    ];
    // The step count sent to each of the four AdamW updates on node 1 (4 × 4 B: one message
    // per reading task), the loss reduced (4 B), the gradients allreduced (2n each: w1 16×64,
    // b1 64, w2 64×1, b2 1).
    let convention = 4 * 4 + 4 + 2 * 4 * (16 * 64 + 64 + 64 + 1);
    moves_only(&err, &combined, convention, (&file, passes));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn several_steps_with_inputs_on_root_are_refused_for_a_graph_with_state() {
    let file = root().join("examples/sgd_momentum.teg");
    let dir = scratch("train-root");
    let prog = dir.join("sgd");
    compile(
        &file,
        "train",
        "canonicalize,shard{parts=2,nodes=2}",
        &prog,
        true,
    );
    let out = dir.join("out");
    let data = root().join("tests/data/train");
    let run = args(&data, &out, &["--steps", "3", "--inputs-on-root"]);
    let o = mpirun(2, Btl::SharedMemory, &prog, &run);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    let reports = (err.lines())
        .filter(|l| {
            l.starts_with("sgd: rank ") && l.contains("`--steps` above 1 with `--inputs-on-root`")
        })
        .count();
    assert!(reports >= 1, "{err}");
    assert!(!out.exists(), "no output is written");
    let _ = std::fs::remove_dir_all(&dir);
}
