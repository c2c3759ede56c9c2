//! Staging and committing N sinks takes time linear in N (issue 23, item 13): writes 2,000
//! and 20,000 one-element sinks with `output::write_all_atomic` (twice each, so the second
//! commit replaces every file), on a tmpfs when there is one, and fails if ten times the sinks
//! take more than 30 times as long (quadratic staging takes about 100 times). Prints the
//! times. Run with `cargo bench -p tapc-runtime --bench staging`.

use std::path::Path;
use std::time::{Duration, Instant};
use tapc_runtime::output;
use tapc_runtime::{Data, Tensor};

/// The best of three runs of writing `n` sinks twice into a fresh directory.
fn time(n: usize) -> Duration {
    let shm = Path::new("/dev/shm");
    let tensors: Vec<Tensor> = (0..n)
        .map(|k| Tensor::new(vec![1], Data::I64(vec![k as i64])).unwrap())
        .collect();
    let names: Vec<String> = (0..n).map(|k| format!("s{k}")).collect();
    let items: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&tensors).collect();
    (0..3)
        .map(|_| {
            let d = match shm.is_dir() {
                true => tempfile::tempdir_in(shm).unwrap(),
                false => tempfile::tempdir().unwrap(),
            };
            let start = Instant::now();
            for _ in 0..2 {
                output::write_all_atomic(d.path(), &items).unwrap();
            }
            start.elapsed()
        })
        .min()
        .unwrap()
}

fn main() {
    let small = time(2_000);
    let large = time(20_000);
    let ratio = large.as_secs_f64() / small.as_secs_f64();
    println!(
        "staging 2,000 sinks: {:.3} s; 20,000 sinks: {:.3} s; ratio {ratio:.1} (linear: 10)",
        small.as_secs_f64(),
        large.as_secs_f64()
    );
    assert!(ratio < 30.0, "staging is not linear: ratio {ratio:.1}");
}
