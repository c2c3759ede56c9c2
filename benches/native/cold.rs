//! The bench's cold mode (`--cold N`, issue 22): each selected workload compiled with the
//! `tapc` binary into a program (`tapc FILE -o PROG`, the same pipeline and contract as the
//! warm rows), then run N times as a fresh process per run on the workload's inputs (`.npy`
//! files), with 1 and 2 threads. Two walls per run: the program's own `--time` wall (the
//! schedule, as the warm rows time it, but in a process that has not run it before: first
//! page faults, thread start-up) and the whole process wall (reading the inputs, writing
//! the outputs, start and exit). The minimum over the N runs is reported, beside the warm
//! in-process median and the best peer's warm median at 2 threads. `--cold-before TAPC` also
//! times the programs another `tapc` binary builds (another checkout's: before and after).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;
use tapc_runtime::Tensor;

/// Minimum cold walls (seconds) with 1 and 2 threads: the program's `--time` wall and the
/// process wall.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cold {
    pub time: [f64; 2],
    pub process: [f64; 2],
}

/// The `wall X ms` of a `--time` summary, in seconds.
fn time_wall(stderr: &str) -> Option<f64> {
    let line = stderr.lines().find(|l| l.starts_with("wall "))?;
    let ms: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(ms / 1e3)
}

/// Compiles `src` into `dir/prog`, writes `ins` as `.npy` files there and times `runs` fresh
/// runs per thread count. Panics with the program's message when a step fails (a bench).
#[allow(clippy::too_many_arguments)]
pub fn measure(
    tapc: &Path,
    name: &str,
    src: &str,
    pipeline: &str,
    contract: &str,
    ins: &HashMap<String, Tensor>,
    runs: usize,
    dir: &Path,
) -> Cold {
    std::fs::create_dir_all(dir).unwrap();
    let teg = dir.join("bench.teg");
    std::fs::write(&teg, src).unwrap();
    let prog = dir.join("prog");
    let out = Command::new(tapc)
        .arg(&teg)
        .args(["-o", prog.to_str().unwrap(), "--passes", pipeline])
        .args(["--fp-contract", contract])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name}: tapc -o failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut args: Vec<String> = Vec::new();
    for (n, t) in ins {
        let f = dir.join(format!("{n}.npy"));
        tapc_runtime::npy::write(&f, t).unwrap();
        args.extend(["--input".to_string(), format!("{n}={}", f.display())]);
    }
    let out_dir = dir.join("out");
    let mut cold = Cold::default();
    for (t, threads) in [1usize, 2].into_iter().enumerate() {
        let (mut best_time, mut best_proc) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..runs {
            let t0 = Instant::now();
            let o = Command::new(&prog)
                .args(&args)
                .args(["--threads", &threads.to_string(), "--time", "--out-dir"])
                .arg(&out_dir)
                .output()
                .unwrap();
            let proc = t0.elapsed().as_secs_f64();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{name}: the program failed: {err}");
            let wall = time_wall(&err).unwrap_or_else(|| panic!("{name}: no wall in {err}"));
            best_time = best_time.min(wall);
            best_proc = best_proc.min(proc);
            let _ = std::fs::remove_dir_all(&out_dir);
        }
        cold.time[t] = best_time;
        cold.process[t] = best_proc;
    }
    cold
}

/// The cold table: per row, the cold `--time` and process walls (minimum of the runs), the
/// warm 2-thread median, and the best peer's warm 2-thread median over the cold and warm walls.
pub fn print(rows: &[(String, Cold, f64, Option<f64>)], runs: usize, tapc: &Path) {
    let ms = |v: f64| format!("{:.2}", v * 1e3);
    println!();
    println!(
        "cold compiled programs of {} (ms, minimum of {runs} fresh processes each; `--time` = the program's own schedule wall, process = the whole process; warm = the in-process median above; ratio = best peer's warm 2T median / tapc at 2 threads)",
        tapc.display()
    );
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "workload",
        "time 1T",
        "time 2T",
        "proc 1T",
        "proc 2T",
        "warm 2T",
        "peer 2T",
        "ratio cold",
        "ratio warm"
    );
    for (name, c, warm2, peer2) in rows {
        let ratio = |t: f64| peer2.map_or("-".into(), |p| format!("{:.2}x", p / t));
        println!(
            "{:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
            name,
            ms(c.time[0]),
            ms(c.time[1]),
            ms(c.process[0]),
            ms(c.process[1]),
            ms(*warm2),
            peer2.map_or("-".into(), ms),
            ratio(c.time[1]),
            ratio(*warm2)
        );
    }
}
