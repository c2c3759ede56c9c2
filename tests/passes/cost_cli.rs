//! The cost pass through the CLI (in-process, like tests/cli.rs): `tapc opt --passes=cost` with
//! `--machine`, `--seed`, `--max-node-memory` and `--frontier-svg`, each the same as its pass
//! option; bad machine files and flags are diagnostics with a code and exit 1.

use std::path::{Path, PathBuf};
use tapc::driver::{run, Outcome};

fn tapc(args: &[&str]) -> Outcome {
    run(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch(&format!("cost-cli-{name}"))
}

fn mlp() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/mlp.teg")
        .display()
        .to_string()
}

/// `tapc opt` with a 1,500-evaluation cost search configured by flags, plus `extra` flags.
fn search_by_flags(source: &str, machine: &str, seed: &str, extra: &[&str]) -> Outcome {
    let mut args = vec![
        "opt",
        source,
        "--passes=cost{evals=1500}",
        "--emit=cost",
        "--machine",
        machine,
        "--seed",
        seed,
    ];
    args.extend_from_slice(extra);
    tapc(&args)
}

/// The flags give exactly the output of the pass options they stand for, and the SVG plot is
/// written with both panels.
#[test]
fn flags_equal_pass_options_and_write_the_plot() {
    let d = scratch("flags");
    let machine = d.join("m.toml");
    std::fs::write(&machine, "nodes = 3\nbandwidth = 1e9\n").unwrap();
    let (m, svg1, svg2) = (
        machine.display().to_string(),
        d.join("a.svg").display().to_string(),
        d.join("b.svg").display().to_string(),
    );
    let mlp = mlp();
    let by_flags = search_by_flags(
        &mlp,
        &m,
        "3",
        &["--max-node-memory", "8GiB", "--frontier-svg", &svg1],
    );
    assert_eq!(by_flags.code, 0, "{}", by_flags.stderr);
    let pipeline = format!(
        "--passes=cost{{evals=1500,machine={m},seed=3,max_memory=8GiB,frontier_svg={svg2}}}"
    );
    let by_options = tapc(&["opt", &mlp, &pipeline, "--emit=cost"]);
    assert_eq!(by_options.code, 0, "{}", by_options.stderr);
    assert_eq!(by_flags.stdout, by_options.stdout);
    assert!(
        by_flags.stdout.contains("graph @mlp: 3 nodes") && by_flags.stdout.contains("chosen: %"),
        "{}",
        by_flags.stdout
    );
    let (a, b) = (
        std::fs::read_to_string(&svg1).unwrap(),
        std::fs::read_to_string(&svg2).unwrap(),
    );
    assert_eq!(a, b);
    assert!(a.starts_with("<svg") && a.contains("</svg>"));
    assert!(a.contains("time vs peak memory") && a.contains("time vs bytes moved"));
    // A different seed is a different search (the report's improvement counts differ).
    let other = search_by_flags(&mlp, &m, "4", &[]);
    assert_eq!(other.code, 0);
    assert_ne!(other.stdout, by_flags.stdout);
}

/// A memory limit below every plan leaves the graph unsharded and says so.
#[test]
fn a_memory_limit_below_every_plan_chooses_nothing() {
    let o = tapc(&[
        "opt",
        &mlp(),
        "--passes=cost{evals=500}",
        "--emit=cost",
        "--max-node-memory",
        "1KiB",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("chosen: none"), "{}", o.stdout);
}

/// The objectives on the line after `chosen:` of a cost report.
fn chosen(report: &str) -> String {
    let mut lines = report.lines().skip_while(|l| !l.contains("chosen:"));
    lines.nth(1).expect("a chosen plan").trim().to_string()
}

/// `pick=K` carries out the K-th point of the frontier ranked by time (K = 1 is the default
/// choice): the chosen points are distinct and their times do not decrease with K; a K past
/// the frontier is E0105, exit 1.
#[test]
fn pick_carries_out_the_kth_ranked_frontier_point() {
    let report = |k: usize| {
        let passes = format!("--passes=cost{{evals=1500,sources=root,pick={k}}}");
        tapc(&["opt", &mlp(), &passes, "--emit=cost"])
    };
    let first = report(1);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let default = tapc(&[
        "opt",
        &mlp(),
        "--passes=cost{evals=1500,sources=root}",
        "--emit=cost",
    ]);
    assert_eq!(chosen(&first.stdout), chosen(&default.stdout));
    let points: usize = (first.stdout.lines())
        .find_map(|l| l.trim().strip_prefix("frontier ("))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .expect("the frontier's size");
    assert!(points >= 2, "{}", first.stdout);
    let times: Vec<f64> = (1..=points)
        .map(|k| {
            let o = report(k);
            assert_eq!(o.code, 0, "pick={k}: {}", o.stderr);
            let c = chosen(&o.stdout);
            c.strip_prefix("time ")
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let past = report(points + 1);
    assert_eq!(past.code, 1);
    assert!(
        past.stderr.contains("E0105") && past.stderr.contains(&format!("has {points} point(s)")),
        "{}",
        past.stderr
    );
}

/// Bad machine files, bad flag values and flags without the cost pass: a diagnostic with an
/// error code that names the problem (and the file), exit 1, no panic, no plot written.
#[test]
fn bad_machine_files_and_flags_are_diagnostics() {
    let d = scratch("bad");
    let svg = d.join("plot.svg").display().to_string();
    let mlp = mlp();
    for (name, text, expect) in [
        ("syntax.toml", "nodes = [", "machine file"),
        ("zero.toml", "nodes = 0", "`nodes` must be an integer"),
        (
            "neg.toml",
            "bandwidth = -1",
            "`bandwidth` must be a non-negative",
        ),
        (
            "link.toml",
            "[[link]]\nfrom = 0\nto = 5",
            "node 5 out of range",
        ),
        ("key.toml", "speed = 1", "unknown key `speed`"),
    ] {
        let path = d.join(name);
        std::fs::write(&path, text).unwrap();
        let o = tapc(&[
            "opt",
            &mlp,
            "--passes=cost",
            "--machine",
            &path.display().to_string(),
            "--frontier-svg",
            &svg,
        ]);
        assert_eq!(o.code, 1, "{name}: {}", o.stderr);
        assert!(
            o.stderr.contains("error[E0103]") && o.stderr.contains(expect),
            "{name}: {}",
            o.stderr
        );
        assert!(o.stdout.is_empty());
    }
    let missing = d.join("missing.toml").display().to_string();
    let o = tapc(&["opt", &mlp, "--passes=cost", "--machine", &missing]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("error[E0103]")
            && o.stderr.contains("cannot read machine file")
            && o.stderr.contains("missing.toml"),
        "{}",
        o.stderr
    );
    let o = tapc(&["opt", &mlp, "--passes=canonicalize", "--seed", "2"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("error[E0103]") && o.stderr.contains("`--seed` needs the cost pass"),
        "{}",
        o.stderr
    );
    let o = tapc(&["opt", &mlp, "--passes=cost", "--max-node-memory", "lots"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("error[E0103]") && o.stderr.contains("`lots` is not a byte count"));
    let o = tapc(&["opt", &mlp, "--passes=cost", "--seed", "x"]);
    assert_eq!(o.code, 2, "clap rejects a non-number: {}", o.stderr);
    assert!(!Path::new(&svg).exists());
    // A plot that cannot be written: E0100 naming the path.
    let nowhere = d.join("no/such/dir/plot.svg").display().to_string();
    let o = tapc(&[
        "opt",
        &mlp,
        "--passes=cost{evals=200}",
        "--frontier-svg",
        &nowhere,
    ]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("error[E0100]") && o.stderr.contains("no/such/dir/plot.svg"),
        "{}",
        o.stderr
    );
}

/// `tapc calibrate -o FILE` measures this machine and writes a machine file the cost pass
/// reads: every class and dtype has a throughput, memory bandwidth and flop/s are plausible
/// for a CPU (between 1e8 and 1e14 per second), the file does not fix the node count (so
/// `cost{nodes=2}` replicates it) and says the links were not measured. Without `-o` it
/// prints the same format; an output in a missing directory is E0100, exit 1, nothing written.
#[test]
fn calibrate_writes_a_machine_file_the_cost_pass_reads() {
    use tapc::passes::cost::machine::{Class, Machine};
    let d = scratch("calibrate");
    let file = d.join("machine.toml");
    let o = tapc(&[
        "calibrate",
        "-o",
        &file.display().to_string(),
        "--threads",
        "1",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let text = std::fs::read_to_string(&file).expect("written");
    assert!(text.contains("not measured"), "{text}");
    let m = Machine::from_toml(&text).expect("parses");
    assert!(!m.sized && m.len() == 1, "{text}");
    let plausible = |x: f64| (1e8..1e14).contains(&x);
    assert!(
        plausible(m.nodes[0].flops) && plausible(m.nodes[0].mem_bandwidth),
        "{text}"
    );
    let mut checked = 0;
    for c in Class::ALL {
        for f64 in [false, true] {
            assert!(text.contains(&format!("{} = ", c.key(f64))), "{text}");
            assert!(plausible(m.nodes[0].rate(c, f64)), "{text}");
            checked += 1;
        }
    }
    assert_eq!(checked, 6);
    let o = tapc(&[
        "opt",
        &mlp(),
        "--passes=cost{nodes=2,evals=200}",
        "--emit=cost",
        "--machine",
        &file.display().to_string(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("graph @mlp: 2 nodes"), "{}", o.stdout);
    let missing = d.join("no/such/dir/m.toml");
    let o = tapc(&[
        "calibrate",
        "-o",
        &missing.display().to_string(),
        "--threads",
        "1",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("E0100"), "{}", o.stderr);
    assert!(!missing.exists());
    let _ = std::fs::remove_dir_all(&d);
}
