//! Unit tests of `tapc::passes::alias::regions`, kept out of the library so that `cargo test` compiles it once.

use proptest::prelude::*;
use tapc::passes::alias::region::{Region, RegionError, SliceDim};
use tapc::passes::alias::regions::*;
use tapc::passes::alias::sett::Sett;

/// A membership test of the points of a shape.
pub type Member<'a> = &'a dyn Fn(&[i64]) -> bool;

/// Checks the intersection, difference, union and complement of two sets with memberships
/// `ma` and `mb` point by point over `pts`, and by count (the pieces are disjoint, so
/// their counts add up exactly).
pub fn check_set_ops(
    pts: &[Vec<i64>],
    ma: Member,
    mb: Member,
    [i, d, u, c]: [&Regions; 4],
) -> Result<(), TestCaseError> {
    for p in pts {
        prop_assert_eq!(i.contains_point(p), ma(p) && mb(p), "{:?} {}", p, i);
        prop_assert_eq!(d.contains_point(p), ma(p) && !mb(p), "{:?} {}", p, d);
        prop_assert_eq!(u.contains_point(p), ma(p) || mb(p), "{:?} {}", p, u);
        prop_assert_eq!(c.contains_point(p), !ma(p), "{:?} {}", p, c);
    }
    let count = |f: &dyn Fn(&[i64]) -> bool| pts.iter().filter(|p| f(p)).count() as i128;
    prop_assert_eq!(i.count(), count(&|p| ma(p) && mb(p)));
    prop_assert_eq!(d.count(), count(&|p| ma(p) && !mb(p)));
    prop_assert_eq!(u.count(), count(&|p| ma(p) || mb(p)));
    prop_assert_eq!(c.count(), count(&|p| !ma(p)));
    Ok(())
}

fn full(shape: &[i64]) -> Regions {
    Regions::full(shape).unwrap()
}

fn sl(start: i64, stop: i64, step: i64) -> SliceDim {
    SliceDim::new(start, stop, step)
}

/// Footprint in the base tensor of the view `base[dims]` (whole view).
fn sliced(base: &[i64], dims: &[SliceDim]) -> Regions {
    let view = Region::sliced_shape(base, dims).unwrap();
    full(&view).fill_into(base, dims).unwrap()
}

#[test]
fn worked_case_reshape_slice_vs_strided() {
    // A = f32[24]; B = A.reshape([4, 6])[:, 3:6]; C = A[0:24:7].
    let b = sliced(&[4, 6], &[sl(0, 4, 1), sl(3, 6, 1)])
        .reshape(&[24])
        .unwrap();
    let c = sliced(&[24], &[sl(0, 24, 7)]);
    assert_eq!(b.count(), 12);
    assert_eq!(c.count(), 4);
    assert!(!b.disjoint(&c).unwrap());
    let i = b.intersect(&c).unwrap();
    assert_eq!(i.count(), 1);
    assert!(i.contains_point(&[21]));
    assert_eq!(i.to_string(), "{[(1,23,21)]}");
}

#[test]
fn worked_case_cube_corner_vs_stride_five() {
    // A = f32[27]; B = A.reshape([3, 3, 3])[0:2, 0:2, 0:2]; C = A[2::5].
    let b = sliced(&[3, 3, 3], &[sl(0, 2, 1), sl(0, 2, 1), sl(0, 2, 1)])
        .reshape(&[27])
        .unwrap();
    let c = sliced(&[27], &[sl(2, 27, 5)]);
    assert_eq!(b.count(), 8);
    let i = b.intersect(&c).unwrap();
    assert_eq!(i.count(), 1);
    assert!(i.contains_point(&[12]));
}

#[test]
fn worked_case_reversed_slice_is_same_set() {
    // A = f32[10]: A[8:2:-2] and A[4:10:2] cover the same elements.
    let b = sliced(&[10], &[sl(8, 2, -2)]);
    let c = sliced(&[10], &[sl(4, 10, 2)]);
    assert!(b.equivalent(&c).unwrap());
    assert_eq!(b, c);
    assert_eq!(b.count(), 3);
}

/// Footprint in X (m x m) of `tiled(X) = X.reshape([m²/4, 4])[:, 0:2]
/// .reshape([4, m²/8])[0:2, :].reshape([m/2, m/2])`, computed backwards.
fn tiled(m: i64) -> Regions {
    let mm = m * m;
    let v = full(&[m / 2, m / 2]).reshape(&[2, mm / 8]).unwrap();
    let v = v
        .fill_into(&[4, mm / 8], &[sl(0, 2, 1), sl(0, mm / 8, 1)])
        .unwrap();
    let v = v.reshape(&[mm / 4, 2]).unwrap();
    let v = v
        .fill_into(&[mm / 4, 4], &[sl(0, mm / 4, 1), sl(0, 2, 1)])
        .unwrap();
    v.reshape(&[m, m]).unwrap()
}

/// B = tiled(A) and C = tiled(A[1:m-3, 1:m-3]) as footprints in A (m x m).
fn tile_footprints(m: i64) -> (Regions, Regions) {
    let window = [sl(1, m - 3, 1), sl(1, m - 3, 1)];
    let c = tiled(m - 4).fill_into(&[m, m], &window).unwrap();
    (tiled(m), c)
}

/// The same views on explicit index arrays (row-major flat A indices).
fn tiled_brute(ids: Vec<i64>, m: i64) -> Vec<i64> {
    let mm = (m * m) as usize;
    let step1: Vec<i64> = (0..mm / 4)
        .flat_map(|r| [ids[4 * r], ids[4 * r + 1]])
        .collect();
    step1[..mm / 4].to_vec()
}

#[test]
fn tile_footprint_size_does_not_depend_on_n() {
    let (b16, c16) = tile_footprints(16);
    let (bbig, cbig) = tile_footprints(1 << 20);
    let i16 = b16.intersect(&c16).unwrap();
    let ibig = bbig.intersect(&cbig).unwrap();
    let size = |r: &Regions| (r.regions().len(), r.num_stripes());
    assert_eq!(size(&b16), size(&bbig), "{b16} vs {bbig}");
    assert_eq!(size(&c16), size(&cbig), "{c16} vs {cbig}");
    assert_eq!(size(&i16), size(&ibig), "{i16} vs {ibig}");
    assert_eq!(bbig.count(), (1i128 << 40) / 4);
    // Check the small case against explicit index arrays.
    let m = 16i64;
    let a: Vec<i64> = (0..m * m).collect();
    let b_ids = tiled_brute(a.clone(), m);
    let sub: Vec<i64> = a
        .iter()
        .copied()
        .filter(|&z| {
            let (r, c) = (z / m, z % m);
            (1..m - 3).contains(&r) && (1..m - 3).contains(&c)
        })
        .collect();
    let c_ids = tiled_brute(sub, m - 4);
    for z in 0..m * m {
        let p = [z / m, z % m];
        assert_eq!(b16.contains_point(&p), b_ids.contains(&z), "B at {p:?}");
        assert_eq!(c16.contains_point(&p), c_ids.contains(&z), "C at {p:?}");
        let both = b_ids.contains(&z) && c_ids.contains(&z);
        assert_eq!(i16.contains_point(&p), both, "B∩C at {p:?}");
    }
    assert!(!b16.disjoint(&c16).unwrap());
    assert!(!bbig.disjoint(&cbig).unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(128) })]

    #[test]
    fn regions_set_ops(
        shape in prop::collection::vec(1i64..=4, 2),
        ta in prop::collection::vec(prop::collection::vec((0i64..4, 0i64..4, -3i64..3), 0..=2), 6),
    ) {
        let mk = |t: &[(i64, i64, i64)]| {
            let t: Vec<_> = t.iter().copied().filter(|s| s.0 + s.1 > 0).collect();
            Sett::from_triples(&t).unwrap()
        };
        let reg = |i: usize| Region::new(shape.clone(), vec![mk(&ta[i]), mk(&ta[i + 1])]).unwrap();
        let a = Regions::new(shape.clone(), vec![reg(0), reg(2)]).unwrap();
        let b = Regions::new(shape.clone(), vec![reg(4), reg(1)]).unwrap();
        let pts: Vec<Vec<i64>> = (0..shape[0]).flat_map(|x| (0..shape[1]).map(move |y| vec![x, y])).collect();
        let ma = |p: &[i64]| reg(0).contains_point(p) || reg(2).contains_point(p);
        let mb = |p: &[i64]| reg(4).contains_point(p) || reg(1).contains_point(p);
        let u = a.union(&b).unwrap();
        let ops = [&a.intersect(&b).unwrap(), &a.difference(&b).unwrap(), &u, &a.complement().unwrap()];
        check_set_ops(&pts, &ma, &mb, ops)?;
        for p in &pts {
            prop_assert_eq!(a.contains_point(p), ma(p));
        }
        prop_assert_eq!(a.count(), pts.iter().filter(|p| ma(p)).count() as i128);
        prop_assert_eq!(a.contains(&b).unwrap(), pts.iter().all(|p| !mb(p) || ma(p)));
        prop_assert_eq!(a.disjoint(&b).unwrap(), pts.iter().all(|p| !(ma(p) && mb(p))));
        prop_assert_eq!(a.equivalent(&b).unwrap(), pts.iter().all(|p| ma(p) == mb(p)));
        // Views of a union act region by region.
        let t = u.permute(&[1, 0]).unwrap().reverse(&[0]).unwrap();
        for p in &pts {
            let q = [shape[1] - 1 - p[1], p[0]];
            prop_assert_eq!(t.contains_point(&q), ma(p) || mb(p));
        }
        let back = u.reshape(&[shape[0] * shape[1]]).unwrap().reshape(&shape).unwrap();
        prop_assert!(back.equivalent(&u).unwrap());
    }
}
mod region_tests {
    use super::*;
    use crate::unit::alias_sett::{member, Triples};

    fn triples() -> impl Strategy<Value = Triples> {
        let stripe = (0i64..4, 0i64..4, -4i64..4).prop_filter("period 0", |s| s.0 + s.1 > 0);
        prop::collection::vec(stripe, 0..=2)
    }

    /// A shape (rank 1..=3, dims 1..=5) with per-dimension stripe triples.
    fn spec() -> impl Strategy<Value = (Vec<i64>, Vec<Triples>)> {
        (1usize..=3).prop_flat_map(|rank| {
            (
                prop::collection::vec(1i64..=5, rank),
                prop::collection::vec(triples(), rank),
            )
        })
    }

    fn region(shape: &[i64], t: &[Triples]) -> Region {
        let setts = t.iter().map(|t| Sett::from_triples(t).unwrap()).collect();
        Region::new(shape.to_vec(), setts).unwrap()
    }

    fn brute(shape: &[i64], t: &[Triples], p: &[i64]) -> bool {
        p.iter()
            .zip(shape)
            .zip(t)
            .all(|((&z, &n), t)| (0..n).contains(&z) && member(t, z))
    }

    fn points(shape: &[i64]) -> Vec<Vec<i64>> {
        let mut out = vec![vec![]];
        for &n in shape {
            out = out
                .into_iter()
                .flat_map(|p| {
                    (0..n).map(move |z| {
                        let mut q = p.clone();
                        q.push(z);
                        q
                    })
                })
                .collect();
        }
        out
    }

    fn same_shape_pair() -> impl Strategy<Value = (Vec<i64>, Vec<Triples>, Vec<Triples>)> {
        spec().prop_flat_map(|(shape, ta)| {
            let rank = shape.len();
            (
                Just(shape),
                Just(ta),
                prop::collection::vec(triples(), rank),
            )
        })
    }

    #[test]
    fn display_formats() {
        let r = Region::new(
            vec![8, 5],
            vec![
                Sett::from_triples(&[(1, 3, 0)]).unwrap(),
                Sett::from_triples(&[(4, 1, 0)]).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(r.to_string(), "{[(1,3,0)] x [(4,1,0)]}");
        assert_eq!(Region::empty(&[3]).unwrap().to_string(), "{}");
        assert_eq!(Region::full(&[]).unwrap().to_string(), "{scalar}");
    }

    #[test]
    fn reshape_of_columns_needs_two_regions() {
        let cols = Sett::from_triples(&[(1, 1, 0)]).unwrap();
        let r = Region::new(vec![3, 4], vec![Sett::all(), cols]).unwrap();
        let out = r.reshape(&[4, 3]).unwrap();
        assert_eq!(out.regions().len(), 2, "{out}");
        assert_eq!(
            out.to_string(),
            "{[(1,1,0)] x [(1,1,0)]} | {[(1,1,1)] x [(1,2,1)]}"
        );
    }

    #[test]
    fn errors_are_reported() {
        assert!(matches!(Region::full(&[-1]), Err(RegionError::BadShape(_))));
        let r = Region::full(&[2, 3]).unwrap();
        assert!(matches!(r.permute(&[0, 0]), Err(RegionError::BadDims(_))));
        assert!(matches!(
            r.reshape(&[5]),
            Err(RegionError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            r.broadcast(&[3, 3]),
            Err(RegionError::BadBroadcast { .. })
        ));
        let bad = [SliceDim::new(0, 2, 0), SliceDim::full(3)];
        assert_eq!(r.slice(&bad), Err(RegionError::BadSlice));
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(256) })]

        #[test]
        fn set_ops((shape, ta, tb) in same_shape_pair()) {
            let (a, b) = (region(&shape, &ta), region(&shape, &tb));
            let pts = points(&shape);
            let ma = |p: &[i64]| brute(&shape, &ta, p);
            let mb = |p: &[i64]| brute(&shape, &tb, p);
            let ops = [&a.intersect(&b).unwrap(), &a.difference(&b).unwrap(), &a.union(&b).unwrap(), &a.complement().unwrap()];
            check_set_ops(&pts, &ma, &mb, ops)?;
            for p in &pts {
                prop_assert_eq!(a.contains_point(p), ma(p));
            }
            prop_assert_eq!(a.count(), pts.iter().filter(|p| ma(p)).count() as i128);
            let sub = pts.iter().all(|p| !mb(p) || ma(p));
            let sup = pts.iter().all(|p| !ma(p) || mb(p));
            prop_assert_eq!(a.contains(&b).unwrap(), sub);
            prop_assert_eq!(a.equivalent(&b).unwrap(), sub && sup);
            prop_assert_eq!(a.disjoint(&b).unwrap(), pts.iter().all(|p| !(ma(p) && mb(p))));
        }

        #[test]
        fn permute_and_reverse((shape, t) in spec(), seed in 0usize..6, mask in 0u8..8) {
            let r = region(&shape, &t);
            let rank = shape.len();
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.rotate_left(seed % rank);
            if seed % 2 == 1 { perm.reverse(); }
            let pr = r.permute(&perm).unwrap();
            let dims: Vec<usize> = (0..rank).filter(|d| mask & (1 << d) != 0).collect();
            let rv = r.reverse(&dims).unwrap();
            for p in points(&shape) {
                let q: Vec<i64> = perm.iter().map(|&d| p[d]).collect();
                prop_assert_eq!(pr.contains_point(&q), brute(&shape, &t, &p));
                let mut m = p.clone();
                for &d in &dims { m[d] = shape[d] - 1 - p[d]; }
                prop_assert_eq!(rv.contains_point(&m), brute(&shape, &t, &p));
            }
        }

        #[test]
        fn broadcast_and_reduce((shape, t) in spec(), lead in 1i64..3, ones in 0u8..8) {
            // Input: some dims squeezed to 1; output: a new leading dim + full dims.
            let small: Vec<i64> = shape.iter().enumerate()
                .map(|(d, &n)| if ones & (1 << d) != 0 { 1 } else { n }).collect();
            let r = region(&small, &t);
            let mut big = vec![lead];
            big.extend_from_slice(&shape);
            let b = r.broadcast(&big).unwrap();
            for p in points(&big) {
                let src: Vec<i64> = p[1..].iter().zip(&small).map(|(&z, &n)| if n == 1 { 0 } else { z }).collect();
                prop_assert_eq!(b.contains_point(&p), brute(&small, &t, &src), "{:?} {}", p, b);
            }
            // Reduce a random region of the output back onto the input.
            let mut tb = vec![vec![(1, 1, 0)]];
            tb.extend(t.iter().cloned());
            let o = region(&big, &tb);
            let red = o.reduce(&small).unwrap();
            for q in points(&small) {
                let hit = points(&big).iter().any(|p| {
                    brute(&big, &tb, p) && p[1..].iter().zip(&small).zip(&q)
                        .all(|((&z, &n), &s)| if n == 1 { s == 0 } else { z == s })
                });
                prop_assert_eq!(red.contains_point(&q), hit, "{:?} {}", q, red);
            }
        }

        #[test]
        fn slice_and_fill(
            (shape, t) in spec(),
            sl in prop::collection::vec((-2i64..7, -2i64..7, -3i64..4), 3),
            to in prop::collection::vec(triples(), 3),
        ) {
            let rank = shape.len();
            let dims: Vec<SliceDim> = sl[..rank].iter()
                .map(|&(a, b, s)| SliceDim::new(a, b, if s == 0 { 1 } else { s })).collect();
            // Brute-force index lists of each sliced dimension.
            let picks: Vec<Vec<i64>> = dims.iter().zip(&shape).map(|(d, &n)| {
                let mut v = Vec::new();
                let mut i = d.start.clamp(if d.step > 0 { 0 } else { -1 }, if d.step > 0 { n } else { n - 1 });
                let stop = d.stop.clamp(if d.step > 0 { 0 } else { -1 }, if d.step > 0 { n } else { n - 1 });
                while (d.step > 0 && i < stop) || (d.step < 0 && i > stop) {
                    v.push(i);
                    i += d.step;
                }
                v
            }).collect();
            let out_shape: Vec<i64> = picks.iter().map(|v| v.len() as i64).collect();
            let r = region(&shape, &t);
            let s = r.slice(&dims).unwrap();
            prop_assert_eq!(s.shape(), &out_shape[..]);
            for o in points(&out_shape) {
                let src: Vec<i64> = o.iter().zip(&picks).map(|(&i, v)| v[i as usize]).collect();
                prop_assert_eq!(s.contains_point(&o), brute(&shape, &t, &src), "{:?} {}", o, s);
            }
            let ro = region(&out_shape, &to[..rank]);
            let f = ro.fill_into(&shape, &dims).unwrap();
            for p in points(&shape) {
                let idx: Option<Vec<i64>> = p.iter().zip(&picks)
                    .map(|(&z, v)| v.iter().position(|&x| x == z).map(|i| i as i64)).collect();
                let want = idx.is_some_and(|o| brute(&out_shape, &to[..rank], &o));
                prop_assert_eq!(f.contains_point(&p), want, "{:?} {}", p, f);
            }
        }

        #[test]
        fn reshape_round_trip((shape, t) in spec(), pick in 0usize..1000) {
            let total: i64 = shape.iter().product();
            let mut targets = vec![vec![total]];
            for a in 1..=total {
                if total % a != 0 { continue; }
                targets.push(vec![a, total / a]);
                for b in 1..=total / a {
                    if (total / a) % b == 0 { targets.push(vec![a, b, total / a / b]); }
                }
            }
            let to = targets[pick % targets.len()].clone();
            let r = region(&shape, &t);
            let out = r.reshape(&to).unwrap();
            let strides = |s: &[i64], p: &[i64]| p.iter().zip(s).fold(0, |acc, (&z, &n)| acc * n + z);
            let flat: Vec<bool> = {
                let mut v = vec![false; total as usize];
                for p in points(&shape) { v[strides(&shape, &p) as usize] = brute(&shape, &t, &p); }
                v
            };
            for q in points(&to) {
                prop_assert_eq!(out.contains_point(&q), flat[strides(&to, &q) as usize], "{:?} {}", q, out);
            }
            prop_assert_eq!(out.count(), r.count());
            let back = out.reshape(&shape).unwrap();
            prop_assert!(back.equivalent(&Regions::from_region(r.clone())).unwrap(), "{} vs {}", back, r);
        }
    }
}
