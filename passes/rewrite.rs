//! Shared machinery for passes that rebuild a graph node by node: a builder that maps old
//! values to new ones, hands out fresh names, optionally merges identical nodes (CSE), and
//! dead-code elimination. Rebuilding in order keeps SSA order by construction.
//!
//! Pinned values (`pin %v`) keep their own node: CSE never merges one into an earlier identical
//! value (later identical values may merge into it), a second `pin` of one value is dropped
//! under CSE, and DCE keeps every pin and what it names.

use crate::diag::{codes, Diagnostic, Span};
use crate::ir::graph::*;
use crate::ir::TensorType;
use std::collections::{HashMap, HashSet};

pub struct Builder<'a> {
    pub old: &'a Graph,
    pub new: Graph,
    /// Old value → its replacement in `new`.
    pub map: Vec<Option<ValueId>>,
    names: HashSet<String>,
    cse: Option<HashMap<String, ValueId>>,
    /// Per old value: named by a `pin`.
    pub pinned: Vec<bool>,
    /// New values that copy a pinned old value, and new values already pinned.
    pinned_new: HashSet<ValueId>,
    pins_done: HashSet<ValueId>,
}

impl<'a> Builder<'a> {
    /// An empty graph named like `old`; `cse` merges identical views, generators and applies.
    pub fn new(old: &'a Graph, cse: bool) -> Builder<'a> {
        Builder {
            old,
            new: Graph {
                name: old.name.clone(),
                span: old.span,
                name_span: old.name_span,
                ..Graph::default()
            },
            map: vec![None; old.values.len()],
            names: HashSet::new(),
            cse: cse.then(HashMap::new),
            pinned: old.pinned(),
            pinned_new: HashSet::new(),
            pins_done: HashSet::new(),
        }
    }

    /// Whether a value of the new graph copies a pinned value.
    pub fn is_pinned_new(&self, v: ValueId) -> bool {
        self.pinned_new.contains(&v)
    }

    /// `base` if unused, else `base.c0`, `base.c1`, ...
    pub fn fresh(&mut self, base: &str) -> String {
        if self.names.insert(base.to_string()) {
            return base.to_string();
        }
        (0..)
            .map(|k| format!("{base}.c{k}"))
            .find(|n| self.names.insert(n.clone()))
            .expect("an unused name exists")
    }

    pub fn mapped(&self, v: ValueId) -> ValueId {
        self.map[v.index()].expect("operands are rebuilt before their users")
    }

    /// The type of an old value (every value of a verified graph has one).
    pub fn old_ty(&self, v: ValueId) -> Result<TensorType, Diagnostic> {
        self.old.ty(v).cloned().ok_or_else(|| {
            Diagnostic::error(
                codes::PASS_FAILED,
                format!(
                    "pass needs a verified graph (`%{}` has no type)",
                    self.old.value(v).name
                ),
            )
        })
    }

    /// Adds a node with one result named like `name` (or finds an identical one under CSE).
    pub fn emit(&mut self, kind: NodeKind, name: &str, ty: TensorType, span: Span) -> ValueId {
        self.emit_cse(kind, name, ty, span, true)
    }

    /// As [`Builder::emit`]; `merge: false` never merges this node into an earlier one (it is
    /// still recorded, so later identical nodes merge into it).
    fn emit_cse(
        &mut self,
        kind: NodeKind,
        name: &str,
        ty: TensorType,
        span: Span,
        merge: bool,
    ) -> ValueId {
        let key = self.cse.as_ref().and_then(|_| cse_key(&kind));
        if let (Some(k), Some(cse), true) = (&key, &self.cse, merge) {
            if let Some(&v) = cse.get(k) {
                return v;
            }
        }
        let id = self.emit_multi(kind, &[(name.to_string(), ty)], span)[0];
        if let (Some(k), Some(cse)) = (key, &mut self.cse) {
            cse.insert(k, id);
        }
        id
    }

    /// Adds a node with several results (never merged).
    pub fn emit_multi(
        &mut self,
        kind: NodeKind,
        results: &[(String, TensorType)],
        span: Span,
    ) -> Vec<ValueId> {
        let idx = self.new.nodes.len();
        let ids: Vec<ValueId> = results
            .iter()
            .map(|(name, ty)| {
                let id = ValueId(self.new.values.len() as u32);
                let name = self.fresh(name);
                self.new.values.push(ValueDef {
                    name,
                    node: idx,
                    ty: Some(ty.clone()),
                    span,
                });
                id
            })
            .collect();
        self.new.nodes.push(Node {
            kind,
            results: ids.clone(),
            span,
        });
        ids
    }

    /// `kind` with every operand mapped into the new graph.
    pub fn remap(&self, kind: &NodeKind) -> NodeKind {
        let mut kind = kind.clone();
        for_each_operand(&mut kind, &mut |v| *v = self.mapped(*v));
        kind
    }

    /// Copies an old node unchanged (operands mapped), keeping its result names.
    pub fn copy_node(&mut self, node: &Node) -> Result<(), Diagnostic> {
        let kind = self.remap(&node.kind);
        if let NodeKind::Pin { value } = kind {
            if self.cse.is_some() && !self.pins_done.insert(value) {
                return Ok(()); // already pinned
            }
        }
        let pinned = node.results.iter().any(|v| self.pinned[v.index()]);
        let results: Vec<(String, TensorType)> = node
            .results
            .iter()
            .map(|&v| Ok((self.old.value(v).name.clone(), self.old_ty(v)?)))
            .collect::<Result<_, Diagnostic>>()?;
        let ids = if results.len() == 1 && !matches!(kind, NodeKind::Source { .. }) {
            let (name, ty) = results[0].clone();
            vec![self.emit_cse(kind, &name, ty, node.span, !pinned)]
        } else {
            self.emit_multi(kind, &results, node.span)
        };
        for (&old, id) in node.results.iter().zip(ids) {
            self.map[old.index()] = Some(id);
            if self.pinned[old.index()] {
                self.pinned_new.insert(id);
            }
        }
        Ok(())
    }
}

/// Nodes `nodes` of `g` (in text order) alone in a graph of their own: every value they read
/// that none of them defines becomes a `source` of its type, named like the value. Returns the
/// graph and each node's index in it, or `None` when a value they read has no type. A rewrite
/// of those nodes is checked on it at the cost of the rewrite, not of the whole graph (the
/// cost pass's probes).
pub fn isolate(g: &Graph, nodes: &[usize]) -> Option<(Graph, Vec<usize>)> {
    let mut new = Graph {
        name: g.name.clone(),
        span: g.span,
        name_span: g.name_span,
        ..Graph::default()
    };
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    let mut at = Vec::with_capacity(nodes.len());
    for &n in nodes {
        let node = g.nodes.get(n)?;
        for v in node.kind.operands() {
            if !map.contains_key(&v) {
                let def = g.value(v);
                let (name, ty, span) = (def.name.clone(), def.ty.clone()?, def.span);
                let source = NodeKind::Source {
                    name,
                    ty,
                    state: false,
                };
                define(&mut new, g, (source, span), &[v], &mut map);
            }
        }
        let mut kind = node.kind.clone();
        for_each_operand(&mut kind, &mut |v| *v = map[v]);
        at.push(new.nodes.len());
        define(&mut new, g, (kind, node.span), &node.results, &mut map);
    }
    Some((new, at))
}

/// Appends a node of `kind` at `span` to `new` whose results copy the values `old` of `g`
/// (names, types, spans), and maps each old value to its copy.
fn define(
    new: &mut Graph,
    g: &Graph,
    (kind, span): (NodeKind, Span),
    old: &[ValueId],
    map: &mut HashMap<ValueId, ValueId>,
) {
    let node = new.nodes.len();
    let mut results = Vec::with_capacity(old.len());
    for &v in old {
        let id = ValueId(new.values.len() as u32);
        new.values.push(ValueDef {
            node,
            ..g.value(v).clone()
        });
        map.insert(v, id);
        results.push(id);
    }
    new.nodes.push(Node {
        kind,
        results,
        span,
    });
}

/// Calls `f` on every value a node reads (including sequence-point references).
pub fn for_each_operand(kind: &mut NodeKind, f: &mut dyn FnMut(&mut ValueId)) {
    match kind {
        NodeKind::Apply(a) => a.args.iter_mut().for_each(f),
        NodeKind::View(v) => v.for_each_arg_mut(f),
        NodeKind::Sink { value, .. } | NodeKind::Pin { value } => f(value),
        NodeKind::Sequence { before, after } => {
            before.iter_mut().chain(after.iter_mut()).for_each(|r| {
                if let SeqRef::Value(v) = r {
                    f(v)
                }
            })
        }
        NodeKind::Grad { loss, wrt } => std::iter::once(loss).chain(wrt.iter_mut()).for_each(f),
        NodeKind::Scatter(s) => s.operands_mut().into_iter().for_each(f),
        NodeKind::Source { .. } | NodeKind::Generator(_) => {}
    }
}

/// CSE key of a node; `None` for nodes that are never merged (sources, sinks, sequence points,
/// pins).
fn cse_key(kind: &NodeKind) -> Option<String> {
    match kind {
        NodeKind::View(v) => Some(format!("view {v:?}")),
        NodeKind::Generator(gen) => Some(format!("gen {gen:?}")),
        NodeKind::Scatter(s) => Some(format!("scatter {s:?}")),
        NodeKind::Apply(a) => Some(format!(
            "apply {} {:?} {:?} {:?} {:?}",
            a.op, a.params, a.args, a.range, a.placement
        )),
        _ => None,
    }
}

/// Removes every node that reaches no sink, sequence point or pin (sources stay: they are the
/// graph's interface), renumbering values.
pub fn dce(g: &Graph) -> Graph {
    let mut live = vec![false; g.nodes.len()];
    // Sequence points may name applies defined after them, so iterate to a fixed point.
    loop {
        let mut changed = false;
        for (i, n) in g.nodes.iter().enumerate().rev() {
            let root = matches!(
                n.kind,
                NodeKind::Sink { .. }
                    | NodeKind::Sequence { .. }
                    | NodeKind::Source { .. }
                    | NodeKind::Pin { .. }
            );
            if !(root || live[i]) {
                continue;
            }
            changed |= !live[i];
            live[i] = true;
            let mut kind = n.kind.clone();
            for_each_operand(&mut kind, &mut |v| {
                let d = g.value(*v).node;
                changed |= !live[d];
                live[d] = true;
            });
        }
        if !changed {
            break;
        }
    }
    let mut b = Builder::new(g, false);
    for (i, n) in g.nodes.iter().enumerate() {
        if live[i] {
            let kind = b.remap(&n.kind);
            let results: Vec<(String, TensorType)> = n
                .results
                .iter()
                .map(|&v| {
                    (
                        g.value(v).name.clone(),
                        g.ty(v)
                            .cloned()
                            .unwrap_or(TensorType::new(tapc_runtime::DType::F32, vec![])),
                    )
                })
                .collect();
            let ids = b.emit_multi(kind, &results, n.span);
            for (&old, id) in n.results.iter().zip(ids) {
                b.map[old.index()] = Some(id);
            }
        }
    }
    // Keep each value's own span (emit_multi gives results the node's span).
    for (old, new) in b.map.iter().enumerate() {
        if let Some(n) = new {
            b.new.values[n.index()].span = g.values[old].span;
        }
    }
    b.new
}
