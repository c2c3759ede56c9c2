//! Differential check of the alias analysis against the interpreter on random view chains:
//! every source element holds a unique number (`1_000_000 * source + flat index`), constant
//! padding is -1, and each view's sink then lists exactly the root elements it reads.

use super::alias_analysis::{compile, flat, id, unravel};
use std::collections::BTreeMap;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use tapc::ir::graph::ValueId;
use tapc::passes::alias::analysis::*;
use tapc::passes::alias::region::Region;
use tapc::passes::alias::regions::Regions;
use tapc::passes::alias::sett::Sett;
use tapc_runtime::{Data, Tensor};

use crate::common::Rng;

fn ints(v: &[i64]) -> String {
    let s: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("[{}]", s.join(", "))
}

/// A view's TEG text (after `=`) and its result shape.
type Made = (String, Vec<i64>);

/// A random view of `%x` (shape `s`) as TEG text and its result shape; `pool` holds the
/// values defined so far (for concat/interleave partners).
fn random_view(rng: &mut Rng, x: &str, s: &[i64], pool: &[Made]) -> Option<Made> {
    let rank = s.len();
    match rng.below_i64(11) {
        0 if rank > 0 => Some(random_transpose(rng, x, s)),
        1 if rank > 0 => Some(random_reverse(rng, x, s)),
        2 | 3 if rank > 0 && !s.contains(&0) => Some(random_slice(rng, x, s)),
        4 => random_squeeze(rng, x, s),
        5 => Some(random_broadcast(rng, x, s)),
        6 => random_reshape(rng, x, s),
        7 if rank > 0 => Some(random_concat(rng, x, s, pool)),
        8 if rank > 0 => Some(random_interleave(rng, x, s, pool)),
        9 if rank > 0 => Some(random_repeat(rng, x, s)),
        10 if rank > 0 => Some(random_pad(rng, x, s)),
        _ => None,
    }
}

fn random_transpose(rng: &mut Rng, x: &str, s: &[i64]) -> Made {
    let rank = s.len();
    let mut p: Vec<i64> = (0..rank as i64).collect();
    for i in (1..rank).rev() {
        p.swap(i, rng.below_i64(i as i64 + 1) as usize);
    }
    let out = p.iter().map(|&d| s[d as usize]).collect();
    (format!("transpose {x} {}", ints(&p)), out)
}

fn random_reverse(rng: &mut Rng, x: &str, s: &[i64]) -> Made {
    let rank = s.len();
    let mut dims: Vec<i64> = (0..rank as i64).filter(|_| rng.chance(2)).collect();
    if dims.is_empty() {
        dims.push(rng.below_i64(rank as i64));
    }
    (format!("reverse {x} {}", ints(&dims)), s.to_vec())
}

/// A slice with a random step (negative ones included) per dimension of a non-empty `s`.
fn random_slice(rng: &mut Rng, x: &str, s: &[i64]) -> Made {
    let mut parts = Vec::new();
    let mut out = Vec::new();
    for &n in s {
        let step = [1, 1, 2, 3, -1, -2][rng.below_i64(6) as usize];
        if step > 0 {
            let a = rng.below_i64(n);
            let b = a + 1 + rng.below_i64(n - a);
            parts.push(if step == 1 {
                format!("{a}:{b}")
            } else {
                format!("{a}:{b}:{step}")
            });
            out.push((b - a + step - 1) / step);
        } else {
            let a = rng.below_i64(n);
            let b = rng.below_i64(a + 2) - 1; // -1 ..= a
            let stop = if b < 0 { String::new() } else { b.to_string() };
            parts.push(format!("{a}:{stop}:{step}"));
            out.push((a - b + (-step) - 1) / (-step));
        }
    }
    (format!("slice {x} [{}]", parts.join(", ")), out)
}

/// An unsqueeze, or a squeeze of some dimensions of size 1 when there are any.
fn random_squeeze(rng: &mut Rng, x: &str, s: &[i64]) -> Option<Made> {
    let rank = s.len();
    let ones: Vec<i64> = (0..rank as i64).filter(|&d| s[d as usize] == 1).collect();
    if ones.is_empty() || rng.chance(2) {
        if rank >= 4 {
            return None;
        }
        let d = rng.below_i64(rank as i64 + 1);
        let mut out = s.to_vec();
        out.insert(d as usize, 1);
        Some((format!("unsqueeze {x} [{d}]"), out))
    } else {
        let dims: Vec<i64> = ones.iter().copied().filter(|_| rng.chance(2)).collect();
        let dims = if dims.is_empty() { vec![ones[0]] } else { dims };
        let out = (0..rank as i64)
            .filter(|d| !dims.contains(d))
            .map(|d| s[d as usize])
            .collect();
        Some((format!("squeeze {x} {}", ints(&dims)), out))
    }
}

fn random_broadcast(rng: &mut Rng, x: &str, s: &[i64]) -> Made {
    let mut out: Vec<i64> = s
        .iter()
        .map(|&n| if n == 1 { 1 + rng.below_i64(3) } else { n })
        .collect();
    if s.len() < 4 && rng.chance(2) {
        out.insert(0, 1 + rng.below_i64(3));
    }
    (format!("broadcast {x} {}", ints(&out)), out)
}

/// A reshape into up to three random factors of the element count (none when it is 0).
fn random_reshape(rng: &mut Rng, x: &str, s: &[i64]) -> Option<Made> {
    let total: i64 = s.iter().product();
    let mut left = total.max(1);
    let mut out = Vec::new();
    for _ in 0..rng.below_i64(3) {
        let divs: Vec<i64> = (1..=left).filter(|d| left % d == 0).collect();
        let d = divs[rng.below_i64(divs.len() as i64) as usize];
        out.push(d);
        left /= d;
    }
    out.push(left);
    if total == 0 {
        return None;
    }
    Some((format!("reshape {x} {}", ints(&out)), out))
}

/// A concat with a value of `pool` that matches `s` but along the axis.
fn random_concat(rng: &mut Rng, x: &str, s: &[i64], pool: &[Made]) -> Made {
    let rank = s.len();
    let axis = rng.below_i64(rank as i64) as usize;
    let fits = |t: &[i64]| t.len() == rank && (0..rank).all(|d| d == axis || t[d] == s[d]);
    let cands: Vec<&Made> = pool.iter().filter(|(_, t)| fits(t)).collect();
    let (y, t) = cands[rng.below_i64(cands.len() as i64) as usize];
    let mut out = s.to_vec();
    out[axis] += t[axis];
    (format!("concat {x}, %{y} axis {axis}"), out)
}

/// An interleave with one or two values of `pool` of shape `s`.
fn random_interleave(rng: &mut Rng, x: &str, s: &[i64], pool: &[Made]) -> Made {
    let axis = rng.below_i64(s.len() as i64) as usize;
    let cands: Vec<&Made> = pool.iter().filter(|(_, t)| t == s).collect();
    let k = 2 + rng.below_i64(2);
    let names: Vec<String> = (1..k)
        .map(|_| format!("%{}", cands[rng.below_i64(cands.len() as i64) as usize].0))
        .collect();
    let mut out = s.to_vec();
    out[axis] *= k;
    (
        format!("interleave {x}, {} axis {axis}", names.join(", ")),
        out,
    )
}

fn random_repeat(rng: &mut Rng, x: &str, s: &[i64]) -> Made {
    let axis = rng.below_i64(s.len() as i64) as usize;
    let times = if rng.chance(8) {
        0
    } else {
        1 + rng.below_i64(3)
    };
    let mut out = s.to_vec();
    out[axis] *= times;
    (format!("repeat {x} times {times} axis {axis}"), out)
}

/// A constant (-1) or reflect pad of up to 2 elements on each side of every dimension.
fn random_pad(rng: &mut Rng, x: &str, s: &[i64]) -> Made {
    let reflect = rng.chance(2) && s.iter().all(|&n| n >= 1);
    let mut w = Vec::new();
    let mut out = Vec::new();
    for &n in s {
        let max = if reflect { (n - 1).min(2) } else { 2 };
        let (lo, hi) = (rng.below_i64(max + 1), rng.below_i64(max + 1));
        w.push(format!("{lo}:{hi}"));
        out.push(n + lo + hi);
    }
    let mode = if reflect { "reflect" } else { "constant -1" };
    (format!("pad {x} [{}] {mode}", w.join(", ")), out)
}

/// A random program: one or two sources, then a chain-heavy mix of views.
fn random_program(seed: u64) -> (String, Vec<String>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut text = String::from("graph @g {\n");
    let mut pool: Vec<(String, Vec<i64>)> = Vec::new();
    for k in 0..1 + rng.below_i64(2) {
        let shape: Vec<i64> = (0..1 + rng.below_i64(3))
            .map(|_| 1 + rng.below_i64(5))
            .collect();
        let _ = writeln!(text, "  %s{k} = source @s{k} : i64{}", ints(&shape));
        pool.push((format!("s{k}"), shape));
    }
    let mut views = Vec::new();
    for i in 0..4 + rng.below_i64(8) {
        let j = if rng.chance(3) {
            rng.below_i64(pool.len() as i64) as usize
        } else {
            pool.len() - 1
        };
        let (x, s) = pool[j].clone();
        let Some((body, out)) = random_view(&mut rng, &format!("%{x}"), &s, &pool) else {
            continue;
        };
        if out.iter().product::<i64>() > 300 {
            continue;
        }
        let _ = writeln!(text, "  %v{i} = {body}");
        pool.push((format!("v{i}"), out));
        views.push(format!("v{i}"));
    }
    for v in &views {
        let _ = writeln!(text, "  sink @{v} %{v}");
    }
    text.push('}');
    (text, views)
}

fn i64s(t: &Tensor) -> Vec<i64> {
    match &t.data {
        Data::I64(v) => v.clone(),
        d => panic!("unexpected data {d:?}"),
    }
}

/// A random region over `shape`: one or two nested stripes per dimension.
fn random_region(rng: &mut Rng, shape: &[i64]) -> Region {
    let setts = shape
        .iter()
        .map(|_| {
            let triples: Vec<(i64, i64, i64)> = (0..rng.below_i64(3))
                .map(|_| (1 + rng.below_i64(3), rng.below_i64(3), rng.below_i64(7) - 3))
                .collect();
            Sett::from_triples(&triples).unwrap()
        })
        .collect();
    Region::new(shape.to_vec(), setts).unwrap()
}

fn check_program(seed: u64) {
    let (src, views) = random_program(seed);
    let (m, facts) = compile(&src);
    let g = &m.graphs[0];
    let info = analyze(g).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
    let mut inputs = HashMap::new();
    let roots: Vec<(ValueId, i64)> = g
        .sources()
        .enumerate()
        .map(|(k, (_, _, v))| (v, k as i64))
        .collect();
    for (name, ty, _) in g.sources() {
        let k: i64 = name[1..].parse().unwrap();
        let data = (0..ty.elements()).map(|i| 1_000_000 * k + i).collect();
        let shape = ty.shape.iter().map(|&d| d as usize).collect::<Vec<_>>();
        inputs.insert(
            name.to_string(),
            Tensor::new(shape, Data::I64(data)).unwrap(),
        );
    }
    let sinks: HashMap<String, Vec<i64>> = tapc::interp::run(&m, g, &facts[0], &inputs)
        .unwrap()
        .into_iter()
        .map(|(n, t)| (n, i64s(&t)))
        .collect();
    // Brute-force footprint of (part of) a view: root -> flat indices.
    let brute = |data: &[i64], keep: &dyn Fn(usize) -> bool| {
        let mut set: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
        for (i, &x) in data.iter().enumerate() {
            if x >= 0 && keep(i) {
                set.entry(x / 1_000_000).or_default().insert(x % 1_000_000);
            }
        }
        set
    };
    let analysed = |fp: &[(ValueId, Regions)]| {
        let mut set: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
        for &(r, k) in &roots {
            let s = flat(&info, fp, r);
            if !s.is_empty() {
                set.insert(k, s);
            }
        }
        set
    };
    let ctx = |v: &str| format!("seed {seed}, value %{v}\n{src}\n{}", info.report().unwrap());
    let mut rng = Rng(seed | 1);
    let mut sets = Vec::new();
    for name in &views {
        let v = id(g, name);
        let data = &sinks[name.as_str()];
        let want = brute(data, &|_| true);
        assert_eq!(analysed(info.footprint(v)), want, "{}", ctx(name));
        let backed = data.iter().filter(|&&x| x >= 0).count() as i128;
        let distinct: usize = want.values().map(BTreeSet::len).sum();
        assert_eq!(info.backed_elements(v).unwrap(), backed, "{}", ctx(name));
        assert_eq!(
            info.has_self_aliases(v).unwrap(),
            backed > distinct as i128,
            "{}",
            ctx(name)
        );
        // A random sub-region.
        let shape = g.ty(v).unwrap().shape.clone();
        let r = random_region(&mut rng, &shape);
        let fp = info.footprint_of_region(v, &r).unwrap();
        let part = brute(data, &|i| r.contains_point(&unravel(i as i64, &shape)));
        assert_eq!(analysed(&fp), part, "{}\nregion {r}", ctx(name));
        sets.push((v, want));
    }
    let elems = |s: &BTreeMap<i64, BTreeSet<i64>>| -> BTreeSet<(i64, i64)> {
        s.iter()
            .flat_map(|(&k, v)| v.iter().map(move |&i| (k, i)))
            .collect()
    };
    for (a, sa) in &sets {
        for (b, sb) in &sets {
            let (ea, eb) = (elems(sa), elems(sb));
            let names = format!("%{} vs %{}", g.value(*a).name, g.value(*b).name);
            assert_eq!(
                info.aliases(*a, *b).unwrap(),
                !ea.is_disjoint(&eb),
                "{names} {}",
                ctx("")
            );
            assert_eq!(
                info.contains(*a, *b).unwrap(),
                eb.is_subset(&ea),
                "{names} {}",
                ctx("")
            );
        }
    }
}

#[test]
fn footprints_match_the_interpreter_on_random_view_chains() {
    for seed in 0..400 {
        check_program(seed);
    }
}
