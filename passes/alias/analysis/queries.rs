//! The queries of an [`AliasInfo`]: footprints (of a value, of a region or box of it), the
//! elements that read memory, aliasing, containment, self-aliasing, and the text report.

use super::*;

impl AliasInfo {
    /// Name of the analysed graph.
    pub fn graph(&self) -> &str {
        &self.graph
    }

    /// The type of value `v` of the analysed graph.
    pub fn value_type(&self, v: ValueId) -> &TensorType {
        &self.vals[v.index()].ty
    }

    /// The footprint of all of `v` (empty if `v` reads no memory).
    pub fn footprint(&self, v: ValueId) -> &[(ValueId, Regions)] {
        &self.footprints[v.index()]
    }

    /// The footprint of `v` on one root (`None` if `v` does not read `root`).
    pub fn footprint_on(&self, v: ValueId, root: ValueId) -> Option<&Regions> {
        self.footprint(v)
            .iter()
            .find(|(r, _)| *r == root)
            .map(|(_, x)| x)
    }

    /// True if `v` is an allocation (source, generator or apply output), not a view.
    pub fn is_root(&self, v: ValueId) -> bool {
        matches!(self.vals[v.index()].def, Def::Root(_))
    }

    /// What allocates `v`, if it is a root.
    pub fn root_kind(&self, v: ValueId) -> Option<&RootKind> {
        match &self.vals[v.index()].def {
            Def::Root(k) => Some(k),
            Def::View(_) => None,
        }
    }

    /// The values in definition order.
    pub fn values(&self) -> &[ValueId] {
        &self.order
    }

    /// Number of elements of `v`.
    pub fn elements(&self, v: ValueId) -> i128 {
        volume(&self.vals[v.index()].ty.shape)
    }

    /// Number of elements of `v` that read memory (all but constant padding).
    pub fn backed_elements(&self, v: ValueId) -> Result<i128, AliasError> {
        Ok(match self.backed_set(v)? {
            None => self.elements(v),
            Some(set) => set.count(),
        })
    }

    /// The elements of `v` that read memory (`None`: all of them). Only values with a
    /// constant pad upstream have a set; it is computed (forwards from the pads, for every
    /// value on the way that lacks one) and kept the first time it is asked for.
    fn backed_set(&self, v: ValueId) -> Result<Option<&Regions>, AliasError> {
        if !self.padded[v.index()] {
            return Ok(None);
        }
        if self.backed[v.index()].get().is_none() {
            // Everything upstream that lacks a set, by definition order.
            let mut missing = BTreeMap::new();
            let mut todo = vec![v];
            while let Some(u) = todo.pop() {
                let fresh = self.padded[u.index()] && self.backed[u.index()].get().is_none();
                if fresh && missing.insert(self.pos[u.index()], u).is_none() {
                    if let Def::View(view) = &self.vals[u.index()].def {
                        todo.extend(view.args());
                    }
                }
            }
            for u in missing.into_values() {
                let set = self.push_backed_of(u);
                let _ = self.backed[u.index()].set(set);
            }
        }
        match self.backed[v.index()].get_or_init(|| self.push_backed_of(v)) {
            Ok(set) => Ok(set.as_ref()),
            Err(e) => Err(e.clone()),
        }
    }

    /// The backed set of `u` from those of its operands (already computed).
    fn push_backed_of(&self, u: ValueId) -> Backed {
        let val = &self.vals[u.index()];
        let Def::View(view) = &val.def else {
            return Ok(None);
        };
        let mut sets = Vec::new();
        for a in view.args() {
            sets.push(self.backed_set(a)?);
        }
        let ins = arg_shapes(&self.vals, view);
        push_backed(view, &ins, &val.ty.shape, &sets).map_err(|e| AliasError::algebra(val, &e, ""))
    }

    /// Number of distinct root elements `v` reads.
    pub fn footprint_count(&self, v: ValueId) -> i128 {
        self.footprint(v).iter().map(|(_, r)| r.count()).sum()
    }

    /// True if `a` and `b` share an element of some root.
    pub fn aliases(&self, a: ValueId, b: ValueId) -> Result<bool, AliasError> {
        for (root, ra) in self.footprint(a) {
            if let Some(rb) = self.footprint_on(b, *root) {
                let disjoint = ra.disjoint(rb).map_err(|e| self.query_error(a, b, e))?;
                if !disjoint {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The root elements both `a` and `b` read.
    pub fn overlap(&self, a: ValueId, b: ValueId) -> Result<Footprint, AliasError> {
        let mut out = Vec::new();
        for (root, ra) in self.footprint(a) {
            if let Some(rb) = self.footprint_on(b, *root) {
                let i = ra.intersect(rb).map_err(|e| self.query_error(a, b, e))?;
                if !i.is_empty() {
                    out.push((*root, i));
                }
            }
        }
        Ok(out)
    }

    /// True if every root element `b` reads is also read by `a`.
    pub fn contains(&self, a: ValueId, b: ValueId) -> Result<bool, AliasError> {
        for (root, rb) in self.footprint(b) {
            let Some(ra) = self.footprint_on(a, *root) else {
                return Ok(false);
            };
            if !ra.contains(rb).map_err(|e| self.query_error(a, b, e))? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// True if two different elements of `a` are the same memory (after a broadcast, a
    /// repeat, an interleave of a value with itself, reflect padding, ...): fewer distinct
    /// root elements than elements of `a` that read memory.
    pub fn has_self_aliases(&self, a: ValueId) -> Result<bool, AliasError> {
        let distinct = self.footprint_count(a);
        if distinct == self.elements(a) {
            return Ok(false);
        }
        Ok(distinct < self.backed_elements(a)?)
    }

    /// The root elements that region `r` (over `v`'s shape) of `v` reads: e.g. the bytes
    /// one shard of a consumer of `v` reads.
    pub fn footprint_of_region(&self, v: ValueId, r: &Region) -> Result<Footprint, AliasError> {
        self.footprint_of_regions(v, &Regions::from_region(r.clone()))
    }

    /// [`AliasInfo::footprint_of_region`] for a union of regions.
    pub fn footprint_of_regions(&self, v: ValueId, r: &Regions) -> Result<Footprint, AliasError> {
        let val = &self.vals[v.index()];
        if r.shape() != val.ty.shape.as_slice() {
            let msg = format!(
                "a region of shape {:?} asked of a value of type {}",
                r.shape(),
                val.ty
            );
            return Err(AliasError::new(val, AliasErrorKind::BadQuery, msg));
        }
        let seeds = vec![(v, r.clone())];
        walk(&self.vals, &self.pos, &self.footprints, seeds)
            .map_err(|(u, e)| at(val, &self.vals[u.index()], e))
    }

    /// [`AliasInfo::footprint_of_region`] of the box `[lo, hi)` per dimension of `v`.
    pub fn footprint_of_box(
        &self,
        v: ValueId,
        ranges: &[(i64, i64)],
    ) -> Result<Footprint, AliasError> {
        let val = &self.vals[v.index()];
        let r = box_region(&val.ty.shape, ranges)
            .map_err(|e| AliasError::new(val, AliasErrorKind::BadQuery, e.to_string()))?;
        self.footprint_of_region(v, &r)
    }

    fn query_error(&self, a: ValueId, b: ValueId, e: RegionError) -> AliasError {
        let b = &self.vals[b.index()].name;
        let context = format!("comparing with `%{b}`: ");
        AliasError::algebra(&self.vals[a.index()], &e, &context)
    }

    fn name(&self, v: ValueId) -> &str {
        &self.vals[v.index()].name
    }

    /// The text report: every value's footprint, then the pairs of views that alias (with
    /// the elements they share) and the self-aliasing values, in definition order.
    pub fn report(&self) -> Result<String, AliasError> {
        let mut s = format!("graph @{}\n", self.graph);
        for &v in &self.order {
            let val = &self.vals[v.index()];
            if let Def::Root(kind) = &val.def {
                let _ = writeln!(s, "  %{}: root ({kind}) {}", val.name, val.ty);
                continue;
            }
            if self.footprint(v).is_empty() {
                let _ = writeln!(s, "  %{}: reads no memory", val.name);
            }
            for (root, r) in self.footprint(v) {
                let total = self.elements(*root);
                let (name, count) = (self.name(*root), r.count());
                let _ = writeln!(s, "  %{} -> %{name}: {r} ({count} of {total})", val.name);
            }
        }
        let views: Vec<ValueId> = self
            .order
            .iter()
            .copied()
            .filter(|&v| !self.is_root(v) && !self.footprint(v).is_empty())
            .collect();
        for (i, &a) in views.iter().enumerate() {
            for &b in &views[i + 1..] {
                for (root, r) in self.overlap(a, b)? {
                    let (x, y, z) = (self.name(a), self.name(b), self.name(root));
                    let _ = writeln!(s, "  %{x} ~ %{y} at %{z}: {r}");
                }
            }
        }
        for &v in &views {
            if self.has_self_aliases(v)? {
                let (n, d) = (self.backed_elements(v)?, self.footprint_count(v));
                let _ = writeln!(
                    s,
                    "  self-aliasing: %{} ({n} elements, {d} distinct)",
                    self.name(v)
                );
            }
        }
        Ok(s)
    }
}
