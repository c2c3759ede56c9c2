//! Loop structure decided before code generation, also used by the scheduler: which
//! parallel variables are fused around all statements (softmax's rows) and which one the
//! executor may split a task along.

use crate::codegen::epilogue::inline_epilogues;
use crate::codegen::view::SView;
use crate::ir::instance::visit_loads;
use crate::ir::instance::{CStmt, Instance, Src, Target};

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
    let split = fused
        .iter()
        .copied()
        .find(|&v| inst.extent(v) >= 2)
        .or(other)
        .or(lane_split);
    let align = if split.is_some() && split == lane {
        4 * lanes as i64
    } else {
        8
    };
    KernelPlan {
        fused,
        split,
        align,
    }
}
