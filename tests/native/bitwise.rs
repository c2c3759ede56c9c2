//! Bitwise operators `& | ^ ~ << >>` on integer dtypes (docs/teg.md §5.2, §12): numpy's values
//! for a mix of them (precedence included), and shift amounts outside `0..width` (negative, at
//! and past the width), which shift every bit out; in the interpreter and the JIT, whose
//! elementwise code is vectorised; and fusion, shards and the cost pass keeping their results,
//! re-parsed from the printed output.

use super::dtype_reductions::{interp, jit};
use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

/// Runs `src` in the interpreter and the JIT (2 threads); both must give `want`, sink by sink.
fn both_give(src: &str, ins: &HashMap<String, Tensor>, want: &[Data]) {
    for (how, got) in [
        ("interpreter", interp(src, ins)),
        ("native", jit(src, ins, 2)),
    ] {
        let got: Vec<&Data> = got.iter().map(|(_, t)| &t.data).collect();
        assert_eq!(got, want.iter().collect::<Vec<_>>(), "{how}:\n{src}");
    }
}

fn tensor(d: Data) -> Tensor {
    Tensor::new(vec![d.len()], d).unwrap()
}

#[test]
fn bitwise_operators_give_numpys_values() {
    let src = "op @bw(a: u8[N], x: i32[N], s: i32[N], u: u64[N]) -> (p: u8[N], q: u8[N], \
               r: i32[N], t: i32[N], v: u64[N], w: u8[N], z: i32[N]) {
  p[i] = a[i] & 6 | a[i] ^ 15
  q[i] = a[i] << u8(i) >> 1
  r[i] = x[i] << s[i]
  t[i] = x[i] >> s[i]
  v[i] = ~u[i] >> 3 & u64(255) << 8
  w[i] = ~a[i]
  z[i] = (x[i] >> 1) + 2 * 3 << 1 ^ 5 | 1 & 3
}
graph @g {
  %a = source @a : u8[8]
  %x = source @x : i32[8]
  %s = source @s : i32[8]
  %u = source @u : u64[8]
  %p, %q, %r, %t, %v, %w, %z = apply @bw(%a, %x, %s, %u)
  sink @p %p
  sink @q %q
  sink @r %r
  sink @t %t
  sink @v %v
  sink @w %w
  sink @z %z
}";
    let ins = HashMap::from([
        ("a".into(), tensor(Data::U8((0..8).collect()))),
        ("x".into(), tensor(Data::I32(vec![-100; 8]))),
        ("s".into(), tensor(Data::I32((0..8).collect()))),
        ("u".into(), tensor(Data::U64((0..8).collect()))),
    ]);
    // numpy 2.4.6 with a = arange(8, uint8), x = full(8, -100, int32), s = arange(8, int32),
    // u = arange(8, uint64): (a & 6) | (a ^ 15), (a << a) >> 1 (wrapping at 8 bits), x << s,
    // x >> s, (~u >> 3) & (255 << 8), ~a, ((((x >> 1) + 6) << 1) ^ 5) | (1 & 3).
    let want = [
        Data::U8(vec![15, 14, 15, 14, 15, 14, 15, 14]),
        Data::U8(vec![0, 1, 4, 12, 32, 80, 64, 64]),
        Data::I32(vec![-100, -200, -400, -800, -1600, -3200, -6400, -12800]),
        Data::I32(vec![-100, -50, -25, -13, -7, -4, -2, -1]),
        Data::U64(vec![65280; 8]),
        Data::U8(vec![255, 254, 253, 252, 251, 250, 249, 248]),
        Data::I32(vec![-83; 8]),
    ];
    both_give(src, &ins, &want);
}

#[test]
fn shifts_outside_the_width_shift_every_bit_out() {
    let src = "op @sh(x: i8[N], s: i8[N], u: u64[N], k: u64[N]) -> (l: i8[N], r: i8[N], \
               ul: u64[N], ur: u64[N]) {
  l[i] = x[i] << s[i]
  r[i] = x[i] >> s[i]
  ul[i] = u[i] << k[i]
  ur[i] = u[i] >> k[i]
}
graph @g {
  %x = source @x : i8[19]
  %s = source @s : i8[19]
  %u = source @u : u64[19]
  %k = source @k : u64[19]
  %l, %r, %ul, %ur = apply @sh(%x, %s, %u, %k)
  sink @l %l
  sink @r %r
  sink @ul %ul
  sink @ur %ur
}";
    // 19 elements: a 16-lane vector and a masked tail; the pattern of 8 repeats.
    let rep = |v: Vec<i64>| (0..19).map(|j| v[j % v.len()]).collect::<Vec<i64>>();
    let x = rep(vec![-100, -100, -100, -100, 100, 1, 1, 127]);
    let s = rep(vec![8, -1, 7, 0, 9, 6, 7, 100]);
    let l = rep(vec![0, 0, 0, -100, 0, 64, -128, 0]);
    let r = rep(vec![-1, -1, -1, -100, 0, 0, 0, 0]);
    let top = 1u64 << 63;
    let rep64 = |v: Vec<u64>| (0..19).map(|j| v[j % v.len()]).collect::<Vec<u64>>();
    let u = rep64(vec![1, 1, u64::MAX, top, 5, 5]);
    let k = rep64(vec![63, 64, 1, 63, u64::MAX, 2]);
    let ul = rep64(vec![top, 0, u64::MAX - 1, 0, 0, 20]);
    let ur = rep64(vec![0, 0, u64::MAX >> 1, 1, 0, 1]);
    let i8s = |v: Vec<i64>| Data::I8(v.into_iter().map(|x| x as i8).collect());
    let ins = HashMap::from([
        ("x".into(), tensor(i8s(x))),
        ("s".into(), tensor(i8s(s))),
        ("u".into(), tensor(Data::U64(u))),
        ("k".into(), tensor(Data::U64(k))),
    ]);
    both_give(src, &ins, &[i8s(l), i8s(r), Data::U64(ul), Data::U64(ur)]);
}

#[test]
fn passes_keep_bitwise_results() {
    let src = "op @f(a: u16[N]) -> (y: u16[N]) {
  y[i] = a[i] << 3 ^ a[i] >> 1
}
op @h(a: u16[N]) -> (y: u16[N]) {
  y[i] = (~a[i] & 4095 | 1) + (a[i] | 2) * 3
}
graph @g {
  %a = iota axis 0 : u16[40]
  %b = apply @f(%a)
  %c = apply @h(%b)
  sink @c %c
}";
    let mut checked = 0;
    for pipeline in [
        "canonicalize,fuse,canonicalize",
        "canonicalize,shard{parts=2},fuse,canonicalize",
        "canonicalize,cost{nodes=2,objective=memory},fuse,canonicalize",
    ] {
        let (before, after, printed) = crate::common::before_after(src, pipeline, &HashMap::new());
        assert_eq!(before, after, "{pipeline}:\n{printed}");
        assert!(printed.contains("<< 3 ^"), "{printed}");
        checked += 1;
    }
    assert_eq!(checked, 3);
}

/// `popcount` at the edge values of every integer width: 0, the least and greatest value, all
/// ones (-1, or the unsigned MAX) and 5, in one kernel per dtype. The count is of the two's
/// complement bits (numpy: `np.bitwise_count(x.view(np.uintN))`; numpy's own `bitwise_count`
/// of a signed value counts its absolute value instead). A weak argument is i64.
#[test]
fn popcount_counts_the_bits_at_every_width() {
    let cases: [(&str, Data, Data); 8] = [
        (
            "i8",
            Data::I8(vec![0, i8::MIN, i8::MAX, -1, 5]),
            Data::I8(vec![0, 1, 7, 8, 2]),
        ),
        (
            "u8",
            Data::U8(vec![0, 0, u8::MAX, u8::MAX, 5]),
            Data::U8(vec![0, 0, 8, 8, 2]),
        ),
        (
            "i16",
            Data::I16(vec![0, i16::MIN, i16::MAX, -1, 5]),
            Data::I16(vec![0, 1, 15, 16, 2]),
        ),
        (
            "u16",
            Data::U16(vec![0, 0, u16::MAX, u16::MAX, 5]),
            Data::U16(vec![0, 0, 16, 16, 2]),
        ),
        (
            "i32",
            Data::I32(vec![0, i32::MIN, i32::MAX, -1, 5]),
            Data::I32(vec![0, 1, 31, 32, 2]),
        ),
        (
            "u32",
            Data::U32(vec![0, 0, u32::MAX, u32::MAX, 5]),
            Data::U32(vec![0, 0, 32, 32, 2]),
        ),
        (
            "i64",
            Data::I64(vec![0, i64::MIN, i64::MAX, -1, 5]),
            Data::I64(vec![0, 1, 63, 64, 2]),
        ),
        (
            "u64",
            Data::U64(vec![0, 0, u64::MAX, u64::MAX, 5]),
            Data::U64(vec![0, 0, 64, 64, 2]),
        ),
    ];
    let mut checked = 0;
    for (d, x, want) in cases {
        let src = format!(
            "op @pc(x: {d}[N]) -> (y: {d}[N], w: i64[N]) {{
  y[i] = popcount(x[i])
  w[i] = popcount(i) + popcount(-1)
}}
graph @g {{
  %x = source @x : {d}[5]
  %y, %w = apply @pc(%x)
  sink @y %y
  sink @w %w
}}"
        );
        let ins = HashMap::from([("x".into(), tensor(x))]);
        // popcount(i) for i = 0..5, plus 64 (the bits of an i64 -1).
        let weak = Data::I64(vec![64, 65, 65, 66, 65]);
        both_give(&src, &ins, &[want, weak]);
        checked += 1;
    }
    assert_eq!(checked, 8);
}
