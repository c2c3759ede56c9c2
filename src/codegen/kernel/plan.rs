//! Loop structure decided before code generation, also used by the scheduler: which
//! parallel variables are fused around all statements (softmax's rows) and which one the
//! executor may split a task along.

use crate::codegen::epilogue::inline_epilogues;
use crate::codegen::view::SView;
use crate::ir::instance::visit_loads;
use crate::ir::instance::{walk, Affine, CExpr, CKind, CStmt, Instance, Src, Target};

/// Loop structure decided before code generation (also used by the scheduler).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelPlan {
    /// Variables looped once around all statements, outermost first.
    pub fused: Vec<usize>,
    /// A parallel variable the task may be split along.
    pub split: Option<usize>,
    /// Chunk boundaries along `split` are multiples of this.
    pub align: i64,
}

/// Which parallel variables can be fused/split: every statement is indexed by them and every
/// temporary is read exactly at them.
fn fusable(inst: &Instance, stmts: &[CStmt]) -> Vec<bool> {
    let np = inst.parallel;
    let mut ok: Vec<bool> = (0..np)
        .map(|v| stmts.iter().all(|s| s.vars.contains(&v)))
        .collect();
    for st in stmts {
        visit_loads(&st.value, &mut |src, index| {
            let Src::Temp(t) = src else { return };
            for (d, a) in index.iter().enumerate() {
                let w = inst.temps[t].vars[d];
                let exact = a.constant == 0
                    && a.terms
                        .iter()
                        .all(|&(v, c)| if v == w { c == 1 } else { c == 0 })
                    && a.coeff(w) == 1;
                if !exact && w < np {
                    ok[w] = false;
                }
            }
        });
    }
    ok
}

/// The variable among `vars` (a target's dims) along which `strides` is smallest.
fn lane_of(inst: &Instance, vars: &[usize], strides: &[i64]) -> Option<usize> {
    let mut best: Option<(i64, usize)> = None;
    for (d, &v) in vars.iter().enumerate() {
        if inst.extent(v) <= 1 {
            continue;
        }
        let s = strides.get(d).map_or(i64::MAX, |s| s.abs());
        if best.is_none_or(|(bs, _)| s <= bs) {
            best = Some((s, v));
        }
    }
    best.map(|b| b.1)
}

/// A non-lane split dimension shorter than this gives way to a wide lane dimension: each row
/// chunk packs the whole reused operand, which costs more than a chunk's arithmetic below
/// about 256 rows (70×2212×1562 scaled 1.12× on 2 threads split by rows, 1.90× by columns).
const SHORT_SPLIT: i64 = 256;

/// Chunks a split wants at least (2 per thread on 2 threads).
const FEW_CHUNKS: i64 = 4;

/// Chunk boundaries along a split variable other than the lanes: multiples of a register
/// block's 8 rows, or of fewer where that leaves under [`FEW_CHUNKS`] blocks. (A batch of 8
/// was one block of 8, so a task over it never split.)
fn row_align(extent: i64) -> i64 {
    let mut a = 8;
    while a > 1 && extent < FEW_CHUNKS * a {
        a /= 2;
    }
    a
}

/// The top-level reductions of `e` (not those nested in another): their variables and body.
fn top_reductions<'e>(e: &'e CExpr, out: &mut Vec<(&'e [usize], &'e CExpr)>) {
    match &e.kind {
        CKind::Reduce { vars, body, .. } => out.push((vars, body)),
        CKind::Call(_, a) => a.iter().for_each(|x| top_reductions(x, out)),
        CKind::Unary(_, a) => top_reductions(a, out),
        CKind::Binary(_, a, b) => {
            top_reductions(a, out);
            top_reductions(b, out);
        }
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } | CKind::Gather(_) => {}
    }
}

/// The variables of a convolution statement `st` by role: one top-level reduction over at
/// least two variables of exactly two loads, an input read through a window (an index
/// dimension moving with an output and a reduction variable, `s·p + d·k`) and a filter.
/// Returns the output-channel variables (the filter moves with them, the input does not)
/// and the position variables (the input moves with them, the filter does not); a group
/// variable moves both and is neither.
pub fn conv_roles(st: &CStmt) -> Option<(Vec<usize>, Vec<usize>)> {
    let mut reds = Vec::new();
    top_reductions(&st.value, &mut reds);
    let [(rvars, body)] = reds[..] else {
        return None;
    };
    let mut loads: Vec<(Src, Vec<Affine>)> = Vec::new();
    let mut gathers = false;
    walk(
        body,
        &mut |e, _| match &e.kind {
            CKind::Load { src, index, .. }
                if !loads.iter().any(|l| l.0 == *src && l.1 == *index) =>
            {
                loads.push((src.clone(), index.clone()));
            }
            CKind::Gather(_) | CKind::Reduce { .. } => gathers = true,
            _ => {}
        },
        &mut vec![],
    );
    let moves = |ix: &[Affine], v: usize| ix.iter().any(|a| a.coeff(v) != 0);
    let window = |ix: &[Affine]| {
        ix.iter().any(|a| {
            rvars.iter().any(|&r| a.coeff(r) != 0) && st.vars.iter().any(|&v| a.coeff(v) != 0)
        })
    };
    let [a, b] = &loads[..] else { return None };
    let (x, w) = match (window(&a.1[..]), window(&b.1[..])) {
        (true, false) => (&a.1[..], &b.1[..]),
        (false, true) => (&b.1[..], &a.1[..]),
        _ => return None,
    };
    if rvars.len() < 2 || gathers {
        return None;
    }
    let of = |f: &dyn Fn(usize) -> bool| -> Vec<usize> {
        st.vars.iter().copied().filter(|&v| f(v)).collect()
    };
    let chans: Vec<usize> = of(&|v: usize| moves(w, v) && !moves(x, v));
    let pos: Vec<usize> = of(&|v: usize| moves(x, v) && !moves(w, v));
    (!chans.is_empty() && !pos.is_empty()).then_some((chans, pos))
}

/// For a convolution `out` whose split would be `other`: a position variable to split instead
/// when `other` is an output-channel variable and the task has more output positions than
/// output channels, or when `other` has too few values for [`FEW_CHUNKS`] chunks (3 groups, a
/// batch of 3) and a position variable has more. Each chunk of a split along the channels
/// gathers (or packs, per output row) the input patches of every position, each chunk of a
/// split along the positions packs the whole filter: the smaller of the two is the one to
/// repeat. Positions split in rows of any count (the implicit GEMM flattens them; the direct
/// path loops over rows outside its register blocks), so such a split needs no alignment.
fn conv_split(
    inst: &Instance,
    out: &CStmt,
    other: usize,
    lane: Option<usize>,
    ok: &dyn Fn(usize) -> bool,
) -> Option<usize> {
    let (chans, pos) = conv_roles(out)?;
    let size = |vs: &[usize]| vs.iter().map(|&v| inst.extent(v)).product::<i64>();
    let fewer = chans.contains(&other) && size(&pos) > size(&chans);
    let few = inst.extent(other) < FEW_CHUNKS;
    if !fewer && !few {
        return None;
    }
    pos.iter().copied().find(|&v| {
        let more = if fewer { 2 } else { inst.extent(other) + 1 };
        ok(v) && Some(v) != lane && inst.extent(v) >= more
    })
}

/// Decides fusion and splitting for `inst` writing `outputs`.
pub fn plan(inst: &Instance, outputs: &[SView], lanes: u32) -> KernelPlan {
    let none = KernelPlan {
        fused: vec![],
        split: None,
        align: 1,
    };
    if inst.stmts.is_none() {
        return none;
    }
    let stmts = &inline_epilogues(inst)[..];
    let ok = fusable(inst, stmts);
    let out = stmts.iter().find_map(|s| match s.target {
        Target::Output(k) => Some((s, k)),
        Target::Temp(_) => None,
    });
    let Some((out, k)) = out else { return none };
    let lane = lane_of(inst, &out.vars, &outputs[k].strides);
    let is_ok = |v: usize| v < ok.len() && ok[v];
    let fused: Vec<usize> = if stmts.len() > 1 {
        out.vars
            .iter()
            .copied()
            .filter(|&v| is_ok(v) && Some(v) != lane)
            .collect()
    } else {
        vec![]
    };
    let lane_split = lane.filter(|&l| is_ok(l) && inst.extent(l) >= 2);
    let wide_lane = lane_split.is_some_and(|l| inst.extent(l) >= 8 * lanes as i64);
    // A short other dimension (a matmul with 16 rows) splits into few chunks that each pack
    // the whole reused operand; a wide lane dimension splits evenly, each chunk packing its
    // own columns.
    let other = out
        .vars
        .iter()
        .copied()
        .find(|&v| is_ok(v) && Some(v) != lane && inst.extent(v) >= 2)
        .filter(|&v| inst.extent(v) >= SHORT_SPLIT || !wide_lane);
    let positions = other
        .filter(|_| stmts.len() == 1)
        .and_then(|o| conv_split(inst, out, o, lane, &is_ok));
    let split = fused
        .iter()
        .copied()
        .find(|&v| inst.extent(v) >= 2)
        .or(positions)
        .or(other)
        .or(lane_split);
    let align = match split {
        Some(s) if Some(s) == lane => 4 * lanes as i64,
        Some(s) if Some(s) == positions => 1,
        Some(s) => row_align(inst.extent(s)),
        None => 8,
    };
    KernelPlan {
        fused,
        split,
        align,
    }
}
