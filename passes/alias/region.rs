//! Regions: one sett per dimension of a shape (their outer product restricted
//! to the shape), with set operations and the view maps alias analysis uses to
//! move footprints between a view and the tensor it looks into.

use std::fmt;

use super::regions::Regions;
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

type Res<T> = Result<T, RegionError>;

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
struct DimSlice {
    picked: Sett,
    len: i64,
    reversed: bool,
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
pub(crate) fn volume(shape: &[i64]) -> Res<i64> {
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
    shape: Vec<i64>,
    setts: Vec<Sett>,
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
    fn canonical(shape: Vec<i64>, setts: Vec<Sett>) -> Region {
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

    fn same_shape(&self, other: &Region) -> Res<()> {
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

    fn regions(&self, list: Vec<Region>) -> Regions {
        Regions::from_disjoint(self.shape.clone(), list)
    }

    /// Intersection.
    pub fn intersect(&self, other: &Region) -> Result<Regions, RegionError> {
        self.same_shape(other)?;
        if self.is_empty() || other.is_empty() {
            return Ok(self.regions(vec![]));
        }
        let mut dims = Vec::with_capacity(self.rank());
        for ((a, b), &n) in self.setts.iter().zip(&other.setts).zip(&self.shape) {
            dims.push(a.intersect_in(b, n)?);
        }
        Ok(self.regions(Region::product(&self.shape, dims)))
    }

    /// Complement within the shape: the pieces differ from `self` first in
    /// dimension `d` and agree with it before `d`.
    pub fn complement(&self) -> Result<Regions, RegionError> {
        if self.is_empty() {
            return Ok(self.regions(vec![Region::full(&self.shape)?]));
        }
        let mut out = Vec::new();
        for (d, (s, &n)) in self.setts.iter().zip(&self.shape).enumerate() {
            let mut dims: Vec<Vec<Sett>> =
                self.setts[..d].iter().map(|s| vec![s.clone()]).collect();
            dims.push(s.complement_in(n));
            dims.extend((d + 1..self.rank()).map(|_| vec![Sett::all()]));
            out.extend(Region::product(&self.shape, dims));
        }
        Ok(self.regions(out))
    }

    /// `self \ other`.
    pub fn difference(&self, other: &Region) -> Result<Regions, RegionError> {
        self.same_shape(other)?;
        if self.disjoint(other)? {
            return Ok(self.regions(vec![self.clone()]));
        }
        let mut out = Vec::new();
        for piece in other.complement()?.regions() {
            out.extend(self.intersect(piece)?.regions().iter().cloned());
        }
        Ok(self.regions(out))
    }

    /// Union as disjoint regions.
    pub fn union(&self, other: &Region) -> Result<Regions, RegionError> {
        let mut out = other.difference(self)?.regions().to_vec();
        if !self.is_empty() {
            out.push(self.clone());
        }
        Ok(self.regions(out))
    }

    /// True if `other ⊆ self`.
    pub fn contains(&self, other: &Region) -> Result<bool, RegionError> {
        Ok(other.difference(self)?.is_empty())
    }

    /// True if both regions have the same elements.
    pub fn equivalent(&self, other: &Region) -> Result<bool, RegionError> {
        Ok(self.contains(other)? && other.contains(self)?)
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

    fn dim_slices(shape: &[i64], dims: &[SliceDim]) -> Res<Vec<DimSlice>> {
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

    /// The part of the sliced tensor whose elements come from this region.
    pub fn slice(&self, dims: &[SliceDim]) -> Result<Regions, RegionError> {
        let slices = Region::dim_slices(&self.shape, dims)?;
        let out_shape: Vec<i64> = slices.iter().map(|d| d.len).collect();
        if self.is_empty() {
            return Regions::empty(&out_shape);
        }
        let mut pieces = Vec::with_capacity(self.rank());
        for ((s, &n), d) in self.setts.iter().zip(&self.shape).zip(&slices) {
            let s = if d.reversed { s.reverse(n) } else { s.clone() };
            pieces.push(s.sample_in(&d.picked, n)?);
        }
        let list = Region::product(&out_shape, pieces);
        Ok(Regions::from_disjoint(out_shape, list))
    }

    /// Inverse of [`Region::slice`]: place this region of the sliced tensor
    /// into the coordinates of the full tensor of shape `full`.
    pub fn fill_into(&self, full: &[i64], dims: &[SliceDim]) -> Result<Regions, RegionError> {
        volume(full)?;
        let slices = Region::dim_slices(full, dims)?;
        let sliced: Vec<i64> = slices.iter().map(|d| d.len).collect();
        if sliced != self.shape {
            return Err(RegionError::ShapeMismatch {
                left: self.shape.clone(),
                right: sliced,
            });
        }
        if self.is_empty() {
            return Regions::empty(full);
        }
        let mut pieces = Vec::with_capacity(self.rank());
        for ((s, &n), d) in self.setts.iter().zip(full).zip(&slices) {
            let placed = s.fill_in(&d.picked, n)?;
            pieces.push(if d.reversed {
                placed.iter().map(|p| p.reverse(n)).collect()
            } else {
                placed
            });
        }
        let list = Region::product(full, pieces);
        Ok(Regions::from_disjoint(full.to_vec(), list))
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

    /// The same elements viewed with a new shape (row-major); may need several
    /// regions.
    pub fn reshape(&self, to: &[i64]) -> Result<Regions, RegionError> {
        let total = volume(&self.shape)?;
        if volume(to)? != total {
            return Err(RegionError::ShapeMismatch {
                left: self.shape.clone(),
                right: to.to_vec(),
            });
        }
        if self.is_empty() {
            return Regions::empty(to);
        }
        let flat = self.flatten()?;
        let list = unflatten_nd(&flat, to)?
            .into_iter()
            .map(|setts| Region::canonical(to.to_vec(), setts))
            .filter(|r| !r.is_empty())
            .collect();
        Ok(Regions::from_disjoint(to.to_vec(), list))
    }
}

/// Split a 1-D sett over `[0, volume(dims))` into disjoint per-dim products.
fn unflatten_nd(v: &Sett, dims: &[i64]) -> Res<Vec<Vec<Sett>>> {
    let Some((&n0, rest)) = dims.split_first() else {
        return Ok(if v.contains(0) { vec![vec![]] } else { vec![] });
    };
    let cols = volume(rest)?;
    if rest.is_empty() || cols == 0 || n0 == 0 {
        return Ok(v
            .canonical_in(n0 * cols.max(1))
            .map(|s| vec![s])
            .into_iter()
            .collect());
    }
    let mut out = Vec::new();
    for (rows, c) in v.unflatten_in(cols, n0 * cols)? {
        for mut tail in unflatten_nd(&c, rest)? {
            tail.insert(0, rows.clone());
            out.push(tail);
        }
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Triples = Vec<(i64, i64, i64)>;

    fn member(t: &[(i64, i64, i64)], z: i64) -> bool {
        match t.split_first() {
            None => true,
            Some((&(on, off, ph), rest)) => {
                let u = (z - ph).rem_euclid(on + off);
                u < on && member(rest, u)
            }
        }
    }

    fn triples() -> impl Strategy<Value = Triples> {
        let stripe = (0i64..4, 0i64..4, -4i64..4).prop_filter("period 0", |s| s.0 + s.1 > 0);
        prop::collection::vec(stripe, 0..=2)
    }

    /// A shape (rank 1..=3, dims 1..=5) with per-dimension stripe triples.
    fn spec() -> impl Strategy<Value = (Vec<i64>, Vec<Triples>)> {
        (1usize..=3).prop_flat_map(|rank| {
            (
                prop::collection::vec(1i64..=5, rank),
                prop::collection::vec(triples(), rank),
            )
        })
    }

    fn region(shape: &[i64], t: &[Triples]) -> Region {
        let setts = t.iter().map(|t| Sett::from_triples(t).unwrap()).collect();
        Region::new(shape.to_vec(), setts).unwrap()
    }

    fn brute(shape: &[i64], t: &[Triples], p: &[i64]) -> bool {
        p.iter()
            .zip(shape)
            .zip(t)
            .all(|((&z, &n), t)| (0..n).contains(&z) && member(t, z))
    }

    fn points(shape: &[i64]) -> Vec<Vec<i64>> {
        let mut out = vec![vec![]];
        for &n in shape {
            out = out
                .into_iter()
                .flat_map(|p| {
                    (0..n).map(move |z| {
                        let mut q = p.clone();
                        q.push(z);
                        q
                    })
                })
                .collect();
        }
        out
    }

    fn same_shape_pair() -> impl Strategy<Value = (Vec<i64>, Vec<Triples>, Vec<Triples>)> {
        spec().prop_flat_map(|(shape, ta)| {
            let rank = shape.len();
            (
                Just(shape),
                Just(ta),
                prop::collection::vec(triples(), rank),
            )
        })
    }

    #[test]
    fn display_formats() {
        let r = Region::new(
            vec![8, 5],
            vec![
                Sett::from_triples(&[(1, 3, 0)]).unwrap(),
                Sett::from_triples(&[(4, 1, 0)]).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(r.to_string(), "{[(1,3,0)] x [(4,1,0)]}");
        assert_eq!(Region::empty(&[3]).unwrap().to_string(), "{}");
        assert_eq!(Region::full(&[]).unwrap().to_string(), "{scalar}");
    }

    #[test]
    fn reshape_of_columns_needs_two_regions() {
        let cols = Sett::from_triples(&[(1, 1, 0)]).unwrap();
        let r = Region::new(vec![3, 4], vec![Sett::all(), cols]).unwrap();
        let out = r.reshape(&[4, 3]).unwrap();
        assert_eq!(out.regions().len(), 2, "{out}");
        assert_eq!(
            out.to_string(),
            "{[(1,1,0)] x [(1,1,0)]} | {[(1,1,1)] x [(1,2,1)]}"
        );
    }

    #[test]
    fn errors_are_reported() {
        assert!(matches!(Region::full(&[-1]), Err(RegionError::BadShape(_))));
        let r = Region::full(&[2, 3]).unwrap();
        assert!(matches!(r.permute(&[0, 0]), Err(RegionError::BadDims(_))));
        assert!(matches!(
            r.reshape(&[5]),
            Err(RegionError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            r.broadcast(&[3, 3]),
            Err(RegionError::BadBroadcast { .. })
        ));
        let bad = [SliceDim::new(0, 2, 0), SliceDim::full(3)];
        assert_eq!(r.slice(&bad), Err(RegionError::BadSlice));
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(256) })]

        #[test]
        fn set_ops((shape, ta, tb) in same_shape_pair()) {
            let (a, b) = (region(&shape, &ta), region(&shape, &tb));
            let pts = points(&shape);
            let ma = |p: &[i64]| brute(&shape, &ta, p);
            let mb = |p: &[i64]| brute(&shape, &tb, p);
            let i = a.intersect(&b).unwrap();
            let d = a.difference(&b).unwrap();
            let u = a.union(&b).unwrap();
            let c = a.complement().unwrap();
            for p in &pts {
                prop_assert_eq!(a.contains_point(p), ma(p));
                prop_assert_eq!(i.contains_point(p), ma(p) && mb(p), "{:?} {}", p, i);
                prop_assert_eq!(d.contains_point(p), ma(p) && !mb(p), "{:?} {}", p, d);
                prop_assert_eq!(u.contains_point(p), ma(p) || mb(p), "{:?} {}", p, u);
                prop_assert_eq!(c.contains_point(p), !ma(p), "{:?} {}", p, c);
            }
            let count = |f: &dyn Fn(&[i64]) -> bool| pts.iter().filter(|p| f(p)).count() as i128;
            // Disjoint pieces: counts add up exactly.
            prop_assert_eq!(i.count(), count(&|p| ma(p) && mb(p)));
            prop_assert_eq!(d.count(), count(&|p| ma(p) && !mb(p)));
            prop_assert_eq!(u.count(), count(&|p| ma(p) || mb(p)));
            prop_assert_eq!(c.count(), count(&|p| !ma(p)));
            prop_assert_eq!(a.count(), count(&ma));
            let sub = pts.iter().all(|p| !mb(p) || ma(p));
            let sup = pts.iter().all(|p| !ma(p) || mb(p));
            prop_assert_eq!(a.contains(&b).unwrap(), sub);
            prop_assert_eq!(a.equivalent(&b).unwrap(), sub && sup);
            prop_assert_eq!(a.disjoint(&b).unwrap(), pts.iter().all(|p| !(ma(p) && mb(p))));
        }

        #[test]
        fn permute_and_reverse((shape, t) in spec(), seed in 0usize..6, mask in 0u8..8) {
            let r = region(&shape, &t);
            let rank = shape.len();
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.rotate_left(seed % rank);
            if seed % 2 == 1 { perm.reverse(); }
            let pr = r.permute(&perm).unwrap();
            let dims: Vec<usize> = (0..rank).filter(|d| mask & (1 << d) != 0).collect();
            let rv = r.reverse(&dims).unwrap();
            for p in points(&shape) {
                let q: Vec<i64> = perm.iter().map(|&d| p[d]).collect();
                prop_assert_eq!(pr.contains_point(&q), brute(&shape, &t, &p));
                let mut m = p.clone();
                for &d in &dims { m[d] = shape[d] - 1 - p[d]; }
                prop_assert_eq!(rv.contains_point(&m), brute(&shape, &t, &p));
            }
        }

        #[test]
        fn broadcast_and_reduce((shape, t) in spec(), lead in 1i64..3, ones in 0u8..8) {
            // Input: some dims squeezed to 1; output: a new leading dim + full dims.
            let small: Vec<i64> = shape.iter().enumerate()
                .map(|(d, &n)| if ones & (1 << d) != 0 { 1 } else { n }).collect();
            let r = region(&small, &t);
            let mut big = vec![lead];
            big.extend_from_slice(&shape);
            let b = r.broadcast(&big).unwrap();
            for p in points(&big) {
                let src: Vec<i64> = p[1..].iter().zip(&small).map(|(&z, &n)| if n == 1 { 0 } else { z }).collect();
                prop_assert_eq!(b.contains_point(&p), brute(&small, &t, &src), "{:?} {}", p, b);
            }
            // Reduce a random region of the output back onto the input.
            let mut tb = vec![vec![(1, 1, 0)]];
            tb.extend(t.iter().cloned());
            let o = region(&big, &tb);
            let red = o.reduce(&small).unwrap();
            for q in points(&small) {
                let hit = points(&big).iter().any(|p| {
                    brute(&big, &tb, p) && p[1..].iter().zip(&small).zip(&q)
                        .all(|((&z, &n), &s)| if n == 1 { s == 0 } else { z == s })
                });
                prop_assert_eq!(red.contains_point(&q), hit, "{:?} {}", q, red);
            }
        }

        #[test]
        fn slice_and_fill(
            (shape, t) in spec(),
            sl in prop::collection::vec((-2i64..7, -2i64..7, -3i64..4), 3),
            to in prop::collection::vec(triples(), 3),
        ) {
            let rank = shape.len();
            let dims: Vec<SliceDim> = sl[..rank].iter()
                .map(|&(a, b, s)| SliceDim::new(a, b, if s == 0 { 1 } else { s })).collect();
            // Brute-force index lists of each sliced dimension.
            let picks: Vec<Vec<i64>> = dims.iter().zip(&shape).map(|(d, &n)| {
                let mut v = Vec::new();
                let mut i = d.start.clamp(if d.step > 0 { 0 } else { -1 }, if d.step > 0 { n } else { n - 1 });
                let stop = d.stop.clamp(if d.step > 0 { 0 } else { -1 }, if d.step > 0 { n } else { n - 1 });
                while (d.step > 0 && i < stop) || (d.step < 0 && i > stop) {
                    v.push(i);
                    i += d.step;
                }
                v
            }).collect();
            let out_shape: Vec<i64> = picks.iter().map(|v| v.len() as i64).collect();
            let r = region(&shape, &t);
            let s = r.slice(&dims).unwrap();
            prop_assert_eq!(s.shape(), &out_shape[..]);
            for o in points(&out_shape) {
                let src: Vec<i64> = o.iter().zip(&picks).map(|(&i, v)| v[i as usize]).collect();
                prop_assert_eq!(s.contains_point(&o), brute(&shape, &t, &src), "{:?} {}", o, s);
            }
            let ro = region(&out_shape, &to[..rank]);
            let f = ro.fill_into(&shape, &dims).unwrap();
            for p in points(&shape) {
                let idx: Option<Vec<i64>> = p.iter().zip(&picks)
                    .map(|(&z, v)| v.iter().position(|&x| x == z).map(|i| i as i64)).collect();
                let want = idx.is_some_and(|o| brute(&out_shape, &to[..rank], &o));
                prop_assert_eq!(f.contains_point(&p), want, "{:?} {}", p, f);
            }
        }

        #[test]
        fn reshape_round_trip((shape, t) in spec(), pick in 0usize..1000) {
            let total: i64 = shape.iter().product();
            let mut targets = vec![vec![total]];
            for a in 1..=total {
                if total % a != 0 { continue; }
                targets.push(vec![a, total / a]);
                for b in 1..=total / a {
                    if (total / a) % b == 0 { targets.push(vec![a, b, total / a / b]); }
                }
            }
            let to = targets[pick % targets.len()].clone();
            let r = region(&shape, &t);
            let out = r.reshape(&to).unwrap();
            let strides = |s: &[i64], p: &[i64]| p.iter().zip(s).fold(0, |acc, (&z, &n)| acc * n + z);
            let flat: Vec<bool> = {
                let mut v = vec![false; total as usize];
                for p in points(&shape) { v[strides(&shape, &p) as usize] = brute(&shape, &t, &p); }
                v
            };
            for q in points(&to) {
                prop_assert_eq!(out.contains_point(&q), flat[strides(&to, &q) as usize], "{:?} {}", q, out);
            }
            prop_assert_eq!(out.count(), r.count());
            let back = out.reshape(&shape).unwrap();
            prop_assert!(back.equivalent(&Regions::from_region(r.clone())).unwrap(), "{} vs {}", back, r);
        }
    }
}
