//! A fuzzer of the ONNX importer (`tapc::import::import_onnx`): mutated copies of seed models
//! (bit flips, byte overwrites, truncations, inserted and deleted runs, varint-sized length
//! bytes), each written to a file and imported. A finding is a panic, or a refusal without an
//! E012x code. Deterministic in its seed. Used by tests/import/fuzz.rs and benches/fuzz.rs
//! (`--onnx N`).
#![allow(dead_code)]

use std::path::Path;

/// What a run saw.
#[derive(Debug, Default)]
pub struct Report {
    pub cases: u64,
    pub imported: u64,
    pub refused: u64,
    pub findings: Vec<String>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of `seed`.
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len());
        match rng.below(6) {
            0 if !b.is_empty() => b[at] ^= 1 << rng.below(8),
            1 if !b.is_empty() => b[at] = rng.next() as u8,
            2 => b.truncate(at),
            3 => {
                let run: Vec<u8> = (0..1 + rng.below(8)).map(|_| rng.next() as u8).collect();
                b.splice(at..at, run);
            }
            4 => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                b.drain(at..end);
            }
            _ if !b.is_empty() => b[at] = [0x80, 0xff, 0x7f, 0x00, 0x01][rng.below(5)],
            _ => {}
        }
    }
    b
}

/// Imports `cases` mutations of `seeds` (files written in `dir`).
pub fn run(seeds: &[Vec<u8>], cases: u64, seed: u64, dir: &Path) -> Report {
    let mut rng = Rng(seed);
    let mut r = Report::default();
    let path = dir.join("fuzz.onnx");
    let opts = tapc::import::ImportOptions::default();
    for i in 0..cases {
        let s = &seeds[rng.below(seeds.len())];
        let bytes = mutate(s, &mut rng);
        std::fs::write(&path, &bytes).unwrap();
        let result = std::panic::catch_unwind(|| tapc::import::import_onnx(&path, &opts));
        r.cases += 1;
        match result {
            Ok(Ok(_)) => r.imported += 1,
            Ok(Err(diags)) => {
                r.refused += 1;
                let coded = diags
                    .iter()
                    .all(|d| d.code.is_some_and(|c| c.0.starts_with("E012")));
                if diags.is_empty() || !coded {
                    r.findings.push(format!(
                        "case {i} (seed {seed:#x}): refused without an E012x code: {diags:?}"
                    ));
                }
            }
            Err(_) => r.findings.push(format!("case {i} (seed {seed:#x}): PANIC")),
        }
    }
    r
}
