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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
            let i = a.intersect(&b).unwrap();
            let d = a.difference(&b).unwrap();
            let u = a.union(&b).unwrap();
            let c = a.complement().unwrap();
            for p in &pts {
                prop_assert_eq!(a.contains_point(p), ma(p));
                prop_assert_eq!(i.contains_point(p), ma(p) && mb(p));
                prop_assert_eq!(d.contains_point(p), ma(p) && !mb(p));
                prop_assert_eq!(u.contains_point(p), ma(p) || mb(p));
                prop_assert_eq!(c.contains_point(p), !ma(p));
            }
            let count = |f: &dyn Fn(&[i64]) -> bool| pts.iter().filter(|p| f(p)).count() as i128;
            prop_assert_eq!(a.count(), count(&ma));
            prop_assert_eq!(u.count(), count(&|p| ma(p) || mb(p)));
            prop_assert_eq!(c.count(), count(&|p| !ma(p)));
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
