//! Dead-buffer sharing (issue 22, `codegen::share`): which buffers take a dead one's memory,
//! that a sharing which would grow the planned peak is refused, and that the programs give
//! the interpreter's values on 1 and 2 threads with the planned peak equal to the one the
//! executor counts (every example is checked so in `in_place.rs`).

use crate::in_place::{run_checked, schedule_of};
use tapc::codegen::{reuse, share};
use tapc_runtime::memory;

const OPS: &str = "
op @scale(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = x[..i] * 0.5 - 0.25
}
op @mm(a: f32[N, N], b: f32[N, N]) -> (c: f32[N, N]) {
  c[i, j] = sum[k](a[i, k] * b[k, j])
}
op @rowsum(x: f32[R, C]) -> (s: f32[R]) {
  s[i] = sum[j](x[i, j])
}
op @outer(u: f32[R], v: f32[C]) -> (y: f32[R, C]) {
  y[i, j] = u[i] * v[j]
}
op @head(x: f32[R, C]) -> (y: f32[R, R - 3]) {
  y[i, j] = x[i, j] * 2.0
}
";

/// `OPS` and graph `@g` over a source `%x : f32[n, n]` with `body`.
fn graph(n: usize, body: &str) -> String {
    format!("{OPS}graph @g {{\n  %x = source @x : f32[{n}, {n}]\n  {body}\n}}\n")
}

/// Buffers shared by the schedule of `src` (after in-place reuse), and the planned peak
/// before and after.
fn shared(src: &str) -> (usize, u64, u64) {
    let mut s = schedule_of(src);
    reuse::in_place(&mut s);
    let before = memory::peak(&s.plan).0;
    let n = share::dead_buffers(&mut s);
    s.plan.validate(s.kernels.len()).unwrap();
    (n, before, memory::peak(&s.plan).0)
}

/// `%d` (a matmul's output, allocated after `%a`'s last reader is done) takes `%a`'s buffer:
/// one buffer fewer, the peak no higher, the interpreter's values, at edge sizes.
#[test]
fn a_later_matmul_output_takes_a_dead_operands_buffer() {
    let body = "%a = apply @scale(%x)\n  %b = apply @mm(%a, %x)\n  %c = apply @scale(%b)\n  %d = apply @mm(%c, %x)\n  sink @d %d";
    let mut checked = 0;
    for n in [1, 2, 5, 8, 9, 17, 33, 64] {
        let src = graph(n, body);
        let (count, before, after) = shared(&src);
        assert_eq!(count, 1, "{n}: buffers shared");
        assert!(after <= before, "{n}: peak {after} B, {before} B unshared");
        let (_, peaks) = run_checked(&format!("chain {n}"), &src);
        for (planned, counted) in peaks {
            assert_eq!(planned, counted, "{n}: planned and counted peaks");
        }
        checked += 1;
    }
    assert_eq!(checked, 8);
}

/// `%h` (64×61, allocated while the 64×128 `%o` is live) could only take `%a` (64×64; `%s`
/// is too small), which would then be held through `%o`'s lifetime: refused, as the peak
/// would grow. `%t` could take `%s`'s buffer, which would be held through the peak (`%o` and
/// `%h` live): refused too. (`%o` is bigger than `%a`: no candidate.)
#[test]
fn a_sharing_that_would_grow_the_peak_is_refused() {
    let body = "%v = source @v : f32[128]\n  %a = apply @scale(%x)\n  %s = apply @rowsum(%a)\n  %o = apply @outer(%s, %v)\n  %h = apply @head(%o)\n  %t = apply @rowsum(%h)\n  sink @t %t";
    let src = graph(64, body);
    let (count, before, after) = shared(&src);
    assert_eq!(after, before, "peak");
    let (_, peaks) = run_checked("refused", &src);
    for (planned, counted) in peaks {
        assert_eq!(planned, counted, "planned and counted peaks");
    }
    assert_eq!(count, 0, "buffers shared");
}

/// The transformer block at 2048 tokens (the benchmark's size): some of its buffers take dead
/// ones' memory, and the planned peak does not grow.
#[test]
fn the_transformer_block_shares_dead_buffers_without_growing_its_peak() {
    let src = crate::common::example("transformer.teg").replace("f32[8, 768]", "f32[2048, 768]");
    let (count, before, after) = shared(&src);
    let buffers = schedule_of(&src).plan.buffers.len();
    eprintln!("transformer at 2048 tokens: {count} of {buffers} buffers shared; peak {before} -> {after} B");
    assert!(count > 0, "no buffer shared");
    assert!(after <= before, "peak {after} B, {before} B unshared");
}
