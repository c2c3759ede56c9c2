//! Inputs read through views, priced exactly: the elements of each root that a shard's box of a
//! view reads (the alias analysis maps the box back through the views,
//! [`AliasInfo::footprint_of_box`]), intersected with the root's pieces under the plan. Without
//! it ([`Problem::new`] alone, as the cost bench and the probes use) such an input is priced as
//! the remote fraction of all its roots' pieces, which is wrong when a view takes some pieces
//! whole and others not at all (the `q`, `k` and `v` column slices of a column-split `%qkv`).
//! Footprints are cached by value and box, and the counts of every piece of a root by value,
//! box, root and the root's split (its pieces depend on that alone, not on their nodes), so a
//! search pays for each once and looks one up per input and root, not per piece (at 64 parts,
//! hashing each of 64 × 64 piece boxes took half the search's time).

use super::eval::Dep;
use super::*;
use crate::ir::graph::{Graph, NodeKind, ValueId};
use crate::passes::alias::analysis::{analyze, box_region, AliasInfo};
use crate::passes::alias::Regions;
use std::sync::{Arc, Mutex};

/// The root elements one box of a value reads: per root, its regions (`None`: the analysis
/// could not tell, so the approximation stands).
type Reads = Option<Vec<(Root, Regions)>>;

/// What [`Problem::fetch`] needs to price inputs read through views exactly.
pub(super) struct Views {
    alias: AliasInfo,
    /// The model's root of each root value of the graph (generators are free: absent).
    roots: HashMap<ValueId, Root>,
    /// Footprints by (value, box), and the element counts of every piece of a root by
    /// (value, box, root, the root's split: (dim, parts) of its gene, (0, 0) for a source).
    reads: Mutex<HashMap<(ValueId, Box1), Reads>>,
    counts: Mutex<HashMap<CountKey, Arc<Vec<f64>>>>,
}

type CountKey = (ValueId, Box1, usize, (u8, u8));

impl std::fmt::Debug for Views {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Views({} roots)", self.roots.len())
    }
}

/// Sources and applies (and scatters) enter the model in node order, so the k-th of each kind
/// is source `k` and apply `k`.
fn model_roots(g: &Graph, p: &Problem) -> HashMap<ValueId, Root> {
    let mut roots = HashMap::new();
    let (mut sources, mut applies) = (0, 0);
    for (ni, node) in g.nodes.iter().enumerate() {
        match &node.kind {
            NodeKind::Source { .. } => {
                roots.insert(node.results[0], Root::Source { index: sources });
                sources += 1;
            }
            NodeKind::Apply(_) | NodeKind::Scatter(_) => {
                debug_assert_eq!(p.applies.get(applies).map(|a| a.node), Some(ni));
                for (output, &r) in node.results.iter().enumerate() {
                    let apply = applies;
                    roots.insert(r, Root::Apply { apply, output });
                }
                applies += 1;
            }
            _ => {}
        }
    }
    roots
}

impl Problem {
    /// This problem pricing inputs read through views exactly (graph `g` is the one it was
    /// built from); itself when the alias analysis of `g` fails.
    pub fn with_exact_views(&self, g: &Graph) -> Problem {
        let Ok(alias) = analyze(g) else {
            return self.clone();
        };
        let views = Views {
            alias,
            roots: model_roots(g, self),
            reads: Mutex::default(),
            counts: Mutex::default(),
        };
        Problem {
            views: Some(Arc::new(views)),
            ..self.clone()
        }
    }

    /// The root elements box `bx` of input `inp` reads, by root.
    fn view_reads(&self, views: &Views, inp: &Input, bx: &[(i64, i64)]) -> Reads {
        let key = (inp.value, bx.to_vec());
        if let Some(r) = views.reads.lock().unwrap().get(&key) {
            return r.clone();
        }
        let fp = views.alias.footprint_of_box(inp.value, bx).ok();
        let reads = fp.and_then(|fp| {
            (fp.into_iter())
                .filter_map(|(v, r)| views.roots.get(&v).map(|root| Some((root.clone(), r))))
                .collect::<Option<Vec<_>>>()
        });
        views.reads.lock().unwrap().insert(key, reads.clone());
        reads
    }

    /// Elements of `regions` (over the root's `shape`) inside each of the piece boxes `pbs`.
    fn counts_in<'b>(
        views: &Views,
        key: CountKey,
        regions: &Regions,
        pbs: impl Iterator<Item = &'b Box1>,
    ) -> Arc<Vec<f64>> {
        if let Some(c) = views.counts.lock().unwrap().get(&key) {
            return c.clone();
        }
        let c: Arc<Vec<f64>> = Arc::new(
            pbs.map(|pb| {
                box_region(regions.shape(), pb)
                    .and_then(|b| Regions::from_region(b).intersect(regions))
                    .map_or(0.0, |r| r.count() as f64)
            })
            .collect(),
        );
        views.counts.lock().unwrap().insert(key, c.clone());
        c
    }

    /// [`Problem::fetch`] of an input read through views, exactly: `None` when the problem has no
    /// exact pricing ([`Problem::new`] alone) or the analysis cannot map the box.
    pub(super) fn fetch_through_views(
        &self,
        plan: &[Gene],
        inp: &Input,
        bx: &[(i64, i64)],
        n: usize,
        deps: &mut Vec<Dep>,
    ) -> Option<(f64, f64)> {
        let views = self.views.as_deref()?;
        let reads = self.view_reads(views, inp, bx)?;
        let (mut moved, mut shared) = (0.0f64, 0.0f64);
        for (k, (root, regions)) in reads.iter().enumerate() {
            let key = |split: (u8, u8)| (inp.value, bx.to_vec(), k, split);
            let mut piece = |count: f64, from: usize| -> (f64, f64) {
                let b = count * inp.elem;
                let t = if from != n && b > 0.0 {
                    moved += b;
                    self.machine.transfer(from, n, b)
                } else {
                    0.0
                };
                (b, t)
            };
            match root {
                Root::Source { index } if self.sources[*index].place == Placement::Shared => {
                    shared += regions.count() as f64 * inp.elem;
                }
                Root::Source { index } => {
                    let pieces = self.source_pieces(*index);
                    let boxes = pieces.iter().map(|(pb, _)| pb);
                    let counts = Self::counts_in(views, key((0, 0)), regions, boxes);
                    for ((_, pn), &c) in pieces.iter().zip(counts.iter()) {
                        let (b, t) = piece(c, *pn);
                        if b > 0.0 && *pn != n {
                            deps.push(Dep::source(t));
                        }
                    }
                }
                Root::Apply { apply, output } => {
                    let g = &plan[*apply];
                    let pieces: Vec<_> = self.pieces(*apply, *output, g).collect();
                    let boxes = pieces.iter().map(|&(_, pb, _)| pb);
                    let counts = Self::counts_in(views, key((g.dim, g.parts)), regions, boxes);
                    for (&(p, _, pn), &c) in pieces.iter().zip(counts.iter()) {
                        let (b, t) = piece(c, pn);
                        // A computed value's runs are packed on its node before they leave.
                        let t = t + if pn != n { self.copy(pn, b) } else { 0.0 };
                        if b > 0.0 {
                            deps.push(Dep::piece(*apply, p, t));
                        }
                    }
                }
                Root::Free => {}
            }
        }
        Some((moved, moved + shared))
    }
}
