//! Regions lists: a union of pairwise-disjoint regions of one shape, the
//! general footprint of a tensor view inside its allocation.

use std::collections::BTreeMap;
use std::fmt;

use super::region::{volume, Region, RegionError, SliceDim};
use super::sett::{merge_disjoint, Sett};

type Res<T> = Result<T, RegionError>;

/// A union of pairwise-disjoint, non-empty regions of the same shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Regions {
    shape: Vec<i64>,
    regions: Vec<Region>,
}

impl Regions {
    /// The union of `regions` (which may overlap), all of shape `shape`.
    pub fn new(shape: Vec<i64>, regions: Vec<Region>) -> Result<Regions, RegionError> {
        let mut acc = Regions::empty(&shape)?;
        for r in regions {
            acc = acc.union(&Regions::from_region(r))?;
        }
        Ok(acc)
    }

    /// A single region.
    pub fn from_region(r: Region) -> Regions {
        Regions::from_disjoint(r.shape().to_vec(), vec![r])
    }

    /// Trusted constructor: `list` must be pairwise disjoint (it is compacted).
    pub(crate) fn from_disjoint(shape: Vec<i64>, list: Vec<Region>) -> Regions {
        Regions {
            shape,
            regions: compact(list),
        }
    }

    /// No element of `shape`.
    pub fn empty(shape: &[i64]) -> Result<Regions, RegionError> {
        volume(shape)?;
        Ok(Regions {
            shape: shape.to_vec(),
            regions: vec![],
        })
    }

    /// Every element of `shape`.
    pub fn full(shape: &[i64]) -> Result<Regions, RegionError> {
        Ok(Regions::from_region(Region::full(shape)?))
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The disjoint regions.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// True if there is no element.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Total number of elements.
    pub fn count(&self) -> i128 {
        self.regions.iter().map(Region::count).sum()
    }

    /// Total number of stripes over all regions (a size measure).
    pub fn num_stripes(&self) -> usize {
        let setts = self.regions.iter().flat_map(|r| r.setts());
        setts.map(Sett::depth).sum()
    }

    /// Membership of one multi-index.
    pub fn contains_point(&self, p: &[i64]) -> bool {
        self.regions.iter().any(|r| r.contains_point(p))
    }

    fn same_shape(&self, other: &Regions) -> Res<()> {
        if self.shape != other.shape {
            return Err(RegionError::ShapeMismatch {
                left: self.shape.clone(),
                right: other.shape.clone(),
            });
        }
        Ok(())
    }

    fn with(&self, list: Vec<Region>) -> Regions {
        Regions::from_disjoint(self.shape.clone(), list)
    }

    /// Intersection.
    pub fn intersect(&self, other: &Regions) -> Result<Regions, RegionError> {
        self.same_shape(other)?;
        let mut out = Vec::new();
        for a in &self.regions {
            for b in &other.regions {
                out.extend_from_slice(a.intersect(b)?.regions());
            }
        }
        Ok(self.with(out))
    }

    /// `self \ other`.
    pub fn difference(&self, other: &Regions) -> Result<Regions, RegionError> {
        self.same_shape(other)?;
        let mut out = Vec::new();
        for a in &self.regions {
            let mut rest = vec![a.clone()];
            for b in &other.regions {
                let mut next = Vec::new();
                for r in &rest {
                    next.extend_from_slice(r.difference(b)?.regions());
                }
                rest = next;
            }
            out.extend(rest);
        }
        Ok(self.with(out))
    }

    /// Union as disjoint regions.
    pub fn union(&self, other: &Regions) -> Result<Regions, RegionError> {
        let mut out = other.difference(self)?.regions;
        out.extend(self.regions.iter().cloned());
        Ok(self.with(out))
    }

    /// Complement within the shape.
    pub fn complement(&self) -> Result<Regions, RegionError> {
        Regions::full(&self.shape)?.difference(self)
    }

    /// True if `other ⊆ self`.
    pub fn contains(&self, other: &Regions) -> Result<bool, RegionError> {
        Ok(other.difference(self)?.is_empty())
    }

    /// True if both have the same elements.
    pub fn equivalent(&self, other: &Regions) -> Result<bool, RegionError> {
        Ok(self.contains(other)? && other.contains(self)?)
    }

    /// True if no element is shared.
    pub fn disjoint(&self, other: &Regions) -> Result<bool, RegionError> {
        self.same_shape(other)?;
        for a in &self.regions {
            for b in &other.regions {
                if !a.disjoint(b)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Map every region by an injective view op and collect the results.
    fn map_each(
        &self,
        shape: Vec<i64>,
        f: impl Fn(&Region) -> Res<Regions>,
    ) -> Result<Regions, RegionError> {
        if let [r] = &self.regions[..] {
            // One region's image is already compacted.
            let image = f(r)?;
            debug_assert_eq!(image.shape, shape);
            return Ok(image);
        }
        let mut out = Vec::new();
        for r in &self.regions {
            out.extend_from_slice(f(r)?.regions());
        }
        Ok(Regions::from_disjoint(shape, out))
    }

    /// See [`Region::permute`].
    pub fn permute(&self, perm: &[usize]) -> Result<Regions, RegionError> {
        let shape = Region::empty(&self.shape)?.permute(perm)?.shape().to_vec();
        self.map_each(shape, |r| Ok(Regions::from_region(r.permute(perm)?)))
    }

    /// See [`Region::reverse`].
    pub fn reverse(&self, dims: &[usize]) -> Result<Regions, RegionError> {
        Region::empty(&self.shape)?.reverse(dims)?;
        self.map_each(self.shape.clone(), |r| {
            Ok(Regions::from_region(r.reverse(dims)?))
        })
    }

    /// See [`Region::broadcast`].
    pub fn broadcast(&self, to: &[i64]) -> Result<Regions, RegionError> {
        Region::empty(&self.shape)?.broadcast(to)?;
        self.map_each(to.to_vec(), |r| Ok(Regions::from_region(r.broadcast(to)?)))
    }

    /// See [`Region::reduce`]; images of different regions may overlap, so
    /// they are unioned.
    pub fn reduce(&self, from: &[i64]) -> Result<Regions, RegionError> {
        Region::empty(&self.shape)?.reduce(from)?;
        let mut acc = Regions::empty(from)?;
        for r in &self.regions {
            acc = acc.union(&Regions::from_region(r.reduce(from)?))?;
        }
        Ok(acc)
    }

    /// See [`Region::slice`].
    pub fn slice(&self, dims: &[SliceDim]) -> Result<Regions, RegionError> {
        let shape = Region::sliced_shape(&self.shape, dims)?;
        self.map_each(shape, |r| r.slice(dims))
    }

    /// See [`Region::fill_into`].
    pub fn fill_into(&self, full: &[i64], dims: &[SliceDim]) -> Result<Regions, RegionError> {
        Region::empty(&self.shape)?.fill_into(full, dims)?;
        self.map_each(full.to_vec(), |r| r.fill_into(full, dims))
    }

    /// See [`Region::reshape`].
    pub fn reshape(&self, to: &[i64]) -> Result<Regions, RegionError> {
        Region::empty(&self.shape)?.reshape(to)?;
        self.map_each(to.to_vec(), |r| r.reshape(to))
    }
}

/// Merge disjoint regions that agree on all dimensions but one whenever the
/// differing setts combine into fewer setts.
fn compact(list: Vec<Region>) -> Vec<Region> {
    let mut list: Vec<Region> = list.into_iter().filter(|r| !r.is_empty()).collect();
    if list.len() > 1 {
        let rank = list[0].rank();
        loop {
            let before = list.len();
            for d in 0..rank {
                list = merge_along(list, d);
            }
            if list.len() >= before {
                break;
            }
        }
    }
    list.sort();
    list
}

/// One pass of [`compact`] along dimension `d`. Regions alone in their group are kept as
/// they are: they are already canonical, and rebuilding them dominated the analysis' time.
fn merge_along(list: Vec<Region>, d: usize) -> Vec<Region> {
    let mut groups: BTreeMap<Vec<&Sett>, Vec<usize>> = BTreeMap::new();
    for (i, r) in list.iter().enumerate() {
        let key = r.setts().iter().enumerate().filter(|&(k, _)| k != d);
        groups
            .entry(key.map(|(_, s)| s).collect())
            .or_default()
            .push(i);
    }
    let mut merged_groups = Vec::new();
    let mut keep = vec![false; list.len()];
    for members in groups.into_values() {
        if let [i] = members[..] {
            keep[i] = true;
            continue;
        }
        let setts = members.iter().map(|&i| list[i].setts()[d].clone());
        let merged = merge_disjoint(setts.collect(), list[0].shape()[d]);
        if merged.len() >= members.len() {
            members.iter().for_each(|&i| keep[i] = true);
        } else {
            merged_groups.push((members[0], merged));
        }
    }
    let mut out: Vec<Region> = Vec::with_capacity(list.len());
    for (first, merged) in merged_groups {
        let r = &list[first];
        for s in merged {
            let mut v = r.setts().to_vec();
            v[d] = s;
            // Setts are already canonical in their window, so this cannot fail.
            if let Ok(r) = Region::new(r.shape().to_vec(), v) {
                out.push(r);
            }
        }
    }
    out.extend(
        list.into_iter()
            .zip(keep)
            .filter_map(|(r, k)| k.then_some(r)),
    );
    out
}

impl fmt::Display for Regions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.regions.is_empty() {
            return f.write_str("{}");
        }
        for (i, r) in self.regions.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// The operations of one [`Region`] whose result takes several regions.
impl Region {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A membership test of the points of a shape.
    pub(super) type Member<'a> = &'a dyn Fn(&[i64]) -> bool;

    /// Checks the intersection, difference, union and complement of two sets with memberships
    /// `ma` and `mb` point by point over `pts`, and by count (the pieces are disjoint, so
    /// their counts add up exactly).
    pub(super) fn check_set_ops(
        pts: &[Vec<i64>],
        ma: Member,
        mb: Member,
        [i, d, u, c]: [&Regions; 4],
    ) -> Result<(), TestCaseError> {
        for p in pts {
            prop_assert_eq!(i.contains_point(p), ma(p) && mb(p), "{:?} {}", p, i);
            prop_assert_eq!(d.contains_point(p), ma(p) && !mb(p), "{:?} {}", p, d);
            prop_assert_eq!(u.contains_point(p), ma(p) || mb(p), "{:?} {}", p, u);
            prop_assert_eq!(c.contains_point(p), !ma(p), "{:?} {}", p, c);
        }
        let count = |f: &dyn Fn(&[i64]) -> bool| pts.iter().filter(|p| f(p)).count() as i128;
        prop_assert_eq!(i.count(), count(&|p| ma(p) && mb(p)));
        prop_assert_eq!(d.count(), count(&|p| ma(p) && !mb(p)));
        prop_assert_eq!(u.count(), count(&|p| ma(p) || mb(p)));
        prop_assert_eq!(c.count(), count(&|p| !ma(p)));
        Ok(())
    }

    fn full(shape: &[i64]) -> Regions {
        Regions::full(shape).unwrap()
    }

    fn sl(start: i64, stop: i64, step: i64) -> SliceDim {
        SliceDim::new(start, stop, step)
    }

    /// Footprint in the base tensor of the view `base[dims]` (whole view).
    fn sliced(base: &[i64], dims: &[SliceDim]) -> Regions {
        let view = Region::sliced_shape(base, dims).unwrap();
        full(&view).fill_into(base, dims).unwrap()
    }

    #[test]
    fn worked_case_reshape_slice_vs_strided() {
        // A = f32[24]; B = A.reshape([4, 6])[:, 3:6]; C = A[0:24:7].
        let b = sliced(&[4, 6], &[sl(0, 4, 1), sl(3, 6, 1)])
            .reshape(&[24])
            .unwrap();
        let c = sliced(&[24], &[sl(0, 24, 7)]);
        assert_eq!(b.count(), 12);
        assert_eq!(c.count(), 4);
        assert!(!b.disjoint(&c).unwrap());
        let i = b.intersect(&c).unwrap();
        assert_eq!(i.count(), 1);
        assert!(i.contains_point(&[21]));
        assert_eq!(i.to_string(), "{[(1,23,21)]}");
    }

    #[test]
    fn worked_case_cube_corner_vs_stride_five() {
        // A = f32[27]; B = A.reshape([3, 3, 3])[0:2, 0:2, 0:2]; C = A[2::5].
        let b = sliced(&[3, 3, 3], &[sl(0, 2, 1), sl(0, 2, 1), sl(0, 2, 1)])
            .reshape(&[27])
            .unwrap();
        let c = sliced(&[27], &[sl(2, 27, 5)]);
        assert_eq!(b.count(), 8);
        let i = b.intersect(&c).unwrap();
        assert_eq!(i.count(), 1);
        assert!(i.contains_point(&[12]));
    }

    #[test]
    fn worked_case_reversed_slice_is_same_set() {
        // A = f32[10]: A[8:2:-2] and A[4:10:2] cover the same elements.
        let b = sliced(&[10], &[sl(8, 2, -2)]);
        let c = sliced(&[10], &[sl(4, 10, 2)]);
        assert!(b.equivalent(&c).unwrap());
        assert_eq!(b, c);
        assert_eq!(b.count(), 3);
    }

    /// Footprint in X (m x m) of `tiled(X) = X.reshape([m²/4, 4])[:, 0:2]
    /// .reshape([4, m²/8])[0:2, :].reshape([m/2, m/2])`, computed backwards.
    fn tiled(m: i64) -> Regions {
        let mm = m * m;
        let v = full(&[m / 2, m / 2]).reshape(&[2, mm / 8]).unwrap();
        let v = v
            .fill_into(&[4, mm / 8], &[sl(0, 2, 1), sl(0, mm / 8, 1)])
            .unwrap();
        let v = v.reshape(&[mm / 4, 2]).unwrap();
        let v = v
            .fill_into(&[mm / 4, 4], &[sl(0, mm / 4, 1), sl(0, 2, 1)])
            .unwrap();
        v.reshape(&[m, m]).unwrap()
    }

    /// B = tiled(A) and C = tiled(A[1:m-3, 1:m-3]) as footprints in A (m x m).
    fn tile_footprints(m: i64) -> (Regions, Regions) {
        let window = [sl(1, m - 3, 1), sl(1, m - 3, 1)];
        let c = tiled(m - 4).fill_into(&[m, m], &window).unwrap();
        (tiled(m), c)
    }

    /// The same views on explicit index arrays (row-major flat A indices).
    fn tiled_brute(ids: Vec<i64>, m: i64) -> Vec<i64> {
        let mm = (m * m) as usize;
        let step1: Vec<i64> = (0..mm / 4)
            .flat_map(|r| [ids[4 * r], ids[4 * r + 1]])
            .collect();
        step1[..mm / 4].to_vec()
    }

    #[test]
    fn tile_footprint_size_does_not_depend_on_n() {
        let (b16, c16) = tile_footprints(16);
        let (bbig, cbig) = tile_footprints(1 << 20);
        let i16 = b16.intersect(&c16).unwrap();
        let ibig = bbig.intersect(&cbig).unwrap();
        let size = |r: &Regions| (r.regions().len(), r.num_stripes());
        assert_eq!(size(&b16), size(&bbig), "{b16} vs {bbig}");
        assert_eq!(size(&c16), size(&cbig), "{c16} vs {cbig}");
        assert_eq!(size(&i16), size(&ibig), "{i16} vs {ibig}");
        assert_eq!(bbig.count(), (1i128 << 40) / 4);
        // Check the small case against explicit index arrays.
        let m = 16i64;
        let a: Vec<i64> = (0..m * m).collect();
        let b_ids = tiled_brute(a.clone(), m);
        let sub: Vec<i64> = a
            .iter()
            .copied()
            .filter(|&z| {
                let (r, c) = (z / m, z % m);
                (1..m - 3).contains(&r) && (1..m - 3).contains(&c)
            })
            .collect();
        let c_ids = tiled_brute(sub, m - 4);
        for z in 0..m * m {
            let p = [z / m, z % m];
            assert_eq!(b16.contains_point(&p), b_ids.contains(&z), "B at {p:?}");
            assert_eq!(c16.contains_point(&p), c_ids.contains(&z), "C at {p:?}");
            let both = b_ids.contains(&z) && c_ids.contains(&z);
            assert_eq!(i16.contains_point(&p), both, "B∩C at {p:?}");
        }
        assert!(!b16.disjoint(&c16).unwrap());
        assert!(!bbig.disjoint(&cbig).unwrap());
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(128) })]

        #[test]
        fn regions_set_ops(
            shape in prop::collection::vec(1i64..=4, 2),
            ta in prop::collection::vec(prop::collection::vec((0i64..4, 0i64..4, -3i64..3), 0..=2), 6),
        ) {
            let mk = |t: &[(i64, i64, i64)]| {
                let t: Vec<_> = t.iter().copied().filter(|s| s.0 + s.1 > 0).collect();
                Sett::from_triples(&t).unwrap()
            };
            let reg = |i: usize| Region::new(shape.clone(), vec![mk(&ta[i]), mk(&ta[i + 1])]).unwrap();
            let a = Regions::new(shape.clone(), vec![reg(0), reg(2)]).unwrap();
            let b = Regions::new(shape.clone(), vec![reg(4), reg(1)]).unwrap();
            let pts: Vec<Vec<i64>> = (0..shape[0]).flat_map(|x| (0..shape[1]).map(move |y| vec![x, y])).collect();
            let ma = |p: &[i64]| reg(0).contains_point(p) || reg(2).contains_point(p);
            let mb = |p: &[i64]| reg(4).contains_point(p) || reg(1).contains_point(p);
            let u = a.union(&b).unwrap();
            let ops = [&a.intersect(&b).unwrap(), &a.difference(&b).unwrap(), &u, &a.complement().unwrap()];
            check_set_ops(&pts, &ma, &mb, ops)?;
            for p in &pts {
                prop_assert_eq!(a.contains_point(p), ma(p));
            }
            prop_assert_eq!(a.count(), pts.iter().filter(|p| ma(p)).count() as i128);
            prop_assert_eq!(a.contains(&b).unwrap(), pts.iter().all(|p| !mb(p) || ma(p)));
            prop_assert_eq!(a.disjoint(&b).unwrap(), pts.iter().all(|p| !(ma(p) && mb(p))));
            prop_assert_eq!(a.equivalent(&b).unwrap(), pts.iter().all(|p| ma(p) == mb(p)));
            // Views of a union act region by region.
            let t = u.permute(&[1, 0]).unwrap().reverse(&[0]).unwrap();
            for p in &pts {
                let q = [shape[1] - 1 - p[1], p[0]];
                prop_assert_eq!(t.contains_point(&q), ma(p) || mb(p));
            }
            let back = u.reshape(&[shape[0] * shape[1]]).unwrap().reshape(&shape).unwrap();
            prop_assert!(back.equivalent(&u).unwrap());
        }
    }
}

#[cfg(test)]
mod region_tests {
    use super::super::sett::tests::{member, Triples};
    use super::tests::check_set_ops;
    use super::*;
    use proptest::prelude::*;

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
            let ops = [&a.intersect(&b).unwrap(), &a.difference(&b).unwrap(), &a.union(&b).unwrap(), &a.complement().unwrap()];
            check_set_ops(&pts, &ma, &mb, ops)?;
            for p in &pts {
                prop_assert_eq!(a.contains_point(p), ma(p));
            }
            prop_assert_eq!(a.count(), pts.iter().filter(|p| ma(p)).count() as i128);
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
