//! Pathological input never crashes the front end: nesting beyond `syntax::MAX_NESTING` is one
//! E0005 (not a stack overflow) at 5k and 20k levels, on the normal test thread stack, and
//! nesting below the limit is checked as usual.

use tapc::syntax::MAX_NESTING;

/// One kernel statement per shape of deep nesting, `n` levels deep.
fn shapes(n: usize) -> Vec<(&'static str, String)> {
    let op = |stmt: String| format!("op @f(x: f32[N]) -> (y: f32[N]) {{\n  {stmt}\n}}\n");
    vec![
        ("unary minus", op(format!("y[i] = {}x[i]", "-".repeat(n)))),
        (
            "`+` chain",
            op(format!("y[i] = x[i]{}", " + x[i]".repeat(n))),
        ),
        (
            "parentheses",
            op(format!("y[i] = {}x[i]{}", "(".repeat(n), ")".repeat(n))),
        ),
        (
            "nested calls",
            op(format!("y[i] = {}x[i]{}", "exp(".repeat(n), ")".repeat(n))),
        ),
        (
            "nested reductions",
            op(format!(
                "y[i] = {}x[i]{}",
                "sum[k](".repeat(n),
                ")".repeat(n)
            )),
        ),
        (
            "index terms",
            op(format!("y[i] = x[i{}]", " + 0".repeat(n))),
        ),
        (
            "shape",
            format!(
                "graph @g {{\n  %x = source @x : f32[1{}]\n  sink @x %x\n}}\n",
                " + 1".repeat(n)
            ),
        ),
    ]
}

fn codes(src: &str) -> Vec<&'static str> {
    let (_, _, diags) = tapc::compile_source(src);
    diags.0.iter().filter_map(|d| d.code.map(|c| c.0)).collect()
}

#[test]
fn nesting_beyond_the_limit_is_one_e0005() {
    for n in [5_000, 20_000] {
        for (what, src) in shapes(n) {
            let got = codes(&src);
            assert_eq!(got, vec!["E0005"], "{what} at depth {n}");
        }
    }
}

#[test]
fn nesting_below_the_limit_is_checked() {
    // A few levels below the limit (each level may use up to two counted tokens).
    for (what, src) in shapes(MAX_NESTING / 2 - 2) {
        let got = codes(&src);
        assert!(!got.contains(&"E0005"), "{what}: {got:?}");
    }
    // And a clean deep statement gives no diagnostic at all.
    let n = MAX_NESTING / 2 - 2;
    let src = format!(
        "op @f(x: f32[N]) -> (y: f32[N]) {{\n  y[i] = x[i]{}\n}}\n",
        " + x[i]".repeat(n)
    );
    assert_eq!(codes(&src), Vec::<&str>::new());
}
