//! Latency of `tapc lsp` on a generated 5,000-line file, over the real binary's stdio: the time
//! from a change to its `publishDiagnostics` (target: under 100 ms, median), and of a
//! completion request in three contexts (`%` values in an apply, `@` ops, a kernel body; target:
//! under 50 ms, median).
//!
//! `cargo bench --bench lsp [-- --edits N --lines N]` (release), or `cargo test --bench lsp`
//! (the dev profile, opt-level 2).

#[path = "../tests/common/lsp_client.rs"]
mod lsp_client;

use serde_json::json;
use std::time::Instant;

const URI: &str = "file:///bench/big.teg";

/// About `lines` lines: a few ops, then graphs of chained applies and views, 100 statements each.
fn source(lines: usize) -> String {
    let mut s = String::from(
        "op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {\n  \
         y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]\n}\n\n\
         op @relu(x: f32[..S]) -> (y: f32[..S]) {\n  y[..i] = max(x[..i], 0.0)\n}\n\n",
    );
    let mut g = 0;
    while s.lines().count() < lines {
        s.push_str(&format!(
            "graph @g{g} {{\n  %v0 = source @x : f32[16, 16]\n  %w = source @w : f32[16, 16]\n  \
             %b = source @b : f32[16]\n"
        ));
        for i in 1..=96 {
            let p = i - 1;
            match i % 3 {
                0 => s.push_str(&format!("  %v{i} = apply @linear(%v{p}, %w, %b)\n")),
                1 => s.push_str(&format!("  %v{i} = apply @relu(%v{p})\n")),
                _ => s.push_str(&format!("  %v{i} = transpose %v{p} [1, 0]\n")),
            }
        }
        s.push_str("  sink @y %v96\n}\n\n");
        g += 1;
    }
    s
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let lines = arg("--lines", 5000);
    let edits = arg("--edits", 9);
    let text = source(lines);
    let n_lines = text.lines().count();
    let t = Instant::now();
    let (_, _, diags) = tapc::compile_source(&text);
    let compile = t.elapsed();
    assert!(!diags.has_errors(), "the generated file has errors");
    // CPU time of this thread (ns on a CPU, from the scheduler): what a quiet machine would
    // take, less sensitive than wall time to the other processes sharing the cores.
    let mut cpu: Vec<f64> = (0..5)
        .map(|_| {
            let before = thread_cpu_ns();
            let _ = tapc::compile_source(&text);
            (thread_cpu_ns() - before) as f64 / 1e6
        })
        .collect();
    cpu.sort_by(f64::total_cmp);

    let mut c = lsp_client::Client::start(&[]);
    c.initialize();
    c.open(URI, &text);
    assert!(c.diagnostics(URI, 1).is_empty());
    // Each edit renames the use on one `relu` line to an undefined value and back, in the
    // middle of the file, so every other publish has one E0011.
    let line = text
        .lines()
        .position(|l| l.contains("@relu(%v48)"))
        .unwrap();
    let col = text.lines().nth(line).unwrap().find("%v48").unwrap();
    let mut times = Vec::new();
    let server_cpu = process_cpu_ms(c.pid());
    for k in 0..edits {
        let version = k as i64 + 2;
        let new = if k % 2 == 0 { "%zz48" } else { "%v48" };
        let old_len = if k % 2 == 0 { 4 } else { 5 };
        let range = json!({"start": {"line": line, "character": col},
                           "end": {"line": line, "character": col + old_len}});
        let t = Instant::now();
        c.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": version},
                   "contentChanges": [{"range": range, "text": new}]}),
        );
        let d = c.diagnostics(URI, version);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(d.len(), usize::from(k % 2 == 0), "{d:?}");
    }
    let server_cpu = (process_cpu_ms(c.pid()) - server_cpu) / edits as f64;
    let completion = completion_times(&mut c, &text);
    assert_eq!(c.shutdown(), Some(0));
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "tapc lsp diagnostics latency, {n_lines}-line file ({} bytes)",
        text.len()
    );
    println!(
        "  compile_source alone: {:.1} ms wall; thread CPU time, median of 5: {:.1} ms",
        compile.as_secs_f64() * 1e3,
        cpu[2]
    );
    println!(
        "  change -> publishDiagnostics over {edits} edits: median {median:.1} ms \
         (min {:.1}, max {:.1})",
        sorted[0],
        sorted[sorted.len() - 1]
    );
    println!("  server CPU time per edit (user + system, 10 ms ticks): {server_cpu:.0} ms");
    println!(
        "  load average: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "  bar: median < 100 ms: {}",
        if median < 100.0 { "met" } else { "NOT MET" }
    );
    for (what, items, mut t) in completion {
        t.sort_by(f64::total_cmp);
        let m = t[t.len() / 2];
        println!(
            "  completion, {what} ({items} items), {} requests: median {m:.2} ms (max {:.2}); \
             bar 50 ms: {}",
            t.len(),
            t[t.len() - 1],
            if m < 50.0 { "met" } else { "NOT MET" }
        );
    }
}

/// Round-trip times (ms) of completion requests on the analysed file, 20 per context, with
/// the number of items each answered.
fn completion_times(
    c: &mut lsp_client::Client,
    text: &str,
) -> Vec<(&'static str, usize, Vec<f64>)> {
    let last_graph = text.rfind("graph @").unwrap();
    let at = |needle: &str, from: usize, skip: usize| {
        let k = from + text[from..].find(needle).unwrap() + skip;
        let line = text[..k].matches('\n').count();
        let col = k - text[..k].rfind('\n').map_or(0, |i| i + 1);
        json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": col}})
    };
    let cases = [
        (
            "`%` in the last graph's last apply",
            at("(%v95", last_graph, 2),
        ),
        ("`@` after apply", at("@relu(%v93", last_graph, 1)),
        ("kernel body", at("sum[k]", 0, 0)),
    ];
    cases
        .into_iter()
        .map(|(what, params)| {
            let mut items = 0;
            let times = (0..20)
                .map(|_| {
                    let t = Instant::now();
                    let r = c.request("textDocument/completion", params.clone());
                    items = r.as_array().map_or(0, Vec::len);
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            assert!(items > 0, "no completions for {what}");
            (what, items, times)
        })
        .collect()
}

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`; 0 when absent).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User plus system CPU time of process `pid` so far, in ms (`/proc/PID/stat`, 100 Hz ticks).
fn process_cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the `(comm)`: state is field 3, utime 14 and stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    f.get(11)
        .zip(f.get(12))
        .map_or(0.0, |(u, s)| (u + s) * 10.0)
}
