//! Import-time simplification of the generic node list, before lowering: fewer passes over
//! memory for the conv nets' elementwise tails, as onnxruntime's graph optimizer does.
//!
//! - **Per-channel affines folded into a convolution.** A `Conv` with constant weights (and
//!   bias: initializers, `Constant`s, `ConstantOfShape` fills and reshapes of them) whose
//!   only consumer is an inference `BatchNormalization`, or a `Mul`/`Add`/`Sub`/`Div` by a
//!   constant that is a scalar or varies only along the output channel, absorbs that consumer:
//!   `W'[o] = W[o]·s[o]`, `B'[o] = B[o]·s[o] + t[o]`, computed in f64 and stored as a new
//!   initializer (a weight source of the TEG). Repeated while it applies, so
//!   `Conv → BatchNormalization → Mul c → Add c` is one convolution.
//! - **Elementwise chains as one node.** A run of elementwise nodes (`Add`, `Clip`, `Mul`,
//!   `Div`, `HardSigmoid`, `Relu`...) whose run-time operands all derive from one value (the
//!   *root*) and whose other operands are scalar constants, with no intermediate used outside
//!   the run, becomes one node whose [`Node::chain`] lists the originals: it lowers to one
//!   elementwise apply (one expression over the root; `HardSwish` exported as
//!   `Add 3, Clip 0 6, Mul, Div 6` is one kernel), or, when the expression cannot be built at
//!   lowering (an integer dtype, a constant that is not a scalar), to the original nodes.
//!
//! Only float32/float64 convolutions are folded (a 16-bit fold would round differently from
//! the unfolded model). Values named by the graph's outputs are never folded away.

use super::elem;
use super::model::{Attr, Graph, Node};
use std::collections::{HashMap, HashSet};
use tapc_runtime::{DType, Tensor};

/// Operators a chain may hold (elementwise; scalar-constant operands only).
const CHAIN_OPS: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Clip",
    "Relu",
    "LeakyRelu",
    "HardSigmoid",
    "HardSwish",
    "Sigmoid",
    "Tanh",
    "Neg",
    "Abs",
    "Exp",
    "Sqrt",
    "Elu",
];

/// Simplifies `g` in place: conv folds first, then chains.
pub fn run(g: &mut Graph) {
    fold_convs(g);
    fuse_chains(g);
}

/// The constants of `g` by value name: initializers, `Constant` nodes, and `Reshape`s of
/// constants by constant shapes.
fn constants(g: &Graph) -> HashMap<String, Tensor> {
    let mut out: HashMap<String, Tensor> = g.initializers.iter().cloned().collect();
    for n in &g.nodes {
        let t = match n.op_type.as_str() {
            "Constant" if n.domain.is_empty() => match n.attr("value") {
                Some(Attr::Tensor(t)) => Some(t.clone()),
                _ => None,
            },
            "Reshape" if n.domain.is_empty() => reshaped(&out, n),
            "ConstantOfShape" if n.domain.is_empty() => filled(&out, n),
            _ => None,
        };
        if let (Some(t), Some(o)) = (t, n.outputs.first()) {
            out.insert(o.clone(), t);
        }
    }
    out
}

/// Elements of the largest `ConstantOfShape` fill [`constants`] builds.
const FILL_ELEMENTS: usize = 1 << 26;

/// `ConstantOfShape(shape)` of a constant shape (the `onnx` wheel's ImageNet nets hold their
/// weights and BatchNormalization parameters as such fills, so their convs fold too).
fn filled(consts: &HashMap<String, Tensor>, n: &Node) -> Option<Tensor> {
    let dims = elem::to_i64s(&consts.get(n.input(0)?)?.data);
    let shape: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect::<Option<_>>()?;
    tapc_runtime::checked_numel(&shape).filter(|&k| k <= FILL_ELEMENTS)?;
    let value = match n.attr("value") {
        Some(Attr::Tensor(t)) => Some(t),
        _ => None,
    };
    elem::filled(value, shape)
}

/// `Reshape(c, shape)` of constants, with ONNX's `0` (copy, unless `allowzero`) and `-1`.
fn reshaped(consts: &HashMap<String, Tensor>, n: &Node) -> Option<Tensor> {
    let t = consts.get(n.input(0)?)?;
    let dims = elem::to_i64s(&consts.get(n.input(1)?)?.data);
    if matches!(n.attr("allowzero"), Some(Attr::Int(1))) {
        return None;
    }
    let numel = t.shape.iter().product::<usize>();
    let mut shape = Vec::new();
    let mut infer = None;
    for (i, &d) in dims.iter().enumerate() {
        match d {
            0 => shape.push(*t.shape.get(i)?),
            -1 if infer.is_none() => {
                infer = Some(i);
                shape.push(1);
            }
            d if d > 0 => shape.push(d as usize),
            _ => return None,
        }
    }
    let known = shape.iter().product::<usize>();
    if let Some(i) = infer {
        if known == 0 || numel % known != 0 {
            return None;
        }
        shape[i] = numel / known;
    }
    (shape.iter().product::<usize>() == numel).then(|| Tensor {
        shape,
        data: t.data.clone(),
    })
}

/// How many times each value is read (graph outputs count as reads).
fn use_counts(g: &Graph) -> HashMap<String, usize> {
    let mut uses = HashMap::new();
    let names = g.nodes.iter().flat_map(|n| n.inputs.iter());
    for name in names.chain(g.outputs.iter().map(|o| &o.name)) {
        if !name.is_empty() {
            *uses.entry(name.clone()).or_insert(0) += 1;
        }
    }
    uses
}

/// A convolution being folded: its weights and bias (f64), the weights' shape and dtype.
struct Folding {
    w: Vec<f64>,
    b: Vec<f64>,
    shape: Vec<usize>,
    dtype: DType,
}

/// Folds per-channel affines into the convolutions that produce them.
fn fold_convs(g: &mut Graph) {
    let consts = constants(g);
    let uses = use_counts(g);
    let mut dead = HashSet::new();
    let mut fresh = Vec::new();
    for i in 0..g.nodes.len() {
        let Some(mut f) = folding(&consts, &g.nodes[i]) else {
            continue;
        };
        let mut folded = false;
        loop {
            let y = g.nodes[i].outputs[0].clone();
            if uses.get(&y) != Some(&1) {
                break;
            }
            let Some(j) = (i + 1..g.nodes.len()).find(|&j| g.nodes[j].inputs.contains(&y)) else {
                break;
            };
            let Some((s, t)) = channel_affine(
                &consts,
                &g.nodes[j],
                &y,
                (f.b.len(), f.shape.len(), f.dtype),
            ) else {
                break;
            };
            f.apply(&s, &t);
            g.nodes[i].outputs[0] = g.nodes[j].outputs[0].clone();
            g.nodes[j].inputs.clear();
            g.nodes[j].outputs.clear();
            dead.insert(j);
            folded = true;
        }
        if folded {
            let n = &mut g.nodes[i];
            let base = format!("{}.folded", n.outputs[0]);
            let (w, b) = f.tensors();
            n.inputs.truncate(2);
            n.inputs[1] = format!("{base}_w");
            n.inputs.push(format!("{base}_b"));
            fresh.push((n.inputs[1].clone(), w));
            fresh.push((n.inputs[2].clone(), b));
        }
    }
    let mut k = 0;
    g.nodes.retain(|_| {
        k += 1;
        !dead.contains(&(k - 1))
    });
    g.initializers.extend(fresh);
}

/// The weights and bias of `n` when it is a plain `Conv` with constant float32/float64 ones.
fn folding(consts: &HashMap<String, Tensor>, n: &Node) -> Option<Folding> {
    if n.op_type != "Conv" || !n.domain.is_empty() || n.outputs.len() != 1 {
        return None;
    }
    let w = consts.get(n.input(1)?)?;
    let dtype = w.dtype();
    if !matches!(dtype, DType::F32 | DType::F64) || w.shape.len() < 3 || w.shape[0] == 0 {
        return None;
    }
    let o = w.shape[0];
    let b = match n.input(2) {
        None => vec![0.0; o],
        Some(name) => {
            let b = consts.get(name)?;
            if b.dtype() != dtype || b.shape != [o] {
                return None;
            }
            elem::to_f64s(&b.data)
        }
    };
    Some(Folding {
        w: elem::to_f64s(&w.data),
        b,
        shape: w.shape.clone(),
        dtype,
    })
}

impl Folding {
    /// `y·s + t` per output channel.
    fn apply(&mut self, s: &[f64], t: &[f64]) {
        let per = self.w.len() / self.b.len();
        for (o, chunk) in self.w.chunks_mut(per).enumerate() {
            chunk.iter_mut().for_each(|v| *v *= s[o]);
            self.b[o] = self.b[o] * s[o] + t[o];
        }
    }
    fn tensors(&self) -> (Tensor, Tensor) {
        let w = Tensor {
            shape: self.shape.clone(),
            data: elem::from_f64s(self.dtype, &self.w),
        };
        let b = Tensor {
            shape: vec![self.b.len()],
            data: elem::from_f64s(self.dtype, &self.b),
        };
        (w, b)
    }
}

/// `n` as `y ↦ y·s + t` per channel (of `o`), when `n` is an affine of the conv output `y`
/// (of rank `rank`) by constants that do not change its shape.
fn channel_affine(
    consts: &HashMap<String, Tensor>,
    n: &Node,
    y: &str,
    (o, rank, dtype): (usize, usize, DType),
) -> Option<(Vec<f64>, Vec<f64>)> {
    if !n.domain.is_empty() || n.outputs.len() != 1 || n.input(0).is_none() {
        return None;
    }
    if n.op_type == "BatchNormalization" {
        return batchnorm(consts, n, y, (o, dtype));
    }
    let (first, other) = match (n.input(0)?, n.input(1)?) {
        (a, b) if a == y && b != y => (true, b),
        (a, b) if b == y && a != y => (false, a),
        _ => return None,
    };
    if n.inputs.len() != 2 {
        return None;
    }
    let c = consts.get(other).filter(|c| c.dtype() == dtype)?;
    let c = per_channel(c, o, rank)?;
    let ones = vec![1.0; o];
    let zeros = vec![0.0; o];
    match (n.op_type.as_str(), first) {
        ("Mul", _) => Some((c, zeros)),
        ("Add", _) => Some((ones, c)),
        ("Sub", true) => Some((ones, c.iter().map(|v| -v).collect())),
        ("Sub", false) => Some((vec![-1.0; o], c)),
        ("Div", true) if c.iter().all(|v| *v != 0.0) => {
            Some((c.iter().map(|v| 1.0 / v).collect(), zeros))
        }
        _ => None,
    }
}

/// A constant's values per output channel `o` of a conv output `[N, O, ...]` of rank `rank`:
/// a scalar (rank 0 or 1 of size 1) or a tensor of rank ≤ `rank` whose only non-unit dim lines
/// up with the channel axis under numpy broadcasting; `None` for anything that would broadcast
/// the output to another shape.
fn per_channel(t: &Tensor, o: usize, rank: usize) -> Option<Vec<f64>> {
    let v = elem::to_f64s(&t.data);
    if v.len() == 1 && t.shape.len() <= 1 {
        return Some(vec![v[0]; o]);
    }
    let r = t.shape.len();
    if r > rank || r + 1 < rank {
        return None;
    }
    let axis = r + 1 - rank;
    let ok = t
        .shape
        .iter()
        .enumerate()
        .all(|(i, &d)| d == 1 || (i == axis && d == o));
    (ok && v.len() == o).then_some(v)
}

/// An inference `BatchNormalization` of `y` with constant parameters of `o` channels.
fn batchnorm(
    consts: &HashMap<String, Tensor>,
    n: &Node,
    y: &str,
    (o, dtype): (usize, DType),
) -> Option<(Vec<f64>, Vec<f64>)> {
    let training = matches!(n.attr("training_mode"), Some(Attr::Int(v)) if *v != 0);
    if n.input(0)? != y || training || n.inputs.len() != 5 {
        return None;
    }
    let mut p = Vec::new();
    for i in 1..5 {
        let t = consts.get(n.input(i)?)?;
        if t.shape != [o] || t.dtype() != dtype {
            return None;
        }
        p.push(elem::to_f64s(&t.data));
    }
    let eps = match n.attr("epsilon") {
        Some(Attr::Float(e)) => f64::from(*e),
        _ => 1e-5,
    };
    let s: Vec<f64> = (0..o).map(|c| p[0][c] / (p[3][c] + eps).sqrt()).collect();
    let t = (0..o).map(|c| p[1][c] - p[2][c] * s[c]).collect();
    Some((s, t))
}

/// A chain being grown: its root value and member node indices.
struct Chain {
    root: String,
    members: Vec<usize>,
}

/// Replaces runs of elementwise nodes over one root by chain nodes.
fn fuse_chains(g: &mut Graph) {
    let consts = constants(g);
    let mut chains: Vec<Chain> = Vec::new();
    let mut member_of: HashMap<String, usize> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let Some(data) = chain_operands(&consts, n) else {
            continue;
        };
        let groups: HashSet<Option<usize>> =
            data.iter().map(|v| member_of.get(*v).copied()).collect();
        let joined = match groups.iter().flatten().collect::<Vec<_>>()[..] {
            [&c] if data
                .iter()
                .all(|v| member_of.get(*v) == Some(&c) || *v == chains[c].root) =>
            {
                Some(c)
            }
            [] if data.iter().all(|v| *v == data[0]) => {
                chains.push(Chain {
                    root: data[0].to_string(),
                    members: vec![],
                });
                Some(chains.len() - 1)
            }
            _ => None,
        };
        if let Some(c) = joined {
            chains[c].members.push(i);
            member_of.insert(n.outputs[0].clone(), c);
        }
    }
    let uses = use_counts(g);
    let mut replace: HashMap<usize, Node> = HashMap::new();
    let mut dead = HashSet::new();
    for c in &chains {
        let k = valid_prefix(g, &uses, &c.members);
        if k < 2 {
            continue;
        }
        let ms = &c.members[..k];
        let last = &g.nodes[ms[k - 1]];
        let node = Node {
            inputs: vec![c.root.clone()],
            chain: ms.iter().map(|&m| g.nodes[m].clone()).collect(),
            ..last.clone()
        };
        replace.insert(ms[k - 1], node);
        dead.extend(ms[..k - 1].iter().copied());
    }
    let old = std::mem::take(&mut g.nodes);
    for (i, n) in old.into_iter().enumerate() {
        if let Some(r) = replace.remove(&i) {
            g.nodes.push(r);
        } else if !dead.contains(&i) {
            g.nodes.push(n);
        }
    }
}

/// The run-time operands of `n` when it may join a chain: an elementwise node of the default
/// domain with one output whose other operands are scalar float constants.
fn chain_operands<'n>(consts: &HashMap<String, Tensor>, n: &'n Node) -> Option<Vec<&'n str>> {
    if !n.domain.is_empty() || !CHAIN_OPS.contains(&n.op_type.as_str()) || n.outputs.len() != 1 {
        return None;
    }
    let binary = ["Add", "Sub", "Mul", "Div"].contains(&n.op_type.as_str());
    if (binary && n.inputs.len() != 2) || (!binary && n.op_type != "Clip" && n.inputs.len() != 1) {
        return None;
    }
    let mut data = Vec::new();
    for (i, name) in n.inputs.iter().enumerate() {
        match consts.get(name) {
            _ if name.is_empty() => {}
            Some(t) if t.shape.iter().product::<usize>() == 1 && t.shape.len() <= 1 => {
                if !t.dtype().is_float() {
                    return None;
                }
            }
            Some(_) => return None,
            None if i == 0 || binary => data.push(name.as_str()),
            None => return None,
        }
    }
    (!data.is_empty()).then_some(data)
}

/// How many of `members` (from the first) form a chain whose intermediate values are read
/// only inside it and are not graph outputs.
fn valid_prefix(g: &Graph, uses: &HashMap<String, usize>, members: &[usize]) -> usize {
    (2..=members.len())
        .rev()
        .find(|&k| {
            let inside = &members[..k];
            inside[..k - 1].iter().all(|&m| {
                let v = &g.nodes[m].outputs[0];
                let reads: usize = inside
                    .iter()
                    .map(|&u| g.nodes[u].inputs.iter().filter(|x| *x == v).count())
                    .sum();
                uses.get(v) == Some(&reads)
            })
        })
        .unwrap_or(0)
}
