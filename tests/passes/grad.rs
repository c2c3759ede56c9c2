//! `grad` against central finite differences in f64 (the interpreter is the oracle): one graph
//! per construct the pass differentiates (kernel math, reductions, contractions, temporaries,
//! selectors, accumulation, a `wrt` that is an intermediate or that the loss ignores). Each
//! case's lowered module re-parses to itself and verifies; the test counts the cases and the
//! gradient entries it compared and fails when fewer were checked than listed. The same
//! gradients are then computed by the JIT and compared with the interpreter's.

use crate::common;

use common::grad_cases::{
    cases, central_differences, lowered, softmax_forms, Case, CASES, FD_H, FD_TOL, SOFTMAX_FORMS,
};
use std::collections::HashMap;
use tapc_runtime::Tensor;

/// The inputs of a case: every source `f64` in [-2, 2), fixed seed.
fn case_inputs(m: &tapc::ir::Module) -> HashMap<String, Tensor> {
    common::inputs(m, 0)
}

/// The loss `@l` of graph 0 of `m` at `inputs`.
pub(crate) fn loss(
    m: &tapc::ir::Module,
    f: &[tapc::verify::GraphFacts],
    inputs: &HashMap<String, Tensor>,
) -> f64 {
    common::f64s(&common::run(m, f, 0, inputs)["l"])[0]
}

/// Compares each gradient entry with a central difference; the number of entries compared.
fn check_case(c: &Case) -> usize {
    let (m, f) = lowered(c.construct, &c.src);
    let inputs = case_inputs(&m);
    let sinks = common::run(&m, &f, 0, &inputs);
    let fd = if c.construct == "float cast" {
        (1e-3, 2e-3)
    } else {
        (FD_H, FD_TOL)
    };
    let mut checked = 0;
    for w in c.wrt {
        let grad = common::f64s(&sinks[&format!("d{w}")]);
        checked += central_differences(&|i| loss(&m, &f, i), &inputs, w, &grad, fd)
            .unwrap_or_else(|e| panic!("{}: {e}", c.construct));
    }
    checked
}

#[test]
fn gradients_match_central_differences() {
    let cases = cases();
    let mut done = 0;
    let mut entries = 0;
    for c in &cases {
        entries += check_case(c);
        done += 1;
    }
    eprintln!("grad: {done} cases, {entries} gradient entries checked against central differences");
    assert_eq!(cases.len(), CASES, "the case list and its count agree");
    assert_eq!(done, CASES, "every case was checked");
    assert!(
        entries >= 400,
        "only {entries} gradient entries were checked"
    );
}

#[test]
fn a_wrt_value_the_loss_ignores_has_a_zero_gradient() {
    let src = "op @sq(x: f64[N]) -> (l: f64[]) {\n  l[] = sum[i](x[i] * x[i])\n}\n\
               graph @g {\n  %a = source @a : f64[3]\n  %u = source @u : f64[2, 2]\n  \
               %l = apply @sq(%a)\n  %da, %du = grad %l wrt %a, %u\n  sink @da %da\n  sink @du %du\n}\n";
    let (m, f) = lowered("unused wrt", src);
    let inputs = case_inputs(&m);
    let sinks = common::run(&m, &f, 0, &inputs);
    assert_eq!(common::f64s(&sinks["du"]), vec![0.0; 4]);
    let a = common::f64s(&inputs["a"]);
    let da: Vec<f64> = a.iter().map(|x| 2.0 * x).collect();
    assert_eq!(common::f64s(&sinks["da"]), da, "d(sum a²)/da = 2a, exactly");
}

#[test]
fn a_later_grad_differentiates_an_earlier_ones_ops() {
    // l = Σ (v/4)², so dv = v/8; dd = Σ dv², so ddv = 2·dv/8 = v/32. `%d2` repeats `%v`.
    let src = "op @quarter(x: f64[N]) -> (y: f64[N]) {\n  y[i] = x[i] * 0.25\n}\n\
               op @sq(x: f64[N]) -> (l: f64[]) {\n  l[] = sum[i](x[i] * x[i])\n}\n\
               graph @g {\n  %v = source @v : f64[5]\n  %w = apply @quarter(%v)\n  \
               %l = apply @sq(%w)\n  %dv, %d2 = grad %l wrt %v, %v\n  %dd = apply @sq(%dv)\n  \
               %ddv = grad %dd wrt %v\n  sink @dv %dv\n  sink @d2 %d2\n  sink @ddv %ddv\n}\n";
    let (m, f) = lowered("second order", src);
    let inputs = case_inputs(&m);
    let sinks = common::run(&m, &f, 0, &inputs);
    let v = common::f64s(&inputs["v"]);
    let close = |got: &[f64], want: Vec<f64>| {
        got.iter()
            .zip(&want)
            .all(|(a, b)| (a - b).abs() <= 1e-12 * (1.0 + b.abs()))
    };
    let dv = common::f64s(&sinks["dv"]);
    assert!(close(&dv, v.iter().map(|x| x / 8.0).collect()), "{dv:?}");
    assert_eq!(dv, common::f64s(&sinks["d2"]), "a repeated wrt value");
    let ddv = common::f64s(&sinks["ddv"]);
    assert!(close(&ddv, v.iter().map(|x| x / 32.0).collect()), "{ddv:?}");
}

/// The softmax and log-softmax forms keep their forward apply whole and get one row-local
/// adjoint op `(y, d_y) -> d_x` (two statements: the row sum, then `d_x`); a kernel that only
/// looks like one is split and differentiated per statement. Their values are checked against
/// central differences by `gradients_match_central_differences`.
#[test]
fn softmax_forms_get_a_row_local_adjoint() {
    let forms = softmax_forms();
    assert_eq!(forms.len(), SOFTMAX_FORMS.len());
    let mut checked = 0;
    for (c, want) in forms.iter().zip(SOFTMAX_FORMS) {
        let (m, _) = lowered(c.construct, &c.src);
        let adj: Vec<_> = m
            .ops
            .iter()
            .filter(|o| o.name.starts_with("g_grad_a"))
            .collect();
        let split = m.ops.iter().any(|o| o.name == "g_f_m");
        let row_local = adj.len() == 1
            && adj[0]
                .inputs
                .iter()
                .map(|p| p.name.as_str())
                .eq(["y", "d_y"])
            && matches!(&adj[0].body, tapc::ir::OpBody::Kernel(s) if s.len() == 2);
        assert_eq!(row_local, want, "{}: row-local adjoint", c.construct);
        assert_eq!(split, !want, "{}: forward split per statement", c.construct);
        checked += 1;
    }
    assert_eq!(checked, 4, "every form was checked");
}
