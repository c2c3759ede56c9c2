//! Unit tests of `tapc::passes::alias::stripe`, kept out of the library so that `cargo test` compiles it once.

use proptest::prelude::*;
use tapc::passes::alias::stripe::*;

fn stripe() -> impl Strategy<Value = Stripe> {
    (0i64..6, 0i64..6, -12i64..12)
        .prop_filter_map("period 0", |(on, off, ph)| Stripe::new(on, off, ph).ok())
}

#[test]
fn constructor_validates() {
    assert_eq!(Stripe::new(-1, 2, 0), Err(SettError::Negative));
    assert_eq!(Stripe::new(0, 0, 0), Err(SettError::ZeroPeriod));
    assert_eq!(Stripe::new(i64::MAX, 1, 0), Err(SettError::Overflow));
    let s = Stripe::new(2, 3, -1).unwrap();
    assert_eq!(s.phase(), 4);
    assert_eq!(s.to_string(), "(2,3,4)");
}

#[test]
fn coprime_huge_periods_meet_without_enumeration() {
    let a = Stripe::new(1, (1 << 40) - 1, 5).unwrap();
    let b = Stripe::new(1, (1 << 40) + 2, 7).unwrap();
    assert!(a.meets(&b));
    let c = Stripe::new(1, (1 << 40) - 1, 0).unwrap();
    let d = Stripe::new(1, (1 << 41) - 1, 1).unwrap();
    assert!(!c.meets(&d));
}

#[test]
fn inverse_mod() {
    for m in 1..30i128 {
        for a in 1..30i128 {
            if gcd(a, m) == 1 {
                assert_eq!(modp(a * inv_mod(a, m), m), 1 % m);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(256) })]

    #[test]
    fn membership_matches_definition(s in stripe(), z in -40i64..40) {
        let p = s.period();
        prop_assert_eq!(s.contains(z), (z - s.phase()).rem_euclid(p) < s.on());
    }

    #[test]
    fn meets_matches_brute_force(a in stripe(), b in stripe()) {
        let l = a.period() * b.period();
        let brute = (0..l).any(|z| a.contains(z) && b.contains(z));
        prop_assert_eq!(a.meets(&b), brute);
    }

    #[test]
    fn blocks_in_counts_blocks(s in stripe(), lo in -20i64..20, len in 1i64..30) {
        let hi = lo + len;
        let (n, first) = s.blocks_in(lo as i128, hi as i128);
        let p = s.period() as i128;
        let brute = (-100i128..100)
            .map(|k| s.phase() as i128 + k * p)
            .filter(|&x| x < hi as i128 && x + s.on() as i128 > lo as i128 && s.on() > 0)
            .collect::<Vec<_>>();
        prop_assert_eq!(n, brute.len() as i128);
        if n > 0 {
            prop_assert_eq!(first, brute[0]);
        }
    }

    #[test]
    fn crt_copies_are_exactly_the_meeting_blocks(a in stripe(), b in stripe()) {
        prop_assume!(a.on() > 0 && b.on() > 0);
        let l = lcm(a.period() as i128, b.period() as i128).unwrap();
        let mut got = crt_copies(&a, &b).1;
        got.sort();
        let mut want: Vec<i128> = (0..l / a.period() as i128)
            .map(|k| modp(a.phase() as i128 + k * a.period() as i128, l))
            .filter(|&x| (x..x + a.on() as i128).any(|z| b.contains(z as i64)))
            .collect();
        want.sort();
        prop_assert_eq!(got, want);
    }
}
