//! The import's simplification (src/import/onnx/simplify.rs) against onnxruntime: the cases of
//! tests/data/onnx/fold (gen.py `fold_cases`: convolutions at edge shapes followed by
//! BatchNormalization and constant Mul/Add/Sub/Div, HardSwish as `Add, Clip, Mul, Div`, and the
//! forms that must not fold; 1×1 convolutions at edge shapes) run interpreted and JIT-compiled
//! at 1 and 2 worker threads, and the imported TEG checked for what was folded: no
//! BatchNormalization nor per-channel affine apply is left after a convolution, each
//! elementwise chain is one apply, and each unit-stride unpadded 1×1 convolution is one
//! `@ConvPointwise` contraction over the flattened positions; a `ConvTranspose` whose kernel
//! equals its strides is one `@ConvTransposeTiles` contraction per output pixel; a conv whose
//! weights and BatchNormalization parameters are `ConstantOfShape` fills folds too.

use crate::support::{self, Case};
use std::collections::HashMap;
use std::path::Path;
use tapc_runtime::exec::Options;

/// The ops applied in `teg`, by op name without the importer's `_K` suffix (distinct ops of
/// one base name), with how many applies each.
fn applied_ops(teg: &str) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for line in teg.lines() {
        let Some(rest) = line.split(" = apply @").nth(1) else {
            continue;
        };
        let op: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let base = match op.rsplit_once('_') {
            Some((b, k)) if !k.is_empty() && k.chars().all(|c| c.is_ascii_digit()) => b,
            _ => &op,
        };
        *out.entry(base.to_string()).or_insert(0) += 1;
    }
    out
}

/// How many applies of ops whose names start with `prefix`.
fn count(ops: &HashMap<String, usize>, prefix: &str) -> usize {
    ops.iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, n)| n)
        .sum()
}

/// The case imported in-process, JIT-compiled after `canonicalize`, run at `threads`, its
/// sinks written to `out` (for `support::compare`).
fn jit_run(c: &Case, threads: usize, out: &Path) {
    let shapes = vec![];
    let opts = tapc::import::ImportOptions {
        input_shapes: shapes,
        ..Default::default()
    };
    let imp = tapc::import::import_onnx(&c.model, &opts).unwrap();
    let (mut m, facts, diags) = tapc::compile_source(&imp.teg);
    assert!(!diags.has_errors(), "{}: {:?}", c.name, diags.0);
    let cfg = Default::default();
    let facts = tapc::passes::manager::run_pipeline(
        &mut m,
        facts,
        "canonicalize",
        &cfg,
        &mut String::new(),
    )
    .unwrap()
    .facts;
    let mut all = support::input_tensors(c);
    all.extend(imp.weights.iter().cloned());
    let o = Options {
        threads,
        record: false,
    };
    let outs = tapc::codegen::with_jit(&m, 0, &facts[0], &Default::default(), |p| {
        p.run(&all, &o).unwrap().0
    })
    .unwrap();
    std::fs::create_dir_all(out).unwrap();
    for (name, t) in outs {
        tapc_runtime::npy::write(&out.join(format!("{name}.npy")), &t).unwrap();
    }
}

/// Every fold case interpreted and JIT-compiled at 1 and 2 threads; the TEG of each checked
/// by `check`.
#[test]
fn folded_convs_and_chains_match_onnxruntime_at_1_and_2_threads() {
    let cases = support::cases("fold");
    let work = crate::common::scratch("import-fold");
    let mut compared = 0;
    for c in &cases {
        let teg = support::import(c, &work.join(&c.name));
        check(
            &c.name,
            &applied_ops(&std::fs::read_to_string(&teg).unwrap()),
        );
        compared += support::check_modes(c, &teg, &["--interp"]);
        for threads in [1, 2] {
            let out = work.join(&c.name).join(format!("jit{threads}"));
            jit_run(c, threads, &out);
            compared += support::compare(c, &out, &format!("JIT at {threads} threads"));
        }
    }
    println!(
        "{} fold cases, {compared} outputs compared (interpreted, JIT at 1 and 2 threads)",
        cases.len()
    );
    assert_eq!(cases.len(), 6);
    assert_eq!(compared, 3 * (8 + 7 + 1 + 8 + 6 + 2));
    let _ = std::fs::remove_dir_all(&work);
}

/// What each case's TEG must hold.
fn check(case: &str, ops: &HashMap<String, usize>) {
    let conv = count(ops, "Conv");
    match case {
        // 8 convolutions; every BatchNormalization, Mul, Add, Sub and Div folded into them
        // except the two HardSwish chains (one of them with the affine after it).
        "conv_bn_shapes" => {
            assert_eq!(conv, 8, "{ops:?}");
            assert_eq!(count(ops, "BatchNormalization"), 0, "{ops:?}");
            assert_eq!(ops.get("Add_Clip_Mul_Div"), Some(&1), "{ops:?}");
            assert_eq!(ops.get("Add_Clip_Mul_Div_Mul_Add"), Some(&1), "{ops:?}");
            let loose = ["Add", "Sub", "Mul", "Div", "Clip"].map(|k| ops.get(k).unwrap_or(&0));
            assert_eq!(loose, [&0; 5], "{ops:?}");
        }
        // A conv output that is also a graph output keeps its BatchNormalization; a row-wise
        // Mul and an Add of a run-time value stay; the chain whose Clip is an output fuses only
        // `Add, Clip`; the rank-0 root fuses `Add, Relu, Neg`.
        "no_fold" => {
            assert_eq!(count(ops, "BatchNormalization"), 1, "{ops:?}");
            assert_eq!(ops.get("Mul"), Some(&2), "{ops:?}");
            assert_eq!(ops.get("Add"), Some(&1), "{ops:?}");
            assert_eq!(ops.get("Add_Clip"), Some(&1), "{ops:?}");
            assert_eq!(ops.get("Div"), Some(&1), "{ops:?}");
            assert_eq!(ops.get("Add_Relu_Neg"), Some(&1), "{ops:?}");
        }
        // Six 1×1 convolutions with unit strides and no padding are contractions over the
        // flattened positions; the strided and the padded one stay windowed.
        "pointwise_shapes" => {
            assert_eq!(ops.get("ConvPointwise"), Some(&6), "{ops:?}");
            assert_eq!(ops.get("Conv"), Some(&2), "{ops:?}");
        }
        // Four ConvTransposes whose kernel equals their strides are tile contractions; the
        // overlapping one and the padded one stay convolutions of the upsampled input.
        "convtranspose_tiles" => {
            assert_eq!(ops.get("ConvTransposeTiles"), Some(&4), "{ops:?}");
            assert_eq!(ops.get("Conv"), Some(&2), "{ops:?}");
        }
        // An integer chain is lowered node by node.
        "int_chain" => {
            let each = ["Relu", "Neg", "Abs"].map(|k| ops.get(k).copied().unwrap_or(0));
            assert_eq!(each, [1, 1, 1], "{ops:?}");
        }
        // Weights, bias and BatchNormalization parameters as ConstantOfShape fills (the
        // `onnx` wheel's ImageNet nets): both BatchNormalizations folded into their convs.
        "filled_weights" => {
            assert_eq!(conv, 2, "{ops:?}");
            assert_eq!(count(ops, "BatchNormalization"), 0, "{ops:?}");
        }
        other => panic!("fold case `{other}` has no expectations here"),
    }
}
