//! Regions: one sett per dimension of a shape (their outer product restricted
//! to the shape), with the queries and view maps that give one region again
//! (permute, reverse, broadcast, reduce, flatten). The operations whose result
//! takes several regions (set operations, slices, reshapes) are in `regions.rs`,
//! which builds on this module; this one does not depend on it.

use std::fmt;

use super::sett::Sett;
use super::stripe::{SettError, Stripe};

/// Errors of region operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegionError {
    /// An error of the underlying sett algebra.
    Sett(SettError),
    /// A negative dimension or a shape whose element count overflows `i64`.
    BadShape(Vec<i64>),
    /// The number of setts (or slice dims) does not match the rank.
    RankMismatch {
        /// The rank of the shape.
        expected: usize,
        /// The number given.
        got: usize,
    },
    /// Two operands (or an operand and a target) have different shapes.
    ShapeMismatch {
        /// The operand's shape.
        left: Vec<i64>,
        /// The other shape.
        right: Vec<i64>,
    },
    /// A permutation that is not one, or a dimension index out of range.
    BadDims(Vec<usize>),
    /// A slice with step 0.
    BadSlice,
    /// Shapes that are not broadcast-compatible.
    BadBroadcast {
        /// The input shape.
        from: Vec<i64>,
        /// The output shape.
        to: Vec<i64>,
    },
}

impl From<SettError> for RegionError {
    fn from(e: SettError) -> Self {
        RegionError::Sett(e)
    }
}

impl fmt::Display for RegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionError::Sett(e) => write!(f, "{e}"),
            RegionError::BadShape(s) => write!(f, "invalid shape {s:?}"),
            RegionError::RankMismatch { expected, got } => {
                write!(f, "expected {expected} dimensions, got {got}")
            }
            RegionError::ShapeMismatch { left, right } => {
                write!(f, "shape mismatch: {left:?} vs {right:?}")
            }
            RegionError::BadDims(d) => write!(f, "invalid dimensions {d:?}"),
            RegionError::BadSlice => write!(f, "slice step must be non-zero"),
            RegionError::BadBroadcast { from, to } => {
                write!(f, "cannot broadcast {from:?} to {to:?}")
            }
        }
    }
}

impl std::error::Error for RegionError {}

pub(super) type Res<T> = Result<T, RegionError>;

/// One dimension of a slice, with Python-like `start:stop:step` meaning on
/// absolute indices (no wrap-around of negative indices; bounds are clamped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceDim {
    /// First index taken.
    pub start: i64,
    /// Exclusive bound.
    pub stop: i64,
    /// Non-zero stride; negative walks backwards from `start`.
    pub step: i64,
}

impl SliceDim {
    /// `start:stop:step`.
    pub fn new(start: i64, stop: i64, step: i64) -> SliceDim {
        SliceDim { start, stop, step }
    }

    /// The whole dimension `0:n:1`.
    pub fn full(n: i64) -> SliceDim {
        SliceDim::new(0, n, 1)
    }
}

/// The selected indices of one slice dimension, as a sett over `[0, n)` in
/// (possibly reversed) coordinates.
pub(super) struct DimSlice {
    pub(super) picked: Sett,
    pub(super) len: i64,
    pub(super) reversed: bool,
}

fn dim_slice(n: i64, sd: SliceDim) -> Res<DimSlice> {
    let (start, stop, step, reversed) = match sd.step {
        0 => return Err(RegionError::BadSlice),
        s if s > 0 => (sd.start.clamp(0, n), sd.stop.clamp(0, n), s as i128, false),
        s => {
            // Negative step: slice the mirrored dimension forwards.
            let (a, b) = (sd.start.clamp(-1, n - 1), sd.stop.clamp(-1, n - 1));
            (n - 1 - a, n - 1 - b, -(s as i128), true)
        }
    };
    let (start, stop) = (start as i128, stop as i128);
    let len = if stop > start {
        (stop - start + step - 1) / step
    } else {
        0
    };
    if len == 0 {
        return Ok(DimSlice {
            picked: Sett::empty(),
            len: 0,
            reversed,
        });
    }
    let span = (len - 1) * step + 1;
    let mut stripes = vec![Stripe::checked(span, n as i128 - span, start)?];
    if step > 1 {
        stripes.push(Stripe::checked(1, step - 1, 0)?);
    }
    Ok(DimSlice {
        picked: Sett::new(stripes),
        len: len as i64,
        reversed,
    })
}

/// Number of elements of a shape, if valid.
pub fn volume(shape: &[i64]) -> Res<i64> {
    let mut v: i128 = 1;
    for &d in shape {
        if d < 0 {
            return Err(RegionError::BadShape(shape.to_vec()));
        }
        v *= d as i128;
        if v > i64::MAX as i128 {
            return Err(RegionError::BadShape(shape.to_vec()));
        }
    }
    Ok(v as i64)
}

/// Outer product of per-dimension setts restricted to `[0, shape)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Region {
    pub(super) shape: Vec<i64>,
    pub(super) setts: Vec<Sett>,
}

impl Region {
    /// The region `setts[0] x setts[1] x ...` within `shape`.
    pub fn new(shape: Vec<i64>, setts: Vec<Sett>) -> Result<Region, RegionError> {
        volume(&shape)?;
        if setts.len() != shape.len() {
            return Err(RegionError::RankMismatch {
                expected: shape.len(),
                got: setts.len(),
            });
        }
        Ok(Region::canonical(shape, setts))
    }

    /// Canonicalise each dimension within its size; empty if any dimension is.
    pub(super) fn canonical(shape: Vec<i64>, setts: Vec<Sett>) -> Region {
        let canon: Option<Vec<Sett>> = setts
            .iter()
            .zip(&shape)
            .map(|(s, &n)| s.canonical_in(n))
            .collect();
        match canon {
            Some(setts) => Region { shape, setts },
            None => Region::empty_unchecked(shape),
        }
    }

    fn empty_unchecked(shape: Vec<i64>) -> Region {
        let setts = vec![Sett::empty(); shape.len()];
        Region { shape, setts }
    }

    /// Every element of `shape`.
    pub fn full(shape: &[i64]) -> Result<Region, RegionError> {
        Region::new(shape.to_vec(), vec![Sett::all(); shape.len()])
    }

    /// No element of `shape`.
    pub fn empty(shape: &[i64]) -> Result<Region, RegionError> {
        volume(shape)?;
        Ok(Region::empty_unchecked(shape.to_vec()))
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The per-dimension setts (canonical within each dimension's size).
    pub fn setts(&self) -> &[Sett] {
        &self.setts
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// True if the region has no element.
    pub fn is_empty(&self) -> bool {
        self.setts.iter().any(Sett::is_empty) || self.shape.contains(&0)
    }

    /// Number of elements.
    pub fn count(&self) -> i128 {
        if self.is_empty() {
            return 0;
        }
        let mut c = 1i128;
        for (s, &n) in self.setts.iter().zip(&self.shape) {
            c *= s.count(0, n);
        }
        c
    }

    /// Membership of one multi-index.
    pub fn contains_point(&self, p: &[i64]) -> bool {
        p.len() == self.rank()
            && !self.is_empty()
            && p.iter()
                .zip(&self.shape)
                .zip(&self.setts)
                .all(|((&z, &n), s)| (0..n).contains(&z) && s.contains(z))
    }

    pub(super) fn same_shape(&self, other: &Region) -> Res<()> {
        if self.shape != other.shape {
            return Err(RegionError::ShapeMismatch {
                left: self.shape.clone(),
                right: other.shape.clone(),
            });
        }
        Ok(())
    }

    /// Regions formed by every combination of the per-dimension pieces.
    pub(crate) fn product(shape: &[i64], dims: Vec<Vec<Sett>>) -> Vec<Region> {
        let mut out = vec![Vec::new()];
        for pieces in dims {
            let mut next = Vec::with_capacity(out.len() * pieces.len());
            for prefix in &out {
                for p in &pieces {
                    let mut v: Vec<Sett> = prefix.clone();
                    v.push(p.clone());
                    next.push(v);
                }
            }
            out = next;
        }
        out.into_iter()
            .map(|setts| Region::canonical(shape.to_vec(), setts))
            .filter(|r| !r.is_empty())
            .collect()
    }

    /// True if the regions share no element (some dimension is disjoint).
    pub fn disjoint(&self, other: &Region) -> Result<bool, RegionError> {
        self.same_shape(other)?;
        if self.is_empty() || other.is_empty() {
            return Ok(true);
        }
        for ((a, b), &n) in self.setts.iter().zip(&other.setts).zip(&self.shape) {
            if a.disjoint_in(b, n)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Dimension `i` of the result is dimension `perm[i]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Result<Region, RegionError> {
        let mut seen = vec![false; self.rank()];
        for &p in perm {
            if p >= self.rank() || std::mem::replace(&mut seen[p], true) {
                return Err(RegionError::BadDims(perm.to_vec()));
            }
        }
        if perm.len() != self.rank() {
            return Err(RegionError::BadDims(perm.to_vec()));
        }
        let shape = perm.iter().map(|&p| self.shape[p]).collect();
        let setts = perm.iter().map(|&p| self.setts[p].clone()).collect();
        Ok(Region { shape, setts })
    }

    /// Mirror the listed dimensions (`i ↦ n - 1 - i`).
    pub fn reverse(&self, dims: &[usize]) -> Result<Region, RegionError> {
        if dims.iter().any(|&d| d >= self.rank()) {
            return Err(RegionError::BadDims(dims.to_vec()));
        }
        if self.is_empty() {
            return Ok(self.clone());
        }
        let mut setts = self.setts.clone();
        for &d in dims {
            setts[d] = setts[d].reverse(self.shape[d]);
        }
        Ok(Region::canonical(self.shape.clone(), setts))
    }

    /// Checks numpy broadcasting from `from` to `to` (leading dims added).
    fn broadcast_ok(from: &[i64], to: &[i64]) -> Res<usize> {
        let bad = || RegionError::BadBroadcast {
            from: from.to_vec(),
            to: to.to_vec(),
        };
        let lead = to.len().checked_sub(from.len()).ok_or_else(bad)?;
        let ok = from
            .iter()
            .zip(&to[lead..])
            .all(|(&f, &t)| f == t || f == 1);
        if !ok {
            return Err(bad());
        }
        volume(to)?;
        Ok(lead)
    }

    /// The region of the broadcast output (shape `to`) whose elements come
    /// from this region of the input.
    pub fn broadcast(&self, to: &[i64]) -> Result<Region, RegionError> {
        let lead = Region::broadcast_ok(&self.shape, to)?;
        if self.is_empty() {
            return Region::empty(to);
        }
        let mut setts = vec![Sett::all(); lead];
        for (s, (&f, &t)) in self.setts.iter().zip(self.shape.iter().zip(&to[lead..])) {
            // An expanded size-1 dimension is read everywhere along the output.
            setts.push(if f == t { s.clone() } else { Sett::all() });
        }
        Region::new(to.to_vec(), setts)
    }

    /// Inverse of [`Region::broadcast`]: the input elements (shape `from`)
    /// read by this region of the broadcast output.
    pub fn reduce(&self, from: &[i64]) -> Result<Region, RegionError> {
        let lead = Region::broadcast_ok(from, &self.shape)?;
        if self.is_empty() {
            return Region::empty(from);
        }
        let pairs = self.setts[lead..]
            .iter()
            .zip(from.iter().zip(&self.shape[lead..]));
        let setts = pairs
            .map(|(s, (&f, &t))| if f == t { s.clone() } else { Sett::all() })
            .collect();
        Region::new(from.to_vec(), setts)
    }

    pub(super) fn dim_slices(shape: &[i64], dims: &[SliceDim]) -> Res<Vec<DimSlice>> {
        if dims.len() != shape.len() {
            return Err(RegionError::RankMismatch {
                expected: shape.len(),
                got: dims.len(),
            });
        }
        shape
            .iter()
            .zip(dims)
            .map(|(&n, &d)| dim_slice(n, d))
            .collect()
    }

    /// Shape of `shape` sliced by `dims`.
    pub fn sliced_shape(shape: &[i64], dims: &[SliceDim]) -> Result<Vec<i64>, RegionError> {
        Ok(Region::dim_slices(shape, dims)?
            .iter()
            .map(|d| d.len)
            .collect())
    }

    /// The region as a 1-D sett over `[0, volume)` (row-major).
    pub fn flatten(&self) -> Result<Sett, RegionError> {
        let total = volume(&self.shape)?;
        if self.is_empty() {
            return Ok(Sett::empty());
        }
        let mut flat = Sett::all();
        let mut size = 1i64;
        for (s, &n) in self.setts.iter().zip(&self.shape) {
            size *= n;
            flat = Sett::flatten(&flat, s, n)?
                .canonical_in(size)
                .unwrap_or_else(Sett::empty);
        }
        debug_assert_eq!(size, total);
        Ok(flat)
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("{}");
        }
        if self.rank() == 0 {
            return f.write_str("{scalar}");
        }
        f.write_str("{")?;
        for (i, s) in self.setts.iter().enumerate() {
            if i > 0 {
                f.write_str(" x ")?;
            }
            write!(f, "{s}")?;
        }
        f.write_str("}")
    }
}
