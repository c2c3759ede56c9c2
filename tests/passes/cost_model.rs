//! The cost model's roofline, memory and placements, priced by hand: an elementwise op and a
//! stencil cost their bytes over the memory bandwidth, a matmul its flops over the node's rate
//! for its class; copies of materialized views are charged; sources declared split or shared
//! and distributed sinks move what they should; the per-node peak counts windows, and
//! `max_memory` rejects plans over it (the 2048×8192×2048 matmul on 4 nodes); a state's
//! update is charged on every node that reads the state.

use crate::common;
use tapc::passes::cost::machine::{Class, Machine, LOCAL_FLOPS, LOCAL_MEM_BANDWIDTH};
use tapc::passes::cost::{self, model::Gene, model::Problem, pareto};
use tapc::passes::manager::PassFiles;

fn problem_with(src: &str, opts: &[(&str, &str)], files: &PassFiles) -> Problem {
    let (m, facts) = common::compile_ok("input", src);
    let opts: Vec<(String, String)> = opts
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let cfg = cost::config(&opts, files).expect("options");
    cost::problem(&m, 0, &facts[0], &cfg).expect("problem")
}

fn problem(src: &str, opts: &[(&str, &str)]) -> Problem {
    problem_with(src, opts, &PassFiles::default())
}

/// `a` within a relative 1e-12 of `b`.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1e-300)
}

const ADD: &str = "
op @add(x: f32[N], y: f32[N]) -> (z: f32[N]) {
  z[i] = x[i] + y[i]
}
graph @g {
  %a = source @a : f32[1048576]
  %b = source @b : f32[1048576]
  %c = apply @add(%a, %b)
  sink @out %c
}
";

/// 1,048,576 adds read 8 MiB and write 4 MiB: 12,582,912 bytes at 20 GB/s is 629 µs, against
/// 21 µs of arithmetic at 50 Gflop/s; on one node nothing moves, so the plan's time is the
/// memory time. Doubling the memory bandwidth halves it.
#[test]
fn an_elementwise_op_is_priced_by_its_bytes() {
    let p = problem(ADD, &[("nodes", "1")]);
    let a = &p.applies[0];
    assert_eq!(a.class, Class::Elementwise);
    assert_eq!(a.flops, 1048576.0);
    assert_eq!(a.bytes, 12.0 * 1048576.0);
    let t = p.evaluate(&p.unsharded())[0];
    assert!(close(t, 12.0 * 1048576.0 / LOCAL_MEM_BANDWIDTH), "{t}");
    assert!(t > 20.0 * a.flops / LOCAL_FLOPS, "memory bound");
    let mut files = PassFiles::default();
    files.insert(
        "m.toml".into(),
        Ok("nodes = 1\nmem_bandwidth = 4e10".into()),
    );
    let fast = problem_with(ADD, &[("machine", "m.toml")], &files);
    let t2 = fast.evaluate(&fast.unsharded())[0];
    assert!(close(t2, t / 2.0), "{t2} vs {t}");
    // A measured overhead per task adds to every task.
    files.insert(
        "o.toml".into(),
        Ok("nodes = 1\ntask_overhead = 1e-3".into()),
    );
    let slow = problem_with(ADD, &[("machine", "o.toml")], &files);
    let t3 = slow.evaluate(&slow.unsharded())[0];
    assert!(close(t3, t + 1e-3), "{t3} vs {t}");
}

/// The matmul op of this file's graphs.
const MM: &str = "op @mm(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {
  c[i, j] = sum[k](a[i, k] * b[k, j])
}
";

const MATMUL: &str = "
op @rowsum(a: f32[M, K]) -> (s: f32[M]) {
  s[i] = sum[k](a[i, k])
}
graph @g {
  %a = source @a : f32[512, 512]
  %b = source @b : f32[512, 512]
  %c = apply @mm(%a, %b)
  %s = apply @rowsum(%c)
  sink @out %s
}
";

/// 2·512³ flops (5.4 ms at 50 Gflop/s) over 3 MiB of footprint (157 µs at 20 GB/s): the matmul
/// costs its flops. A machine file's `contraction_f32` throughput is the matmul's rate (and
/// not the row sum's, a reduction).
#[test]
fn a_matmul_is_priced_by_its_flops_at_its_class_rate() {
    let src = format!("{MM}{MATMUL}");
    let p = problem(&src, &[("nodes", "1")]);
    let (mm, rs) = (&p.applies[0], &p.applies[1]);
    assert_eq!((mm.class, rs.class), (Class::Contraction, Class::Reduction));
    assert_eq!(mm.flops, 2.0 * 512.0 * 512.0 * 512.0);
    assert_eq!(mm.bytes, 3.0 * 512.0 * 512.0 * 4.0);
    // The row sum: 512² flops, 1 MiB + 2 KiB of traffic: memory bound.
    let rs_time = (512.0 * 512.0 * 4.0 + 512.0 * 4.0) / LOCAL_MEM_BANDWIDTH;
    let t = p.evaluate(&p.unsharded())[0];
    assert!(close(t, mm.flops / LOCAL_FLOPS + rs_time), "{t}");
    let mut files = PassFiles::default();
    let toml = "nodes = 1\n[throughput]\ncontraction_f32 = 1e12\nreduction_f32 = 1e6\n";
    files.insert("m.toml".into(), Ok(toml.into()));
    let q = problem_with(&src, &[("machine", "m.toml")], &files);
    let t2 = q.evaluate(&q.unsharded())[0];
    let rs_compute = rs.flops / 1e6;
    assert!(close(t2, mm.flops / 1e12 + rs_compute), "{t2}");
    // Unknown classes are errors.
    assert!(Machine::from_toml("[throughput]\nmatmul = 1e9").is_err());
    assert!(Machine::from_toml("[throughput]\ncontraction_f64 = 0").is_err());
}

/// A 5-point heat stencil over a 256 × 256 grid read through a 1-wide pad: 266,256 bytes read
/// (258²·4) and 262,144 written, memory bound. A constant pad read only by the apply is folded
/// into its loads (nothing copied); a reflect pad is gathered first, which reads the grid and
/// writes the 266,256-byte padded copy: the model charges both.
#[test]
fn a_stencil_is_priced_by_its_bytes_and_a_copied_pad_by_its_copy() {
    let src = |mode: &str| {
        format!(
            "op @stencil(x: f32[M, N]) -> (y: f32[M - 2, N - 2]) {{
  y[i, j] = x[i + 1, j + 1] * 0.5 + (x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2]) * 0.125
}}
graph @heat {{
  %u = source @u : f32[256, 256]
  %p = pad %u [1:1, 1:1] {mode}
  %v = apply @stencil(%p)
  sink @v %v
}}
"
        )
    };
    let stencil = 258.0 * 258.0 * 4.0 + 256.0 * 256.0 * 4.0;
    let folded = problem(&src("constant 0.0"), &[("nodes", "1")]);
    let t = folded.evaluate(&folded.unsharded())[0];
    assert!(close(t, stencil / LOCAL_MEM_BANDWIDTH), "{t}");
    let copied = problem(&src("reflect"), &[("nodes", "1")]);
    let t = copied.evaluate(&copied.unsharded())[0];
    let copy = 2.0 * 258.0 * 258.0 * 4.0;
    assert!(close(t, (stencil + copy) / LOCAL_MEM_BANDWIDTH), "{t}");
}

/// A concat of two sources is copied into its result (the native backend gathers operands
/// that are not apply outputs); a concat of apply outputs is written in place.
#[test]
fn a_concat_of_sources_is_charged_its_copy_and_one_of_applies_is_not() {
    let src = |operands: &str| {
        format!(
            "op @neg(x: f32[N]) -> (z: f32[N]) {{
  z[i] = -x[i]
}}
graph @g {{
  %a = source @a : f32[4096]
  %b = source @b : f32[4096]
  %na = apply @neg(%a)
  %nb = apply @neg(%b)
  %c = concat {operands} axis 0
  %d = apply @neg(%c)
  sink @out %d
}}
"
        )
    };
    let neg = 2.0 * 4096.0 * 4.0 / LOCAL_MEM_BANDWIDTH;
    let of_applies = problem(&src("%na, %nb"), &[("nodes", "1")]);
    let t = of_applies.evaluate(&of_applies.unsharded())[0];
    assert!(close(t, 2.0 * neg + 2.0 * neg), "{t}");
    let of_sources = problem(&src("%a, %b"), &[("nodes", "1")]);
    let t = of_sources.evaluate(&of_sources.unsharded())[0];
    let copy = 2.0 * 2.0 * 4096.0 * 4.0 / LOCAL_MEM_BANDWIDTH;
    assert!(close(t, 2.0 * neg + 2.0 * neg + copy), "{t}");
}

/// The MLP's plans of `tests/passes/cost.rs` with the sources placed otherwise. Shared (every
/// node reads its windows from storage, the MPI runtime's default): data parallelism moves
/// only node 1's 32 logits rows back for `@logits` (1,280 B) and the 16 of them that `@sampled`
/// takes (every other row, 640 B), and nothing with
/// distributed sinks. `x` split by rows, the rest shared: the reduction plan's shard on node 1
/// reads x[0:32, 392:784] from node 0 and node 0's reads x[32:64, 0:392] from node 1
/// (2 × 50,176 B), plus the 131,072 bytes of partial sums.
#[test]
fn sources_declared_shared_or_split_and_distributed_sinks_move_what_they_should() {
    let mlp = common::example("mlp.teg");
    let dp = vec![Gene::split(0, &[0, 1]); 3];
    let root = problem(&mlp, &[("nodes", "2"), ("sources", "root")]);
    let shared = problem(&mlp, &[("nodes", "2"), ("sources", "shared")]);
    assert_eq!(shared.evaluate(&dp)[2], 1920.0);
    let quiet = problem(
        &mlp,
        &[
            ("nodes", "2"),
            ("sources", "shared"),
            ("sinks", "distributed"),
        ],
    );
    assert_eq!(quiet.evaluate(&dp)[2], 0.0);
    // Node 0 no longer holds every input: its peak drops.
    assert!(shared.evaluate(&dp)[3] < root.evaluate(&dp)[3]);
    let mut files = PassFiles::default();
    let toml = "nodes = 2\n[sources]\nx = \"split\"\n\"*\" = \"shared\"\n";
    files.insert("m.toml".into(), Ok(toml.into()));
    let split = problem_with(&mlp, &[("machine", "m.toml")], &files);
    let k = split.applies[0]
        .vars
        .iter()
        .position(|v| v.0 == "k")
        .unwrap();
    let rp = vec![Gene::split(k, &[0, 1]), Gene::whole(0), Gene::whole(0)];
    assert_eq!(split.evaluate(&rp)[2], 2.0 * 50176.0 + 131072.0);
    for bad in [
        "[sources]\nx = \"everywhere\"",
        "[sources]\nx = 7",
        "sinks = \"scatter\"",
    ] {
        assert!(Machine::from_toml(bad).is_err(), "{bad}");
    }
    let opts = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    assert!(cost::config(&opts("sources", "nowhere"), &PassFiles::default()).is_err());
    assert!(cost::config(&opts("sources", "5"), &PassFiles::default()).is_err());
    assert!(cost::config(&opts("sinks", "scatter"), &PassFiles::default()).is_err());
}

const BIG_MATMUL: &str = "
graph @g {
  %a = source @a : f32[2048, 8192]
  %b = source @b : f32[8192, 2048]
  %c = apply @mm(%a, %b)
  sink @c %c
}
";

const MIB: f64 = 1024.0 * 1024.0;

/// The case: a 2048×8192×2048 f32 matmul (A and B 64 MiB each, C 16 MiB) on 4 nodes
/// under `max_memory=96MiB`. With the sources on node 0 no plan fits (node 0 holds 128 MiB of
/// inputs), and the pass says so. With the sources on shared storage, the rows of A split
/// in 4 put on each node a quarter of A (16 MiB), all of B (64 MiB) and a quarter of C
/// (4 MiB): 84 MiB, and node 0 gathers the other three quarters of C (12 MiB more): 96 MiB.
/// With distributed sinks 84 MiB per node. The search finds a plan under the limit, and the
/// plan it picks has its per-node peak under the limit.
#[test]
fn the_per_node_peak_counts_windows_and_max_memory_rejects_plans_over_it() {
    let big = format!("{MM}{BIG_MATMUL}");
    let rows = Gene::split(0, &[0, 1, 2, 3]);
    let shared = problem(&big, &[("nodes", "4"), ("sources", "shared")]);
    assert_eq!(shared.evaluate(&[rows])[3], 96.0 * MIB);
    assert_eq!(shared.evaluate(&shared.unsharded())[3], 144.0 * MIB);
    let quiet = problem(
        &big,
        &[
            ("nodes", "4"),
            ("sources", "shared"),
            ("sinks", "distributed"),
        ],
    );
    assert_eq!(quiet.evaluate(&[rows])[3], 84.0 * MIB);
    let limit = Some(96.0 * MIB);
    let cfg = pareto::SearchConfig {
        evals: 4000,
        seed: 1,
        threads: 1,
        ..Default::default()
    };
    for p in [&shared, &quiet] {
        let (front, _) = pareto::search(p, &cfg);
        let chosen = cost::choose(&front, 0, limit).expect("a plan under 96 MiB");
        assert!(chosen.obj[3] <= 96.0 * MIB, "{}", p.describe(&chosen.plan));
        assert_eq!(p.evaluate(&chosen.plan)[3], chosen.obj[3]);
    }
    let root = problem(&big, &[("nodes", "4"), ("sources", "root")]);
    let (front, _) = pareto::search(&root, &cfg);
    assert!(front.iter().all(|pt| pt.obj[3] >= 128.0 * MIB));
    assert!(cost::choose(&front, 0, limit).is_none());
}

/// The α–β collectives by hand on default links (5 µs, 12.5 GB/s): a binomial-tree broadcast
/// to k receivers takes ⌈log2(k + 1)⌉ rounds of one message; a ring allreduce on p nodes
/// 2(p − 1)·α + 2(p − 1)/p · n · β, over the ring's slowest link.
#[test]
fn collectives_are_priced_with_alpha_beta() {
    use tapc::passes::cost::machine::{LOCAL_BANDWIDTH, LOCAL_LATENCY};
    let m = Machine::default_local(8);
    let (a, b, n) = (LOCAL_LATENCY, 1.0 / LOCAL_BANDWIDTH, 1e6);
    let msg = a + n * b;
    for (k, rounds) in [(1, 1.0), (2, 2.0), (3, 2.0), (4, 3.0), (7, 3.0)] {
        let to: Vec<usize> = (1..=k).collect();
        assert!(close(m.broadcast(0, &to, n), rounds * msg), "{k} receivers");
    }
    assert!(close(m.allreduce(&[0, 1, 2, 3], n), 6.0 * a + 1.5 * n * b));
    assert!(close(m.allreduce(&[0, 1], n), 2.0 * a + n * b));
    assert_eq!(m.allreduce(&[3], n), 0.0);
    let slow =
        Machine::from_toml("nodes = 4\n[[link]]\nfrom = 1\nto = 2\nbandwidth = 1e9").unwrap();
    assert!(close(
        slow.allreduce(&[0, 1, 2, 3], n),
        6.0 * a + 1.5 * n / 1e9
    ));
}

/// The reduce of a split reduction's partials as Open MPI 4.1's libnbc runs `MPI_Ireduce`: a
/// binomial tree, ⌈log2 p⌉ rounds of one whole message, except over at most 4 ranks from
/// 64 KiB, a chain of 8 KiB segments all posted at once: each of the p − 1 hops pays its
/// latency once and the s segments stream behind, (p − 1)·α + (s + p − 2)·8 KiB·β; the root
/// and repeated nodes are not senders.
#[test]
fn a_split_reductions_reduce_is_priced_as_libnbc_runs_it() {
    use tapc::passes::cost::machine::{LOCAL_BANDWIDTH, LOCAL_LATENCY};
    let m = Machine::default_local(8);
    let (a, b) = (LOCAL_LATENCY, 1.0 / LOCAL_BANDWIDTH);
    let small = 4096.0;
    let msg = a + small * b;
    for (senders, rounds) in [(vec![1], 1.0), (vec![1, 2], 2.0), (vec![1, 2, 3], 2.0)] {
        assert!(
            close(m.reduce(0, &senders, small), rounds * msg),
            "{senders:?}"
        );
    }
    let seven: Vec<usize> = (1..8).collect();
    assert!(close(m.reduce(0, &seven, small), 3.0 * msg));
    // 1 MiB over 4 ranks: a chain of 128 segments over 3 hops; over 2, one message.
    let big = 1048576.0;
    assert!(close(
        m.reduce(0, &[1, 2, 3], big),
        3.0 * a + 130.0 * 8192.0 * b
    ));
    assert!(close(m.reduce(0, &[1], big), a + big * b));
    // Over 5 ranks, a binomial tree of whole messages again.
    assert!(close(m.reduce(0, &[1, 2, 3, 4], big), 3.0 * (a + big * b)));
    assert_eq!(m.reduce(2, &[2], big), 0.0);
}

/// A matmul split by rows over 4 nodes reads the 4 MiB weight, on node 0, whole on nodes 1 to
/// 3: the runtime broadcasts it (3 receivers), and the model prices it as the binomial tree's
/// 2 rounds, not one message. Bytes moved stay those of three copies, plus the rows of `x`
/// sent and of `y` gathered (3 × 4,096 B each). Every message is copied out of its buffer on
/// the receiver, and a computed one into it on the sender.
#[test]
fn a_value_read_whole_by_three_nodes_arrives_by_broadcast() {
    use tapc::passes::cost::machine::{LOCAL_BANDWIDTH, LOCAL_LATENCY};
    let src = MM.to_string()
        + "graph @g {
  %x = source @x : f32[4, 1024]
  %w = source @w : f32[1024, 1024]
  %y = apply @mm(%x, %w)
  sink @y %y
}
";
    let p = problem(&src, &[("nodes", "4"), ("sources", "root")]);
    let plan = [Gene::split(0, &[0, 1, 2, 3])];
    assert!(p.valid(&plan));
    let o = p.evaluate(&plan);
    let (w, row) = (1024.0 * 1024.0 * 4.0, 1024.0 * 4.0);
    assert_eq!(o[2], 3.0 * w + 3.0 * row + 3.0 * row);
    let msg = |bytes: f64| LOCAL_LATENCY + bytes / LOCAL_BANDWIDTH;
    let run = (w + 2.0 * row) / LOCAL_MEM_BANDWIDTH;
    // A copy reads and writes its bytes: the shard unpacks `w` and its rows of `x` before it
    // runs; its rows of `y` are packed on its node and unpacked on node 0.
    let copy = |bytes: f64| 2.0 * bytes / LOCAL_MEM_BANDWIDTH;
    let gather = copy(row) + msg(row) + copy(row);
    let want = 2.0 * msg(w) + copy(w + row) + run + gather;
    assert!(close(o[0], want), "{} against {want}", o[0]);
}

/// The same query through the pass, which checks `max_memory` against each node's peak as the
/// runtime plans it (the report's `per-node peak memory (the runtime's plan)`, the figure a
/// rank checks before it runs: `tapc_runtime::mpi::peak`). With sinks gathered on node 0, the
/// row split the model puts at 96 MiB needs 108 MiB on node 0: a quarter of A (16 MiB), B
/// (64 MiB), the whole of C it gathers (16 MiB) and the three quarters of C it receives, held
/// in message buffers (12 MiB); no frontier point fits, so the graph is left as it is. Before,
/// the pass applied that plan (the model's 96 MiB passed the limit). With sinks written where
/// they are computed, the row split holds 84 MiB per node, fits and is applied on all four
/// nodes; with the sources on node 0 nothing fits.
#[test]
fn the_cost_pass_under_max_memory_applies_a_plan_that_fits() {
    let big = format!("{MM}{BIG_MATMUL}");
    let run = |pipeline: &str| {
        let (m, cx) = common::pipeline_context("big", &big, pipeline);
        let report = cx.report("cost").expect("report").to_string();
        (tapc::print::print_module(&m), report)
    };
    let node_peak = |report: &str| -> f64 {
        let key = "per-node peak memory (the runtime's plan): ";
        let at = report.find(key).unwrap_or_else(|| panic!("{report}")) + key.len();
        report[at..].split(' ').next().unwrap().parse().unwrap()
    };
    let (_, report) = run("cost{nodes=4,sources=shared,evals=4000}");
    assert!(report.contains("chosen: %c: i/4 on"), "{report}");
    assert_eq!(node_peak(&report), 108.0 * MIB, "{report}");
    // With the sinks gathered, node 0 holds `c` and the partials it receives: the `k` split
    // fits in exactly 96 MiB, as its other nodes read their column blocks of `a` as source
    // windows (before, each held the hull of its block's rows, all of `a`, and no plan fit);
    // nothing fits in 95 MiB.
    let (_, report) = run("cost{nodes=4,max_memory=96MiB,sources=shared,evals=4000}");
    assert!(report.contains("chosen: %c: k/3"), "{report}");
    assert_eq!(node_peak(&report), 96.0 * MIB, "{report}");
    let (printed, report) = run("cost{nodes=4,max_memory=95MiB,sources=shared,evals=4000}");
    assert!(report.contains("chosen: none"), "{report}");
    assert!(!printed.contains(" on 1 "), "{printed}");
    let (printed, report) =
        run("cost{nodes=4,max_memory=96MiB,sources=shared,sinks=distributed,evals=4000}");
    assert_eq!(node_peak(&report), 84.0 * MIB, "{report}");
    for node in 1..4 {
        assert!(printed.contains(&format!(" on {node} ")), "{printed}");
    }
    let (printed, report) = run("cost{nodes=4,max_memory=96MiB,sources=root,evals=4000}");
    assert!(report.contains("chosen: none"), "{report}");
    assert!(!printed.contains(" on 1 "), "{printed}");
}

/// A scatter is priced by its bytes: the copy of its base (read and written) plus its indices
/// and updates, at the memory bandwidth (4000 × 256 updates into a 1000 × 256 base).
#[test]
fn a_scatter_is_priced_by_its_bytes() {
    let src = "
graph @g {
  %base = source @base : f32[1000, 256]
  %idx = source @idx : i64[4000, 256]
  %upd = source @upd : f32[4000, 256]
  %y = scatter %base, %idx, %upd axis 0 reduce add
  sink @y %y
}
";
    let p = problem(src, &[("nodes", "1")]);
    let [a] = p.applies.as_slice() else {
        panic!("one task: {:?}", p.applies.len())
    };
    assert_eq!((a.op.as_str(), a.class), ("scatter", Class::Elementwise));
    let bytes = (2 * 1000 * 256 * 4 + 4000 * 256 * 8 + 4000 * 256 * 4) as f64;
    assert_eq!(a.bytes, bytes);
    let t = p.evaluate(&p.unsharded())[0];
    assert!(
        t.is_finite() && close(t, bytes / LOCAL_MEM_BANDWIDTH),
        "{t}"
    );
}

/// A state's update runs on every node that reads the state (`codegen::replicate`, so each MPI
/// rank keeps its state between steps), and the model charges it there: `%y` split by rows
/// over 2 nodes reads `%w` on both, so the update `%w2` (whole on node 0) also runs on node 1
/// and fetches `%d` (1,024 B) from node 0, besides the rows of `%y` gathered there (16 B).
/// Before, the model charged the 16 B alone. Without state nothing is replicated.
#[test]
fn a_state_update_is_charged_on_every_node_that_reads_the_state() {
    let graph = |state: bool| {
        let w = if state {
            "%w = state @w : f32[256]"
        } else {
            "%w = source @w : f32[256]"
        };
        let update = if state {
            "update @w %w2"
        } else {
            "sink @w2 %w2"
        };
        format!(
            "op @dot(x: f32[B, N], w: f32[N]) -> (y: f32[B]) {{
  y[b] = sum[n](x[b, n] * w[n])
}}
op @neg(g: f32[N]) -> (y: f32[N]) {{
  y[i] = -g[i]
}}
op @step(w: f32[N], d: f32[N]) -> (y: f32[N]) {{
  y[i] = w[i] + d[i]
}}
graph @g {{
  %x = source @x : f32[8, 256]
  %g = source @g : f32[256]
  {w}
  %y = apply @dot(%x, %w)
  %d = apply @neg(%g)
  %w2 = apply @step(%w, %d)
  {update}
  sink @y %y
}}
"
        )
    };
    let plan = [Gene::split(0, &[0, 1]), Gene::whole(0), Gene::whole(0)];
    let mut moved = Vec::new();
    for state in [true, false] {
        let p = problem(&graph(state), &[("nodes", "2")]);
        assert!(p.valid(&plan));
        moved.push(p.evaluate(&plan)[2]);
    }
    assert_eq!(moved, [16.0 + 1024.0, 16.0]);
}

/// More than 8 parts per apply (issue 17): a plan may split an apply into every count up to 8,
/// then the powers of two and the node count, up to 64, so 16 and 64 nodes can each run a
/// part. On 16 and 64 nodes the data-parallel plan of `ADD` (sources shared, sinks
/// distributed: nothing moves) splits it into as many parts, one per node, and takes 1/16 and
/// 1/64 of the whole plan's time (memory-bound), and the search ranks it first for time. Before,
/// `MAX_PARTS` was 8 and both stopped at 8 parts (8× at most).
#[test]
fn an_apply_splits_into_as_many_parts_as_16_or_64_nodes() {
    use tapc::passes::cost::model::part_counts;
    assert_eq!(part_counts(64), [2, 3, 4, 5, 6, 7, 8, 16, 32, 64]);
    assert_eq!(part_counts(12), [2, 3, 4, 5, 6, 7, 8, 12]);
    for nodes in [16usize, 64] {
        let n = nodes.to_string();
        let opts = [("nodes", n.as_str()), ("sinks", "distributed")];
        let p = problem(ADD, &opts);
        let plan = p.aligned(nodes);
        assert!(p.valid(&plan));
        assert_eq!(plan[0].parts as usize, nodes);
        let want: Vec<u8> = (0..nodes as u8).collect();
        assert_eq!(plan[0].nodes[..nodes], want[..]);
        let (whole, split) = (p.evaluate(&p.unsharded()), p.evaluate(&plan));
        assert_eq!(split[2], 0.0, "nothing moves");
        let ratio = whole[0] / split[0];
        assert!(
            (ratio - nodes as f64).abs() < 0.05 * nodes as f64,
            "{nodes} nodes: {ratio}× faster"
        );
        let cfg = pareto::SearchConfig {
            evals: 300,
            ..Default::default()
        };
        let (front, _) = pareto::search(&p, &cfg);
        assert_eq!(
            front[0].plan[0].parts as usize,
            nodes,
            "{}",
            p.describe(&front[0].plan)
        );
    }
}
