//! `--profile`: where an imported model's time goes, warm and in-process. Every task's
//! recorded job time is summed per run; the median over the runs is reported per op kind
//! (depthwise, pointwise 1×1, dense k×k convolutions, convolutions on a 1×1 map such as
//! squeeze-excite, pads, elementwise ops) and for the slowest tasks.

use std::collections::HashMap;
use tapc::ir::graph::{Graph, NodeKind};
use tapc_runtime::exec::Report;

/// The kind of the task named `task` ("apply @Conv -> %y", "pad -> %y", ...) in `g`.
pub fn kind_of(g: &Graph, task: &str) -> String {
    let (head, rest) = task.split_once(" -> %").unwrap_or((task, ""));
    let result = rest.split([',', ' ']).next().unwrap_or("");
    let Some(op) = head.strip_prefix("apply @") else {
        return head.to_string();
    };
    let shape = |i: usize, a: &[tapc::ir::ValueId]| -> Vec<i64> {
        a.get(i)
            .and_then(|&v| g.value(v).ty.clone())
            .map_or(vec![], |t| t.shape)
    };
    let apply = g
        .find_value(result)
        .and_then(|v| match &g.nodes[g.value(v).node].kind {
            NodeKind::Apply(a) => Some(a),
            _ => None,
        });
    let Some(a) = apply else {
        return op.to_string();
    };
    let out = g
        .find_value(result)
        .and_then(|v| g.value(v).ty.clone())
        .map_or(vec![], |t| t.shape);
    if op.starts_with("ConvGrouped") {
        let w = shape(1, &a.args);
        if w.len() == 5 && w[1] == 1 && w[2] == 1 {
            return format!("depthwise {}x{}", w[3], w[4]);
        }
        return "grouped conv".into();
    }
    if op.starts_with("ConvTransposeTiles") {
        return "ConvTranspose tiles".into();
    }
    if op.starts_with("ConvPointwise") {
        // `y: [N, O, H·W]`, the weights `[O, C]`.
        let one = out.get(2) == Some(&1);
        return if one {
            "conv on a 1x1 map"
        } else {
            "pointwise 1x1"
        }
        .into();
    }
    if op.starts_with("Conv") {
        let w = shape(1, &a.args);
        if out.len() == 4 && out[2] * out[3] == 1 {
            return "conv on a 1x1 map".into();
        }
        if w.len() == 4 {
            return match (w[2], w[3]) {
                (1, 1) => "pointwise 1x1".into(),
                (k0, k1) => format!("dense {k0}x{k1}"),
            };
        }
    }
    if op.starts_with("MatMul") || op.contains("Pool") || op.starts_with("Softmax") {
        return op.to_string();
    }
    "elementwise".into()
}

/// Per-task job time summed over one run's events.
pub fn task_times(r: &Report) -> Vec<f64> {
    let mut t = vec![0.0; r.task_names.len()];
    for e in &r.events {
        t[e.task] += e.duration.as_secs_f64();
    }
    t
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Prints the breakdown of `runs` (each run's per-task times) by kind and the `top` slowest
/// tasks; `wall` are the runs' wall times.
pub fn print(label: &str, g: &Graph, names: &[String], runs: &[Vec<f64>], wall: Vec<f64>) {
    let mut by_kind: HashMap<String, Vec<f64>> = HashMap::new();
    for r in runs {
        let mut acc: HashMap<String, f64> = HashMap::new();
        for (i, &t) in r.iter().enumerate() {
            *acc.entry(kind_of(g, &names[i])).or_default() += t;
        }
        for (k, v) in acc {
            by_kind.entry(k).or_default().push(v);
        }
    }
    let mut kinds: Vec<(String, f64, usize)> = by_kind
        .into_iter()
        .map(|(k, v)| {
            let n = names.iter().filter(|n| kind_of(g, n) == k).count();
            (k, median(v), n)
        })
        .collect();
    kinds.sort_by(|a, b| b.1.total_cmp(&a.1));
    let busy: f64 = kinds.iter().map(|k| k.1).sum();
    println!(
        "{label}: wall {:.1} µs (median of {}), job time {:.1} µs",
        median(wall) * 1e6,
        runs.len(),
        busy * 1e6
    );
    for (k, t, n) in &kinds {
        println!(
            "  {k:<22} {n:>4} tasks {:>9.1} µs {:>5.1}%",
            t * 1e6,
            100.0 * t / busy
        );
    }
    let mut tasks: Vec<(usize, f64)> = (0..names.len())
        .map(|i| (i, median(runs.iter().map(|r| r[i]).collect())))
        .collect();
    tasks.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (i, t) in tasks.iter().take(12) {
        println!("    {:>8.1} µs  {}", t * 1e6, names[*i]);
    }
}
