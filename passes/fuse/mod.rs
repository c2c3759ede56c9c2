//! `fuse`: producer→consumer fusion of applies and folding of views into affine accesses.
//!
//! Every rewrite replaces one apply (the *consumer*) by an apply of a **new op**, appended to
//! the module with a fresh name (`@linear.relu`, `@matmul.transpose`; identical new ops are
//! shared), and removes the nodes it made dead. Two rewrites, iterated to a fixed point in
//! text order:
//!
//! - **View folding.** An operand of an apply defined by `transpose`, `reverse`, `slice`,
//!   `squeeze`, `unsqueeze`, `broadcast` or an affine `reshape` (see `views.rs`) is replaced by
//!   the view's operand, and the view's affine map is composed into every load of that port:
//!   `apply @matmul(transpose %a, %b)` becomes an op reading `a[k, i]`. The view node goes
//!   when nothing else uses it. Views never cost a recomputation, so they always fold.
//! - **Producer→consumer fusion.** An operand defined by another apply (the *producer*, one
//!   output) is composed into the consumer: the producer's statements run first in the fused
//!   kernel, its output becomes a temporary indexed by the consumer's parallel variables, or
//!   its output expression is substituted into the consumer's loads (elementwise chains become
//!   one expression). The rules that decide which, and the diamond rule (a reduction with
//!   several consumers stays materialized), are in `plan.rs`.
//!
//! **Pinned values** are never fused away nor recomputed: a value is pinned when a `pin`
//! statement, a sink or a sequence point names it. A `pin` also keeps a view materialized: a
//! pinned view is not folded into its consumers, and no slice or concat is read through.
//!
//! **Shards** (`apply ... @[lo:hi] on N`) fuse like whole applies: the fused apply keeps the
//! consumer's range and placement, producer and consumer must be on the same node, and the
//! verifier must derive the same input windows (origins) as the composition assumes — the
//! shard pass's propagated chains (`relu.k` reading `linear.k`) qualify. The shard pass leaves
//! a consumer shard reading its producer shard through `slice (concat ..)`; before fusing, an
//! apply that reads a whole concat operand that way reads the operand itself when it is an
//! apply's result (canonicalize's fold, `peephole::whole_part`), so `shard,fuse` needs no
//! `canonicalize` in between. Views are not folded into shards: a shard's operands are its
//! windows, the data its node receives.
//!
//! **What is never touched:** extern ops (their signature is a contract), producers with
//! several outputs, producers and consumers placed on different nodes, views of `concat` or
//! `interleave` (canonicalize reads the part instead), and kernels that would exceed 512
//! expression nodes or depth 64.
//!
//! **Value preservation.** Fusion never reorders a reduction or changes a dtype. Every rewrite
//! is composed in concrete form (`kernel.rs`, `absorb.rs`), printed (`emit.rs`),
//! re-instantiated by the verifier and compared node by node with the composition
//! (`check.rs`); a rewrite that does not verify or does not lower to the same computation is
//! silently not done. A checked
//! producer→consumer fusion is reused wherever everything it depends on is the same
//! (`State::fusion_key`): a chain repeats the same compositions segment after segment. Internal
//! failures are diagnostics (E0105), never panics.

mod absorb;
pub mod affine;
mod check;
pub mod emit;
pub mod kernel;
mod plan;
pub mod select;
pub mod views;

use crate::diag::{codes, Diagnostic};
use crate::ir::graph::*;
use crate::ir::instance::Instance;
use crate::ir::kernel::OpDef;
use crate::ir::{Module, TensorType};
use crate::passes::canonicalize::peephole::whole_part;
use crate::passes::context::PassContext;
use crate::passes::pass::{Pass, PassOptions};
use crate::print::print_op;
use crate::verify::GraphFacts;
use kernel::FKernel;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// Largest fused kernel, in expression nodes over all statements.
pub const MAX_NODES: usize = 512;
/// Deepest fused expression.
pub const MAX_DEPTH: usize = 64;

pub fn create(opts: &PassOptions) -> Result<Box<dyn Pass>, String> {
    let mut pass = Fuse {
        views: true,
        producers: true,
    };
    for (k, v) in opts {
        let on = match v.as_str() {
            "true" | "on" | "1" => true,
            "false" | "off" | "0" => false,
            _ => return Err(format!("option `{k}` takes true or false, not `{v}`")),
        };
        match k.as_str() {
            "views" => pass.views = on,
            "producers" => pass.producers = on,
            _ => {
                return Err(format!(
                    "unknown option `{k}` (fuse takes views, producers)"
                ))
            }
        }
    }
    Ok(Box::new(pass))
}

/// The pass; `views`/`producers` switch the two rewrites (`fuse{views=false}`).
pub struct Fuse {
    pub views: bool,
    pub producers: bool,
}

impl Pass for Fuse {
    fn name(&self) -> &'static str {
        "fuse"
    }
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<bool, Diagnostic> {
        // Checked before asking for facts, which would type a module that was never verified.
        if let Some(g) = m
            .graphs
            .iter()
            .find(|g| g.values.iter().any(|v| v.ty.is_none()))
        {
            return Err(fail(format!(
                "fuse needs a verified graph (`@{}` has untyped values)",
                g.name
            )));
        }
        // Taken, not cloned: the pass manager re-verifies after every pass and replaces them,
        // and at 100k applies a second copy of every instance is most of the pass's memory.
        let facts = cx
            .take_facts(m)
            .map_err(|d| fail(format!("fuse needs a verified module: {}", d.message)))?;
        let mut ops = OpTable::new(std::mem::take(&mut m.ops));
        let mut changed = false;
        for (g, facts) in m.graphs.iter_mut().zip(facts) {
            changed |= fuse_graph(g, facts, &mut ops, self)?;
        }
        m.ops = ops.finish(&m.graphs);
        Ok(changed)
    }
}

fn fail(msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(codes::PASS_FAILED, msg.into())
}

/// The module's ops plus the ones fusion creates, deduplicated by definition.
struct OpTable {
    ops: Vec<OpDef>,
    index: HashMap<String, usize>,
    by_body: HashMap<String, String>,
    /// Created op → the base its name was derived from (without the `.N` that made it unique).
    created: HashMap<String, String>,
    /// Per base: the next `.N` suffix to try (so naming the k-th op of one base is not O(k)).
    next_suffix: HashMap<String, usize>,
}

impl OpTable {
    fn new(ops: Vec<OpDef>) -> OpTable {
        let mut t = OpTable {
            index: HashMap::new(),
            by_body: HashMap::new(),
            created: HashMap::new(),
            next_suffix: HashMap::new(),
            ops: vec![],
        };
        for op in ops {
            t.insert(op);
        }
        t
    }

    fn body_key(op: &OpDef) -> String {
        print_op(&OpDef {
            name: "_".into(),
            ..op.clone()
        })
    }

    fn insert(&mut self, op: OpDef) {
        self.by_body
            .entry(Self::body_key(&op))
            .or_insert_with(|| op.name.clone());
        self.index.insert(op.name.clone(), self.ops.len());
        self.ops.push(op);
    }

    /// The name to derive new names from: a created op's base, else the name itself.
    fn base_of<'n>(&'n self, name: &'n str) -> &'n str {
        self.created.get(name).map_or(name, String::as_str)
    }

    fn get(&self, name: &str) -> Option<&OpDef> {
        self.index.get(name).map(|&i| &self.ops[i])
    }

    /// The name of an op with `op`'s definition: an existing one, or `op` added under a fresh
    /// name derived from `base`.
    fn intern(&mut self, mut op: OpDef, base: &str) -> String {
        let key = Self::body_key(&op);
        if let Some(n) = self.by_body.get(&key) {
            return n.clone();
        }
        let base = if base.len() > 40 {
            format!("{}.fused", base.split('.').next().unwrap_or("op"))
        } else {
            base.to_string()
        };
        // Names are never freed during a pass, so every suffix below `next` is still taken.
        let next = self.next_suffix.entry(base.clone()).or_insert(0);
        let name = loop {
            let n = match *next {
                0 => base.clone(),
                k => format!("{base}.{k}"),
            };
            *next += 1;
            if !self.index.contains_key(&n) {
                break n;
            }
        };
        op.name = name.clone();
        self.created.insert(name.clone(), base);
        self.by_body.insert(key, name.clone());
        self.index.insert(name.clone(), self.ops.len());
        self.ops.push(op);
        name
    }

    /// The module's ops: the original ones, then the created ones that are still applied.
    fn finish(self, graphs: &[Graph]) -> Vec<OpDef> {
        let used: HashSet<&str> = graphs
            .iter()
            .flat_map(|g| &g.nodes)
            .filter_map(|n| match &n.kind {
                NodeKind::Apply(a) => Some(a.op.as_str()),
                _ => None,
            })
            .collect();
        self.ops
            .into_iter()
            .filter(|o| !self.created.contains_key(&o.name) || used.contains(o.name.as_str()))
            .collect()
    }
}

/// The nodes reading one value, each with how many of its operands it is: a multiset, so that
/// dropping one reader of a value read 100k times (a fan-out) is O(1), not a scan.
#[derive(Default)]
struct Users(HashMap<usize, u32>);

impl Users {
    fn from_nodes(nodes: Vec<usize>) -> Users {
        let mut u = Users::default();
        for n in nodes {
            u.add(n);
        }
        u
    }
    fn add(&mut self, n: usize) {
        *self.0.entry(n).or_insert(0) += 1;
    }
    fn remove_one(&mut self, n: usize) {
        if let Some(c) = self.0.get_mut(&n) {
            *c -= 1;
            if *c == 0 {
                self.0.remove(&n);
            }
        }
    }
    fn remove_all(&mut self, n: usize) {
        self.0.remove(&n);
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Whether a node other than `n` reads the value.
    fn other_than(&self, n: usize) -> bool {
        self.0.len() > usize::from(self.0.contains_key(&n))
    }
}

/// Rewrite state of one graph: nodes are rewritten in place and marked dead, then compacted.
struct State<'a> {
    g: &'a mut Graph,
    /// Per node: the instance of its apply (shared: a chain's applies are often identical).
    insts: Vec<Option<Rc<Instance>>>,
    dead: Vec<bool>,
    /// Per value: the nodes reading it (once per operand occurrence).
    users: Vec<Users>,
    /// Per value: named by a pin, a sink or a sequence point.
    pinned: Vec<bool>,
    /// Per value: named by a pin (then views are not folded through it either).
    held: Vec<bool>,
    origin: usize,
    /// Rewrites already tried and rejected, by a key of everything they depend on.
    failed: HashSet<String>,
    /// Producer→consumer fusions already composed and checked, by [`State::fusion_key`]: a
    /// chain repeats the same fusions segment after segment, and each costs O(kernel size).
    fused: HashMap<String, Option<Fused>>,
}

/// The outcome of one producer→consumer fusion, independent of the graph values involved.
struct Fused {
    op: String,
    /// Per argument of the fused apply: its position in the consumer's then the producer's
    /// arguments.
    args: Vec<usize>,
    range: Option<Vec<(i64, i64)>>,
    inst: Rc<Instance>,
}

impl<'a> State<'a> {
    /// Fresh rewrite state for a verified graph `g` with its facts (moved in, not copied: at
    /// 100k applies a second copy of every instance is most of the pass's memory).
    fn new(g: &'a mut Graph, mut facts: GraphFacts) -> State<'a> {
        let n = g.nodes.len();
        let (users, pinned) = select::users_and_pinned(g);
        let held = g.pinned();
        State {
            insts: (0..n)
                .map(|i| facts.instances.remove(&i).map(Rc::new))
                .collect(),
            g,
            dead: vec![false; n],
            users: users.into_iter().map(Users::from_nodes).collect(),
            pinned,
            held,
            origin: 0,
            failed: HashSet::new(),
            fused: HashMap::new(),
        }
    }
}

fn fuse_graph(
    g: &mut Graph,
    facts: GraphFacts,
    ops: &mut OpTable,
    cfg: &Fuse,
) -> Result<bool, Diagnostic> {
    let n = g.nodes.len();
    let mut st = State::new(g, facts);
    let mut budget = 4 * n + 64;
    let mut changed = false;
    loop {
        // Folding a view can make a slice of a concat an apply's operand: read through it again.
        let mut any = cfg.producers && st.read_parts();
        for i in 0..n {
            while !st.dead[i] && budget > 0 && st.rewrite(i, ops, cfg) {
                budget -= 1;
                any = true;
            }
        }
        changed |= any;
        if !any || budget == 0 {
            break;
        }
    }
    if changed {
        compact(st.g, &st.dead);
    }
    Ok(changed)
}

impl State<'_> {
    fn ty(&self, v: ValueId) -> &TensorType {
        self.g.values[v.index()]
            .ty
            .as_ref()
            .expect("checked: every value is typed")
    }

    fn next_origin(&mut self) -> usize {
        self.origin += 1;
        self.origin
    }

    /// Makes applies that read a whole part of a concat through a slice read the part itself
    /// when the part is an apply's result (a producer to fuse with). The shard pass leaves each
    /// consumer shard reading its producer shard this way (`relu.k(slice (concat h.0, ..))`);
    /// the fold is canonicalize's (`peephole::whole_part`). Slices and concats left unused go.
    fn read_parts(&mut self) -> bool {
        let mut changed = false;
        for i in 0..self.g.nodes.len() {
            let NodeKind::Apply(a) = &self.g.nodes[i].kind else {
                continue;
            };
            if self.dead[i] {
                continue;
            }
            let mut args = a.args.clone();
            let mut slices = Vec::new();
            for arg in &mut args {
                let Some(part) = whole_part(self.g, *arg) else {
                    continue;
                };
                let slice_node = &self.g.nodes[self.g.values[arg.index()].node].kind;
                let concat = slice_node.operands()[0];
                if self.held[arg.index()] || self.held[concat.index()] {
                    continue;
                }
                let part_node = self.g.values[part.index()].node;
                if !matches!(self.g.nodes[part_node].kind, NodeKind::Apply(_)) {
                    continue;
                }
                self.users[arg.index()].remove_one(i);
                self.users[part.index()].add(i);
                slices.push(self.g.values[arg.index()].node);
                *arg = part;
            }
            if slices.is_empty() {
                continue;
            }
            if let NodeKind::Apply(a) = &mut self.g.nodes[i].kind {
                a.args = args;
            }
            for s in slices {
                self.kill_if_unused(s);
            }
            changed = true;
        }
        changed
    }

    /// The apply at node `i` when it is live, of a kernel op, and has an instance.
    fn live_apply(&self, i: usize, ops: &OpTable) -> Option<Apply> {
        let NodeKind::Apply(a) = &self.g.nodes[i].kind else {
            return None;
        };
        let kernel_op = ops.get(&a.op).is_some_and(|o| !o.is_extern());
        (!self.dead[i] && kernel_op && self.insts[i].is_some()).then(|| a.clone())
    }

    /// The kernel of the live kernel-op apply `a` at node `i` (whole or a shard: a shard's
    /// kernel is its op's instance over its range), with a fresh origin for its variables.
    fn kernel_of(&mut self, i: usize, a: &Apply, ops: &OpTable) -> Option<FKernel> {
        let op = ops.get(&a.op)?;
        let origin = self.next_origin();
        let inst = self.insts[i].as_ref()?;
        FKernel::from_instance(op, inst, &a.args, origin).ok()
    }

    /// Tries every rewrite of the apply at node `i`; true if one was done.
    fn rewrite(&mut self, i: usize, ops: &mut OpTable, cfg: &Fuse) -> bool {
        let Some(a) = self.live_apply(i, ops) else {
            return false;
        };
        // A shard's operands are its windows (the data it moves): they are not folded.
        if cfg.views && a.range.is_none() {
            // Composed only when a view is found (most applies read none).
            let mut c: Option<FKernel> = None;
            let mut seen = HashSet::new();
            for &u in &a.args {
                if !seen.insert(u) {
                    continue;
                }
                let vn = self.g.values[u.index()].node;
                let NodeKind::View(view) = &self.g.nodes[vn].kind else {
                    continue;
                };
                if self.held[u.index()] {
                    continue; // a pinned view is read as materialized
                }
                let [src] = view.args()[..] else {
                    continue;
                };
                // A view of a concat or interleave is left to canonicalize, which reads the
                // part directly; folding it would make the apply read the whole (copied) value.
                let src_node = &self.g.nodes[self.g.values[src.index()].node].kind;
                if matches!(
                    src_node,
                    NodeKind::View(View::Concat { .. } | View::Interleave { .. })
                ) {
                    continue;
                }
                let (src_ty, u_ty) = (self.ty(src).clone(), self.ty(u).clone());
                let Some(map) = views::view_map(view, &src_ty.shape, &u_ty.shape) else {
                    continue;
                };
                let key = format!("view {i} {a:?} {u:?}");
                if self.failed.contains(&key) {
                    continue;
                }
                let base = format!("{}.{}", ops.base_of(&a.op), view.name());
                if c.is_none() {
                    c = self.kernel_of(i, &a, ops);
                }
                let Some(mut fk) = c.clone() else {
                    return false;
                };
                if fk.fold_view(u, &map, src, &src_ty).is_ok() {
                    if let Some((name, inst)) = self.check_fused(i, &fk, &base, ops) {
                        let args = fk.inputs.iter().map(|p| p.value).collect();
                        self.replace(i, &a, name, args, fk.range, Rc::new(inst));
                        self.kill_if_unused(vn);
                        return true;
                    }
                }
                self.failed.insert(key);
            }
        }
        if cfg.producers {
            let mut seen = HashSet::new();
            for &v in &a.args {
                if !seen.insert(v) || self.pinned[v.index()] {
                    continue;
                }
                let pn = self.g.values[v.index()].node;
                let escapes = self.users[v.index()].other_than(i);
                if self.fuse_producer(i, &a, pn, v, escapes, ops) {
                    return true;
                }
            }
        }
        false
    }

    /// Composes value `v`, the result of the apply at node `pn`, into the apply `a` at node `i`
    /// (`escapes`: other nodes read `v` too, so the producer stays); true if done.
    fn fuse_producer(
        &mut self,
        i: usize,
        a: &Apply,
        pn: usize,
        v: ValueId,
        escapes: bool,
        ops: &mut OpTable,
    ) -> bool {
        if self.g.nodes[pn].results.len() != 1 {
            return false;
        }
        let Some(pa) = self.live_apply(pn, ops) else {
            return false;
        };
        if pa.placement != a.placement {
            return false;
        }
        let temp = temp_name(&self.g.values[v.index()].name);
        let key = self.fusion_key((i, a), (pn, &pa), v, escapes, &temp);
        if !self.fused.contains_key(&key) {
            let outcome = self.compose_producer((i, a), (pn, &pa), v, escapes, &temp, ops);
            self.fused.insert(key.clone(), outcome);
        }
        let Some(Some(f)) = self.fused.get(&key) else {
            return false;
        };
        let all: Vec<ValueId> = a.args.iter().chain(&pa.args).copied().collect();
        let args = f.args.iter().map(|&k| all[k]).collect();
        let (name, range, inst) = (f.op.clone(), f.range.clone(), f.inst.clone());
        self.replace(i, a, name, args, range, inst);
        self.kill_if_unused(pn);
        true
    }

    /// Everything a producer→consumer fusion depends on but the graph's value ids: both ops
    /// (a name fixes a body within a pass), their instances' argument types and windows, which
    /// arguments are the same value, which one is `v`, whether it escapes, the temporary name.
    fn fusion_key(
        &self,
        (i, a): (usize, &Apply),
        (pn, pa): (usize, &Apply),
        v: ValueId,
        escapes: bool,
        temp: &str,
    ) -> String {
        let all: Vec<ValueId> = a.args.iter().chain(&pa.args).copied().collect();
        let same: Vec<usize> = all
            .iter()
            .map(|x| all.iter().position(|y| y == x).unwrap_or(0))
            .collect();
        let port = a.args.iter().position(|&x| x == v);
        let side = |a: &Apply, inst: &Option<Rc<Instance>>| {
            let inst = inst.as_ref().map(|x| (&x.inputs, &x.origins));
            format!("{} {:?} {:?} {inst:?}", a.op, a.params, a.range)
        };
        format!(
            "{} | {} | {same:?} {port:?} {escapes} {temp}",
            side(a, &self.insts[i]),
            side(pa, &self.insts[pn])
        )
    }

    /// Composes and checks the fusion of [`State::fuse_producer`], trying every candidate.
    fn compose_producer(
        &mut self,
        (i, a): (usize, &Apply),
        (pn, pa): (usize, &Apply),
        v: ValueId,
        escapes: bool,
        temp: &str,
        ops: &mut OpTable,
    ) -> Option<Fused> {
        let c = self.kernel_of(i, a, ops)?;
        let p = self.kernel_of(pn, pa, ops)?;
        let base = format!("{}.{}", ops.base_of(&pa.op), ops.base_of(&a.op));
        for cand in plan::candidates(&c, &p, v, escapes) {
            let Ok(fk) = absorb::absorb(&c, &p, v, cand.mode, cand.sigma.as_deref(), temp) else {
                continue;
            };
            if let Some((op, inst)) = self.check_fused(i, &fk, &base, ops) {
                let all: Vec<ValueId> = a.args.iter().chain(&pa.args).copied().collect();
                let args = fk
                    .inputs
                    .iter()
                    .map(|p| all.iter().position(|&x| x == p.value))
                    .collect::<Option<Vec<usize>>>()?;
                return Some(Fused {
                    op,
                    args,
                    range: fk.range,
                    inst: Rc::new(inst),
                });
            }
        }
        None
    }

    /// Prints `fk` as an op, checks it against the composition for node `i`'s result types
    /// and interns it: its name and instance, or `None` when it is too big or does not check.
    fn check_fused(
        &self,
        i: usize,
        fk: &FKernel,
        base: &str,
        ops: &mut OpTable,
    ) -> Option<(String, Instance)> {
        let (nodes, depth) = fk.size();
        if nodes > MAX_NODES || depth > MAX_DEPTH {
            return None;
        }
        let outputs: Vec<TensorType> = self.g.nodes[i]
            .results
            .iter()
            .map(|&v| self.ty(v).clone())
            .collect();
        let em = emit::emit(fk, base).ok()?;
        let inst = check::check(fk, &em, &outputs).ok()?;
        Some((ops.intern(em.op, base), inst))
    }

    /// Makes the apply at node `i` (was `old`) an apply of `op` to `args`.
    fn replace(
        &mut self,
        i: usize,
        old: &Apply,
        op: String,
        args: Vec<ValueId>,
        range: Option<Vec<(i64, i64)>>,
        inst: Rc<Instance>,
    ) {
        for &v in &old.args {
            self.users[v.index()].remove_all(i);
        }
        for &v in &args {
            self.users[v.index()].add(i);
        }
        self.g.nodes[i].kind = NodeKind::Apply(Apply {
            op,
            params: vec![],
            args,
            range,
            placement: old.placement,
            op_span: old.op_span,
        });
        self.insts[i] = Some(inst);
    }

    /// Marks node `n` dead when nothing uses its results, then its operands' nodes likewise.
    fn kill_if_unused(&mut self, n: usize) {
        let mut work = vec![n];
        while let Some(n) = work.pop() {
            if self.dead[n] {
                continue;
            }
            let node = &self.g.nodes[n];
            let removable = matches!(
                node.kind,
                NodeKind::View(_) | NodeKind::Apply(_) | NodeKind::Generator(_)
            );
            let unused = node
                .results
                .iter()
                .all(|v| self.users[v.index()].is_empty() && !self.pinned[v.index()]);
            if !removable || !unused {
                continue;
            }
            self.dead[n] = true;
            for v in node.kind.operands() {
                self.users[v.index()].remove_all(n);
                if self.users[v.index()].is_empty() {
                    work.push(self.g.values[v.index()].node);
                }
            }
        }
    }
}

/// The temporary holding a producer's output is named after the value without shard and
/// numeric suffixes (`%h.2` → `h`, `%c17` → `c`), so that the same chain fused at several
/// places yields one shared op.
fn temp_name(value: &str) -> String {
    let base = value.split('.').next().unwrap_or(value);
    let base = base.trim_end_matches(|c: char| c.is_ascii_digit());
    if base.is_empty() {
        "t".to_string()
    } else {
        base.to_string()
    }
}

/// Drops dead nodes and renumbers values (sequence points may name later values, so every
/// value is numbered before any node is rewritten).
fn compact(g: &mut Graph, dead: &[bool]) {
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    let mut values = Vec::new();
    let mut idx = 0;
    for (i, n) in g.nodes.iter().enumerate() {
        if dead[i] {
            continue;
        }
        for &v in &n.results {
            map[v.index()] = Some(ValueId(values.len() as u32));
            values.push(ValueDef {
                node: idx,
                ..g.values[v.index()].clone()
            });
        }
        idx += 1;
    }
    let m = |v: ValueId| map[v.index()].expect("live nodes only use live values");
    let mut nodes = Vec::new();
    for (i, n) in std::mem::take(&mut g.nodes).into_iter().enumerate() {
        if dead[i] {
            continue;
        }
        let mut kind = n.kind;
        crate::passes::rewrite::for_each_operand(&mut kind, &mut |x| *x = m(*x));
        let results = n.results.iter().map(|&v| m(v)).collect();
        nodes.push(Node {
            kind,
            results,
            span: n.span,
        });
    }
    g.nodes = nodes;
    g.values = values;
}
