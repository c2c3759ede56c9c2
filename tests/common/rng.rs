//! The one deterministic generator of the tests and benches (xorshift64), so failures reproduce.
//! It depends on nothing, so benches and the library's own unit tests include it by `#[path]`.
#![allow(dead_code)]

/// xorshift64: the state must not be zero.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Uniform in `0..n` for signed extents (0 when `n` < 1).
    pub fn below_i64(&mut self, n: i64) -> i64 {
        (self.next() % n.max(1) as u64) as i64
    }

    /// True one time in `k`.
    pub fn chance(&mut self, k: i64) -> bool {
        self.below_i64(k) == 0
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// Uniform in `[0, 1)` with 24 bits, as an `f32`.
    pub fn unit_f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}
