//! Summaries the native bench prints after its side-by-side table: a family's minimum and
//! median ratio, peak memory against JAX's live buffers, and CPU time per training step.

use super::{median, ref_time, selects, RefTimes, Row};

/// The minimum and median ratio (best peer / tapc) over a family's rows, per thread count; a
/// family measured only in part says how many of its rows it covers.
pub fn print_family(family: &str, size: usize, rows: &[Row], np: &RefTimes, jx: &RefTimes) {
    let members: Vec<&Row> = rows.iter().filter(|r| selects(family, &r.name)).collect();
    if members.is_empty() {
        return;
    }
    for (t, label) in [(0, "1T"), (1, "2T")] {
        let mut ratios: Vec<(f64, &str)> = members
            .iter()
            .filter_map(|r| {
                let best = [ref_time(np, t, &r.name), ref_time(jx, t, &r.name)]
                    .into_iter()
                    .flatten()
                    .reduce(f64::min)?;
                Some((best / [r.t1, r.t2][t], r.name.as_str()))
            })
            .collect();
        if ratios.is_empty() {
            println!("{family} family: no peer measured, no ratio");
            return;
        }
        ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
        let median = median(ratios.iter().map(|r| r.0).collect());
        println!(
            "{family} family at {label} ({} of its {size} shapes timed with a peer): min {:.2}x ({}), median {median:.2}x",
            ratios.len(),
            ratios[0].0,
            ratios[0].1
        );
    }
}

pub fn print_memory(rows: &[Row], jx: &RefTimes) {
    let mib = |b: f64| b / (1u64 << 20) as f64;
    for r in rows {
        if let Some(live) = ref_time(jx, 0, &format!("{}@live_bytes", r.name)) {
            println!(
                "{} peak memory: tapc {:.1} MiB of buffers live at once (2 threads) vs JAX {:.1} MiB live buffers (XLA buffer assignment: arguments + temporaries + outputs + weights): {:.2}x",
                r.name,
                mib(r.peak_bytes as f64),
                mib(live),
                r.peak_bytes as f64 / live
            );
        }
    }
}

/// CPU time per step at 1 thread, the load-robust comparison of the training steps: tapc's
/// whole 1-thread run (with copying the inputs in and the sinks out) against JAX's per call.
pub fn print_cpu(rows: &[Row], jx: &RefTimes) {
    for r in rows.iter().filter(|r| r.name.starts_with("train_block")) {
        if let Some(j) = ref_time(jx, 0, &format!("{}@cpu", r.name)) {
            println!(
                "{} CPU time per step at 1 thread (median): tapc {:.2} ms (a whole run, copies included) vs JAX {:.2} ms: {:.2}x",
                r.name,
                r.cpu1 * 1e3,
                j * 1e3,
                j / r.cpu1
            );
        }
    }
}
