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
