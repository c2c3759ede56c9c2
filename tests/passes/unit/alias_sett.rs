//! Unit tests of `tapc::passes::alias::sett`, kept out of the library so that `cargo test` compiles it once.

use proptest::prelude::*;
use tapc::passes::alias::sett::*;
use tapc::passes::alias::stripe::SettError;

/// Stripe triples `(on, off, phase)`, outermost first: a sett by its definition.
pub type Triples = Vec<(i64, i64, i64)>;

/// Membership straight from the definition, independent of the algebra.
pub fn member(t: &[(i64, i64, i64)], z: i64) -> bool {
    match t.split_first() {
        None => true,
        Some((&(on, off, ph), rest)) => {
            let u = (z - ph).rem_euclid(on + off);
            u < on && member(rest, u)
        }
    }
}

fn triples(max_depth: usize) -> impl Strategy<Value = Triples> {
    let stripe = (0i64..5, 0i64..5, -6i64..6).prop_filter("period 0", |s| s.0 + s.1 > 0);
    prop::collection::vec(stripe, 0..=max_depth)
}

fn sett(t: &Triples) -> Sett {
    Sett::from_triples(t).unwrap()
}

const LO: i64 = -100;
const HI: i64 = 100;

fn in_pieces(p: &[Sett], z: i64) -> bool {
    let hits = p.iter().filter(|s| s.contains(z)).count();
    assert!(hits <= 1, "pieces overlap at {z}: {p:?}");
    hits == 1
}

fn check_pieces(p: &[Sett], want: impl Fn(i64) -> bool) -> Result<(), TestCaseError> {
    for z in LO..HI {
        prop_assert_eq!(in_pieces(p, z), want(z), "z = {} pieces {:?}", z, p);
    }
    Ok(())
}

fn check_pieces_in(p: &[Sett], n: i64, want: impl Fn(i64) -> bool) -> Result<(), TestCaseError> {
    for z in 0..n {
        prop_assert_eq!(in_pieces(p, z), want(z), "z = {} pieces {:?}", z, p);
    }
    Ok(())
}

/// Index of `z` among the elements of `b` (0 = first element >= 0).
fn index(b: &Triples, z: i64) -> i64 {
    if z >= 0 {
        (0..z).filter(|&y| member(b, y)).count() as i64
    } else {
        -((z..0).filter(|&y| member(b, y)).count() as i64)
    }
}

#[test]
fn display_and_basics() {
    let s = Sett::from_triples(&[(1, 3, 0), (2, 1, 0)]).unwrap();
    assert_eq!(s.to_string(), "[(1,3,0)]");
    let s = Sett::from_triples(&[(8, 8, -2), (3, 3, 1), (1, 1, 0)]).unwrap();
    assert_eq!(s.to_string(), "[(8,8,14),(3,3,1),(1,1,0)]");
    assert_eq!(Sett::all().to_string(), "[]");
    assert!(Sett::from_triples(&[(0, 3, 0)]).unwrap().is_empty());
    assert!(Sett::from_triples(&[(4, 0, 1)]).unwrap().is_all());
    // Inner stripe covering the whole parent block is dropped.
    let s = Sett::from_triples(&[(3, 2, 0), (5, 1, 0)]).unwrap();
    assert_eq!(s.to_string(), "[(3,2,0)]");
    // An inner pattern that tiles the outer period drops the outer stripe.
    let s = Sett::from_triples(&[(7, 1, 0), (1, 1, 0)]).unwrap();
    assert_eq!(s.to_string(), "[(1,1,0)]");
}

#[test]
fn intersections_merge_into_few_setts() {
    let evens = Sett::from_triples(&[(1, 1, 0)]).unwrap();
    let b = Sett::from_triples(&[(2, 1, 0)]).unwrap();
    let p = evens.intersect(&b).unwrap();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].to_string(), "[(5,1,0),(1,3,0)]");
    let odds = Sett::from_triples(&[(1, 1, 1)]).unwrap();
    let u = evens.union(&odds).unwrap();
    assert_eq!(u, vec![Sett::all()]);
}

#[test]
fn huge_coprime_periods_are_not_enumerated() {
    let p = 1i64 << 40;
    let a = Sett::from_triples(&[(1, p - 1, 3)]).unwrap();
    let b = Sett::from_triples(&[(1, p, 3)]).unwrap();
    assert!(!a.disjoint(&b).unwrap());
    // The common period exceeds i64: only a window can hold the answer.
    assert_eq!(a.intersect(&b), Err(SettError::Overflow));
    let i = a.intersect_in(&b, i64::MAX).unwrap();
    assert_eq!(i.len(), 1);
    assert_eq!(i[0].count(0, i64::MAX), 1);
    assert!(i[0].contains(3));
    // Big blocks with an inner pattern, coprime periods, in a huge window.
    let a = Sett::from_triples(&[(p / 2, p / 2 + 1, 0), (1, 1, 0)]).unwrap();
    let b = Sett::from_triples(&[(p / 2, p / 2 - 1, 0), (1, 2, 0)]).unwrap();
    assert!(!a.disjoint_in(&b, 1 << 42).unwrap());
    let even = Sett::from_triples(&[(p / 2, p / 2, 0), (1, 1, 0)]).unwrap();
    let odd = Sett::from_triples(&[(p / 2, p / 2 + 2, 1), (1, 1, 0)]).unwrap();
    assert!(even.disjoint_in(&odd, 1 << 42).unwrap());
}

#[test]
fn nth_and_count_on_huge_sets() {
    let s = Sett::from_triples(&[(1 << 20, 1 << 20, 7), (1, 3, 1)]).unwrap();
    assert_eq!(s.count(0, 1 << 41), 1 << 38);
    assert_eq!(s.nth(0), Some(8));
    assert_eq!(s.nth((1 << 18) + 1), Some(8 + (1 << 21) + 4));
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(256) })]

    #[test]
    fn canonical_preserves_membership(t in triples(4)) {
        let s = sett(&t);
        for z in LO..HI {
            prop_assert_eq!(s.contains(z), member(&t, z), "z = {} canon {}", z, s);
        }
        prop_assert_eq!(s.is_empty(), (LO..HI).all(|z| !member(&t, z)));
        prop_assert_eq!(Sett::new(s.stripes().to_vec()), s.clone(), "idempotent");
    }

    #[test]
    fn canonical_in_window(t in triples(4), n in 1i64..40) {
        let c = sett(&t).canonical_in(n);
        let any = (0..n).any(|z| member(&t, z));
        prop_assert_eq!(c.is_some(), any);
        if let Some(c) = c {
            for z in 0..n {
                prop_assert_eq!(c.contains(z), member(&t, z), "z = {} canon {}", z, c);
            }
        }
    }

    #[test]
    fn count_and_nth(t in triples(3), a in -50i64..50, len in 0i64..60, k in 0i64..20) {
        let s = sett(&t);
        let want = (a..a + len).filter(|&z| member(&t, z)).count() as i128;
        prop_assert_eq!(s.count(a, a + len), want);
        let nth = (0..400).filter(|&z| member(&t, z)).nth(k as usize);
        prop_assert_eq!(s.nth(k), nth);
    }

    #[test]
    fn complement_pieces(t in triples(3), n in 1i64..30) {
        let s = sett(&t);
        check_pieces(&s.complement(), |z| !member(&t, z))?;
        check_pieces_in(&s.complement_in(n), n, |z| !member(&t, z))?;
    }

    #[test]
    fn binary_ops(ta in triples(3), tb in triples(3)) {
        let (a, b) = (sett(&ta), sett(&tb));
        let (ma, mb) = (|z| member(&ta, z), |z| member(&tb, z));
        check_pieces(&a.intersect(&b).unwrap(), |z| ma(z) && mb(z))?;
        check_pieces(&a.difference(&b).unwrap(), |z| ma(z) && !mb(z))?;
        check_pieces(&a.union(&b).unwrap(), |z| ma(z) || mb(z))?;
        let sub = (LO..HI).all(|z| !mb(z) || ma(z));
        let sup = (LO..HI).all(|z| !ma(z) || mb(z));
        prop_assert_eq!(a.contains_sett(&b).unwrap(), sub);
        prop_assert_eq!(a.equivalent(&b).unwrap(), sub && sup);
        prop_assert_eq!(a.disjoint(&b).unwrap(), (LO..HI).all(|z| !(ma(z) && mb(z))));
    }

    #[test]
    fn windowed_binary_ops(ta in triples(3), tb in triples(3), n in 1i64..40) {
        let (a, b) = (sett(&ta), sett(&tb));
        let (ma, mb) = (|z| member(&ta, z), |z| member(&tb, z));
        check_pieces_in(&a.intersect_in(&b, n).unwrap(), n, |z| ma(z) && mb(z))?;
        check_pieces_in(&a.difference_in(&b, n).unwrap(), n, |z| ma(z) && !mb(z))?;
        check_pieces_in(&a.union_in(&b, n).unwrap(), n, |z| ma(z) || mb(z))?;
        let sub = (0..n).all(|z| !mb(z) || ma(z));
        let sup = (0..n).all(|z| !ma(z) || mb(z));
        prop_assert_eq!(a.contains_in(&b, n).unwrap(), sub);
        prop_assert_eq!(a.equivalent_in(&b, n).unwrap(), sub && sup);
        prop_assert_eq!(a.disjoint_in(&b, n).unwrap(), (0..n).all(|z| !(ma(z) && mb(z))));
    }

    #[test]
    fn reverse_mirrors(t in triples(3), n in 1i64..30) {
        let r = sett(&t).reverse(n);
        for z in LO..HI {
            prop_assert_eq!(r.contains(z), member(&t, n - 1 - z), "z = {} rev {}", z, r);
        }
    }

    #[test]
    fn sample_and_fill(ta in triples(3), tb in triples(3), n in 1i64..40) {
        let (a, b) = (sett(&ta), sett(&tb));
        prop_assume!(!b.is_empty());
        let s = a.sample(&b).unwrap();
        let f = a.fill(&b).unwrap();
        let (s_in, f_in) = (a.sample_in(&b, n).unwrap(), a.fill_in(&b, n).unwrap());
        for z in LO..HI {
            let i = index(&tb, z);
            if member(&tb, z) {
                prop_assert_eq!(in_pieces(&s, i), member(&ta, z), "sample z={} i={}", z, i);
                if (0..n).contains(&z) {
                    prop_assert_eq!(in_pieces(&s_in, i), member(&ta, z), "sample_in z={}", z);
                }
            }
            let want = member(&tb, z) && member(&ta, i);
            prop_assert_eq!(in_pieces(&f, z), want, "fill z={} {:?}", z, f);
            if (0..n).contains(&z) {
                prop_assert_eq!(in_pieces(&f_in, z), want, "fill_in z={} {:?}", z, f_in);
            }
        }
    }

    #[test]
    fn flatten_unflatten(tr in triples(2), tc in triples(2), t in triples(3), c in 1i64..7, rows in 1i64..6) {
        let f = Sett::flatten(&sett(&tr), &sett(&tc), c).unwrap();
        for z in LO..HI {
            let want = member(&tr, z.div_euclid(c)) && member(&tc, z.rem_euclid(c));
            prop_assert_eq!(f.contains(z), want, "flatten z={} {}", z, f);
        }
        let check = |pairs: &[(Sett, Sett)], z: i64| {
            let hits = pairs
                .iter()
                .filter(|(r, k)| r.contains(z.div_euclid(c)) && k.contains(z.rem_euclid(c)))
                .count();
            assert!(hits <= 1, "overlap at {z}: {pairs:?}");
            hits == 1
        };
        let u = sett(&t).unflatten(c).unwrap();
        for z in LO..HI {
            prop_assert_eq!(check(&u, z), member(&t, z), "unflatten z={} {:?}", z, u);
        }
        let n = rows * c;
        let u = sett(&t).unflatten_in(c, n).unwrap();
        for z in 0..n {
            prop_assert_eq!(check(&u, z), member(&t, z), "unflatten_in z={} {:?}", z, u);
        }
    }
}
