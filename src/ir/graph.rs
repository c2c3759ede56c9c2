//! Graphs: SSA values defined by nodes (sources, applies, selectors, generators), sinks that
//! observe values, and sequence points that order sinks and applies.

use super::types::{Literal, TensorType};
use crate::diag::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ValueDef {
    pub name: String,
    /// The node that defines it (index into `Graph::nodes`).
    pub node: usize,
    /// Written or inferred type; `Some` for every value of a verified graph.
    pub ty: Option<TensorType>,
    pub span: Span,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    pub name: String,
    pub nodes: Vec<Node>,
    pub values: Vec<ValueDef>,
    pub span: Span,
    pub name_span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub results: Vec<ValueId>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// `source @name : ty`, or with `state`, `state @name : ty`: an input read before the
    /// first step whose next value is given by the `update @name` sink (docs/teg.md §8).
    Source {
        name: String,
        ty: TensorType,
        state: bool,
    },
    Apply(Apply),
    View(View),
    Generator(Generator),
    /// `sink @name %v`, or with `update`, `update @name %v`: the value of state `@name` for
    /// the next step, written as the output `name` after the last one.
    Sink {
        name: String,
        value: ValueId,
        update: bool,
    },
    Sequence {
        before: Vec<SeqRef>,
        after: Vec<SeqRef>,
    },
    /// `pin %v`: `%v` stays materialized. It changes no value (the interpreter ignores it);
    /// passes keep the value's own node and make its consumers read it (docs/teg.md §8).
    Pin {
        value: ValueId,
    },
    /// `%d1, %d2 = grad %loss wrt %w1, %w2`: the gradient of the rank-0 float `loss` with
    /// respect to each `wrt` value (one result per `wrt`, of its type). The `grad` pass
    /// replaces it with ordinary ops (docs/passes/grad.md); the interpreter and the backend
    /// never see it.
    Grad {
        loss: ValueId,
        wrt: Vec<ValueId>,
    },
    /// `%y = scatter %base, %idx, %upd axis A reduce R`: `base` with each `upd` element
    /// combined into the position its `idx` element names along `axis` (docs/teg.md §9.1).
    Scatter(Scatter),
}

/// `scatter %base, %idx, %upd axis A reduce R [on N]` (ONNX ScatterElements): `idx` and `upd`
/// have one shape, of `base`'s rank and sizes but along `axis`; for every coordinate `c` of
/// `upd`, in row-major order, `y[c with axis := idx[c]] = R(y[...], upd[c])`, starting from
/// `base`. `on N` places it on node N under `--mpi`, as an apply's.
#[derive(Clone, Debug, PartialEq)]
pub struct Scatter {
    pub base: ValueId,
    pub idx: ValueId,
    pub upd: ValueId,
    pub axis: usize,
    pub reduce: ScatterReduce,
    pub placement: Option<u32>,
}

/// How a scattered element combines with the one already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterReduce {
    /// Replaces it (duplicates: the last in index order wins).
    None,
    Add,
    Max,
    Min,
}

impl ScatterReduce {
    pub const ALL: [ScatterReduce; 4] = [
        ScatterReduce::None,
        ScatterReduce::Add,
        ScatterReduce::Max,
        ScatterReduce::Min,
    ];
    pub fn name(self) -> &'static str {
        match self {
            ScatterReduce::None => "none",
            ScatterReduce::Add => "add",
            ScatterReduce::Max => "max",
            ScatterReduce::Min => "min",
        }
    }
}

impl Scatter {
    /// The operands, in order: base, indices, updates.
    pub fn operands(&self) -> [ValueId; 3] {
        [self.base, self.idx, self.upd]
    }
    /// The operands, to rewrite in place.
    pub fn operands_mut(&mut self) -> [&mut ValueId; 3] {
        [&mut self.base, &mut self.idx, &mut self.upd]
    }
}

/// `apply @op<params>(args) @[lo:hi, ...] on N`
#[derive(Clone, Debug, PartialEq)]
pub struct Apply {
    pub op: String,
    pub params: Vec<(String, i64)>,
    pub args: Vec<ValueId>,
    /// The index sub-range this apply computes (a shard); `None` is the whole index space.
    pub range: Option<Vec<(i64, i64)>>,
    /// The node this apply is placed on.
    pub placement: Option<u32>,
    pub op_span: Span,
}

/// Where the parts of an apply are written (kept by lowering beside the graph, for
/// diagnostics): each argument, each parameter's name and each `lo:hi` of its range.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApplySpans {
    pub args: Vec<Span>,
    pub params: Vec<Span>,
    pub range: Vec<Span>,
}

/// A selector: a zero-copy view of its operands.
#[derive(Clone, Debug, PartialEq)]
pub enum View {
    Transpose {
        arg: ValueId,
        perm: Vec<usize>,
    },
    Reverse {
        arg: ValueId,
        dims: Vec<usize>,
    },
    Slice {
        arg: ValueId,
        dims: Vec<SliceDim>,
    },
    Squeeze {
        arg: ValueId,
        dims: Vec<usize>,
    },
    Unsqueeze {
        arg: ValueId,
        dims: Vec<usize>,
    },
    Broadcast {
        arg: ValueId,
        shape: Vec<i64>,
    },
    Reshape {
        arg: ValueId,
        shape: Vec<i64>,
    },
    Concat {
        args: Vec<ValueId>,
        axis: usize,
    },
    Interleave {
        args: Vec<ValueId>,
        axis: usize,
    },
    Repeat {
        arg: ValueId,
        times: i64,
        axis: usize,
    },
    Pad {
        arg: ValueId,
        widths: Vec<(i64, i64)>,
        mode: PadMode,
    },
}

/// Where each kind of view keeps its operands, written once for [`View::operands`] and
/// [`View::operands_mut`]: `$many` turns a list into a slice, `$one` a single operand.
macro_rules! view_operands {
    ($view:expr, $many:ident, $one:path) => {
        match $view {
            View::Concat { args, .. } | View::Interleave { args, .. } => args.$many(),
            View::Transpose { arg, .. }
            | View::Reverse { arg, .. }
            | View::Slice { arg, .. }
            | View::Squeeze { arg, .. }
            | View::Unsqueeze { arg, .. }
            | View::Broadcast { arg, .. }
            | View::Reshape { arg, .. }
            | View::Repeat { arg, .. }
            | View::Pad { arg, .. } => $one(arg),
        }
    };
}

impl View {
    pub fn name(&self) -> &'static str {
        match self {
            View::Transpose { .. } => "transpose",
            View::Reverse { .. } => "reverse",
            View::Slice { .. } => "slice",
            View::Squeeze { .. } => "squeeze",
            View::Unsqueeze { .. } => "unsqueeze",
            View::Broadcast { .. } => "broadcast",
            View::Reshape { .. } => "reshape",
            View::Concat { .. } => "concat",
            View::Interleave { .. } => "interleave",
            View::Repeat { .. } => "repeat",
            View::Pad { .. } => "pad",
        }
    }
    /// The operands, in order.
    pub fn operands(&self) -> &[ValueId] {
        view_operands!(self, as_slice, std::slice::from_ref)
    }
    /// The operands, in order, to rewrite in place.
    pub fn operands_mut(&mut self) -> &mut [ValueId] {
        view_operands!(self, as_mut_slice, std::slice::from_mut)
    }
    /// Calls `f` on every operand, in order, so it can be rewritten.
    pub fn for_each_arg_mut(&mut self, f: impl FnMut(&mut ValueId)) {
        self.operands_mut().iter_mut().for_each(f)
    }
    /// The operands as an owned list.
    pub fn args(&self) -> Vec<ValueId> {
        self.operands().to_vec()
    }
}

/// One dimension of a slice, `start:stop:step` with Python meaning. After verification it is
/// canonical: `start` and `step` explicit and in range, `stop` explicit unless a negative step
/// runs past index 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SliceDim {
    pub start: Option<i64>,
    pub stop: Option<i64>,
    pub step: Option<i64>,
}

impl SliceDim {
    /// The canonical slice of `count` elements from `start` by `step`: `stop` is one step
    /// past the last element, or `None` when that is before index 0.
    pub fn from_count(start: i64, step: i64, count: i64) -> SliceDim {
        let stop = if count == 0 {
            start
        } else {
            start + (count - 1) * step + step.signum()
        };
        SliceDim {
            start: Some(start),
            stop: (stop >= 0).then_some(stop),
            step: Some(step),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    Constant(Literal),
    Reflect,
}

/// A generator: a tensor computed from its coordinates, never read from anywhere.
#[derive(Clone, Debug, PartialEq)]
pub struct Generator {
    pub kind: GenKind,
    pub ty: TensorType,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GenKind {
    Zeros,
    Ones,
    Full(Literal),
    /// The coordinate along `axis`.
    Iota {
        axis: usize,
    },
    /// A deterministic function of `seed` and the coordinates (see docs/teg.md).
    Rand {
        seed: u64,
    },
}

impl GenKind {
    pub fn name(&self) -> &'static str {
        match self {
            GenKind::Zeros => "zeros",
            GenKind::Ones => "ones",
            GenKind::Full(_) => "full",
            GenKind::Iota { .. } => "iota",
            GenKind::Rand { .. } => "rand",
        }
    }
}

/// What a sequence point orders: a sink (by name) or the apply that defines a value.
#[derive(Clone, Debug, PartialEq)]
pub enum SeqRef {
    Sink(String),
    Value(ValueId),
}

impl NodeKind {
    /// The values this node reads.
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            NodeKind::Apply(a) => a.args.clone(),
            NodeKind::View(v) => v.operands().to_vec(),
            NodeKind::Sink { value, .. } | NodeKind::Pin { value } => vec![*value],
            NodeKind::Grad { loss, wrt } => {
                std::iter::once(*loss).chain(wrt.iter().copied()).collect()
            }
            NodeKind::Scatter(s) => s.operands().to_vec(),
            NodeKind::Source { .. } | NodeKind::Generator(_) | NodeKind::Sequence { .. } => vec![],
        }
    }
}

impl Graph {
    pub fn value(&self, id: ValueId) -> &ValueDef {
        &self.values[id.index()]
    }
    pub fn ty(&self, id: ValueId) -> Option<&TensorType> {
        self.values[id.index()].ty.as_ref()
    }
    pub fn find_value(&self, name: &str) -> Option<ValueId> {
        self.values
            .iter()
            .position(|v| v.name == name)
            .map(|i| ValueId(i as u32))
    }
    pub fn sinks(&self) -> impl Iterator<Item = (&str, ValueId)> {
        self.nodes.iter().filter_map(|n| match &n.kind {
            NodeKind::Sink { name, value, .. } => Some((name.as_str(), *value)),
            _ => None,
        })
    }
    /// Per value: named by a `pin` statement.
    pub fn pinned(&self) -> Vec<bool> {
        let mut p = vec![false; self.values.len()];
        for n in &self.nodes {
            if let NodeKind::Pin { value } = n.kind {
                p[value.index()] = true;
            }
        }
        p
    }
    /// Whether a `grad` statement is left for the `grad` pass to lower.
    pub fn has_grad(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| matches!(n.kind, NodeKind::Grad { .. }))
    }
    pub fn sources(&self) -> impl Iterator<Item = (&str, &TensorType, ValueId)> {
        self.nodes.iter().filter_map(|n| match &n.kind {
            NodeKind::Source { name, ty, .. } => Some((name.as_str(), ty, n.results[0])),
            _ => None,
        })
    }
    /// The state sources (`state @name : ty`), in declaration order.
    pub fn states(&self) -> impl Iterator<Item = (&str, &TensorType, ValueId)> {
        self.nodes.iter().filter_map(|n| match &n.kind {
            NodeKind::Source {
                name,
                ty,
                state: true,
            } => Some((name.as_str(), ty, n.results[0])),
            _ => None,
        })
    }
    /// The `update @name %v` statements: each state's next value.
    pub fn updates(&self) -> impl Iterator<Item = (&str, ValueId)> {
        self.nodes.iter().filter_map(|n| match &n.kind {
            NodeKind::Sink {
                name,
                value,
                update: true,
            } => Some((name.as_str(), *value)),
            _ => None,
        })
    }
    /// Whether the graph declares state (runs of more than one step carry it).
    pub fn has_state(&self) -> bool {
        self.states().next().is_some()
    }
}
