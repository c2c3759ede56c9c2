//! The read-bandwidth probe (the maximum of 1 GiB of f32 on AVX-512), and the argmax row judged
//! against a probe pass timed just before each of its 2-thread runs. This host's read bandwidth
//! drifts between minutes (23–41 GB/s at 2 threads in one quiet morning), so a probe taken once
//! when the bench starts can disagree with a row measured later; a pair shares the moment.

/// Elements of the probe's buffer (1 GiB of f32).
const PROBE_LEN: usize = 256 << 20;

/// The maximum of `x` with four 16-lane AVX-512 accumulators: loads are the only limit.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn max_avx512(x: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_set1_ps(f32::MIN); 4];
    for c in x.chunks_exact(64) {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: `c` has 64 floats, so lanes 16·j .. 16·j + 16 are in bounds.
            *a = _mm512_max_ps(*a, unsafe { _mm512_loadu_ps(c.as_ptr().add(16 * j)) });
        }
    }
    acc.iter()
        .map(|&a| _mm512_reduce_max_ps(a))
        .fold(f32::MIN, f32::max)
}

/// A buffer to read, faulted in once (`None` without AVX-512).
pub struct Probe(Vec<f32>);

impl Probe {
    pub fn new() -> Option<Probe> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f") {
            return Some(Probe(vec![1.0f32; PROBE_LEN]));
        }
        None
    }

    /// Bytes per second of one pass over the buffer on `threads` threads.
    pub fn pass(&self, threads: usize) -> f64 {
        let t0 = std::time::Instant::now();
        std::thread::scope(|s| {
            for c in self.0.chunks(PROBE_LEN.div_ceil(threads)) {
                // SAFETY: `Probe::new` made a buffer only where AVX-512F was detected.
                #[cfg(target_arch = "x86_64")]
                s.spawn(move || std::hint::black_box(unsafe { max_avx512(c) }));
            }
        });
        (PROBE_LEN * 4) as f64 / t0.elapsed().as_secs_f64()
    }
}

/// Bytes per second only read (best of 5 passes) on `threads` threads (0 without AVX-512).
pub fn read_bandwidth(threads: usize) -> f64 {
    Probe::new().map_or(0.0, |p| (0..5).map(|_| p.pass(threads)).fold(0.0, f64::max))
}

/// The paired runs of a memory-bound row: its bytes per second and the probe's just before,
/// one pair per 2-thread run.
pub fn print_paired(name: &str, pairs: &[(f64, f64)]) {
    if pairs.is_empty() {
        return;
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratios: Vec<f64> = pairs.iter().map(|(r, p)| r / p).collect();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    println!(
        "{name} at 2 threads against a read probe timed before each run ({} pairs): median {:.1} GB/s read, probe median {:.1} GB/s, median ratio {:.0}% (range {:.0}–{:.0}%)",
        pairs.len(),
        med(pairs.iter().map(|p| p.0).collect()) / 1e9,
        med(pairs.iter().map(|p| p.1).collect()) / 1e9,
        100.0 * med(ratios),
        100.0 * lo,
        100.0 * hi
    );
}
