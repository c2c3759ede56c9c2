//! Stripes, the periodic building block of the alias-analysis set algebra,
//! plus the small integer helpers (gcd, lcm, CRT) the other modules share.
//!
//! A stripe `(on, off, phase)` is the set `{z : (z - phase) mod (on + off) < on}`:
//! blocks of `on` consecutive integers repeating with period `on + off`.

use std::fmt;

/// Errors of the stripe / sett algebra.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettError {
    /// `on` or `off` was negative.
    Negative,
    /// `on + off` was 0.
    ZeroPeriod,
    /// A period or position did not fit in `i64`.
    Overflow,
    /// The exact answer needs more pieces than the algebra is willing to build.
    TooComplex,
}

impl fmt::Display for SettError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = match self {
            SettError::Negative => "stripe on/off must be non-negative",
            SettError::ZeroPeriod => "stripe period (on + off) must be at least 1",
            SettError::Overflow => "period or position overflows i64",
            SettError::TooComplex => "set expression too complex to represent",
        };
        f.write_str(msg)
    }
}

impl std::error::Error for SettError {}

/// Largest number of pieces one unfolding step may enumerate before giving up.
pub const MAX_PIECES: i128 = 1 << 16;

/// A stripe `(on, off, phase)` with `phase` normalised into `[0, on + off)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stripe {
    on: i64,
    off: i64,
    phase: i64,
}

impl Stripe {
    /// A stripe; fails on negative `on`/`off`, a zero period or an `i64` overflow.
    pub fn new(on: i64, off: i64, phase: i64) -> Result<Stripe, SettError> {
        Stripe::checked(on as i128, off as i128, phase as i128)
    }

    /// Like [`Stripe::new`] but from wide integers (used by the algebra).
    pub(crate) fn checked(on: i128, off: i128, phase: i128) -> Result<Stripe, SettError> {
        if on < 0 || off < 0 {
            return Err(SettError::Negative);
        }
        let period = on + off;
        if period == 0 {
            return Err(SettError::ZeroPeriod);
        }
        if period > i64::MAX as i128 {
            return Err(SettError::Overflow);
        }
        Ok(Stripe {
            on: on as i64,
            off: off as i64,
            phase: modp(phase, period) as i64,
        })
    }

    /// Internal constructor for arguments already known to be valid.
    pub(crate) fn make(on: i64, off: i64, phase: i128) -> Stripe {
        debug_assert!(on >= 0 && off >= 0 && on as i128 + off as i128 >= 1);
        let period = on as i128 + off as i128;
        Stripe {
            on,
            off,
            phase: modp(phase, period) as i64,
        }
    }

    /// Number of integers in each block.
    pub fn on(&self) -> i64 {
        self.on
    }

    /// Gap between consecutive blocks.
    pub fn off(&self) -> i64 {
        self.off
    }

    /// Start of the block that begins in `[0, period)`.
    pub fn phase(&self) -> i64 {
        self.phase
    }

    /// `on + off`.
    pub fn period(&self) -> i64 {
        self.on + self.off
    }

    /// True if the stripe contains no integer.
    pub fn is_empty(&self) -> bool {
        self.on == 0
    }

    /// True if the stripe contains every integer.
    pub fn is_full(&self) -> bool {
        self.off == 0
    }

    /// Membership test.
    pub fn contains(&self, z: i64) -> bool {
        modp(z as i128 - self.phase as i128, self.period() as i128) < self.on as i128
    }

    /// The stripe translated by `d`.
    pub fn shifted(&self, d: i128) -> Stripe {
        Stripe::make(self.on, self.off, self.phase as i128 + d)
    }

    /// Number of blocks meeting `[lo, hi)` and the start of the first of them.
    pub fn blocks_in(&self, lo: i128, hi: i128) -> (i128, i128) {
        if self.on == 0 || hi <= lo {
            return (0, 0);
        }
        let (p, ph, on) = (self.period() as i128, self.phase as i128, self.on as i128);
        let kmin = floor_div(lo - ph - on, p) + 1;
        let kmax = floor_div(hi - 1 - ph, p);
        ((kmax - kmin + 1).max(0), ph + kmin * p)
    }

    /// Whether the two stripes share an integer, by the gcd (CRT) criterion:
    /// they meet iff their blocks overlap modulo `gcd(period, period)`.
    pub fn meets(&self, other: &Stripe) -> bool {
        if self.on == 0 || other.on == 0 {
            return false;
        }
        let g = gcd(self.period() as i128, other.period() as i128);
        let (a, b) = (self.on as i128, other.on as i128);
        if a >= g || b >= g {
            return true;
        }
        let d = modp(self.phase as i128 - other.phase as i128, g);
        d < b || d + a > g
    }

    /// Whether the block of `self` starting at `x` meets a block of `other`.
    pub(crate) fn block_meets(&self, x: i128, other: &Stripe) -> bool {
        let q = other.period() as i128;
        let d = modp(x - other.phase as i128, q);
        d < other.on as i128 || d + self.on as i128 > q
    }
}

impl fmt::Display for Stripe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{},{})", self.on, self.off, self.phase)
    }
}

/// Floor division for wide integers (`b > 0`).
pub fn floor_div(a: i128, b: i128) -> i128 {
    // 64-bit division is several times faster than the 128-bit library call, and almost
    // every operand fits.
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(x), Ok(y)) if y > 0 => x.div_euclid(y) as i128,
        _ => a.div_euclid(b),
    }
}

/// `a mod p` in `[0, p)` (`p > 0`).
pub fn modp(a: i128, p: i128) -> i128 {
    match (i64::try_from(a), i64::try_from(p)) {
        (Ok(x), Ok(y)) if y > 0 => x.rem_euclid(y) as i128,
        _ => a.rem_euclid(p),
    }
}

/// Greatest common divisor (non-negative).
pub fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    if let (Ok(mut x), Ok(mut y)) = (u64::try_from(a), u64::try_from(b)) {
        while y != 0 {
            (x, y) = (y, x % y);
        }
        return x as i128;
    }
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Least common multiple of two positive numbers, if it fits in `i64`.
pub fn lcm(a: i128, b: i128) -> Option<i128> {
    let l = a / gcd(a, b) * b;
    (l <= i64::MAX as i128).then_some(l)
}

/// Inverse of `a` modulo `m` (`gcd(a, m) = 1`, `m >= 1`).
pub fn inv_mod(a: i128, m: i128) -> i128 {
    // Extended Euclid on (a mod m, m).
    let (mut r0, mut r1) = (modp(a, m), m);
    let (mut s0, mut s1) = (1i128, 0i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (s0, s1) = (s1, s0 - q * s1);
    }
    modp(s0, m)
}

/// Start positions, modulo `L = lcm(P, Q)` (returned too; it may exceed
/// `i64`), of the blocks of `a` unfolded to period `L` that meet a block of `b`.
///
/// Uses the CRT so that only the meeting blocks are visited when few of them do.
pub fn crt_copies(a: &Stripe, b: &Stripe) -> (i128, Vec<i128>) {
    let (p, q) = (a.period() as i128, b.period() as i128);
    let g = gcd(p, q);
    let l = p / g * q;
    let span = a.on as i128 + b.on as i128 - 1;
    if span >= q || q / g <= span / g + 1 {
        let starts = (0..q / g).map(|k| modp(a.phase as i128 + k * p, l));
        return (l, starts.filter(|&x| a.block_meets(x, b)).collect());
    }
    // x = pa + p*t and x = pb + d (mod q) with d in (-on_a, on_b).
    let (pa, pb) = (a.phase as i128, b.phase as i128);
    let lo = -(a.on as i128 - 1);
    let mut d = lo + modp(pa - pb - lo, g);
    let inv = inv_mod(p / g, q / g);
    let mut out = Vec::new();
    while d < b.on as i128 {
        let t = modp((pb + d - pa) / g * inv, q / g);
        out.push(modp(pa + p * t, l));
        d += g;
    }
    (l, out)
}

/// The blocks of `s` meeting `[0, w)`: `(start, clipped start, clipped end)`.
pub fn clipped_blocks(s: &Stripe, w: i128) -> impl Iterator<Item = (i128, i128, i128)> {
    let (n, first) = s.blocks_in(0, w);
    let (p, on) = (s.period() as i128, s.on() as i128);
    (0..n).map(move |k| {
        let x = first + k * p;
        (x, x.max(0), (x + on).min(w))
    })
}

/// How many blocks [`crt_copies`] would visit.
pub fn crt_count(a: &Stripe, b: &Stripe) -> i128 {
    let (p, q) = (a.period() as i128, b.period() as i128);
    let g = gcd(p, q);
    let span = a.on as i128 + b.on as i128 - 1;
    (q / g).min(span / g + 1)
}
