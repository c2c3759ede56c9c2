//! `examples/train_transformer.teg` (a 2-layer decoder-only transformer, width 128, 4 heads,
//! sequence 64, trained with `grad` and SGD on a reverse task) against JAX: its first 20 losses,
//! read from the `--log-every 1` lines, match those `jax.grad` gives
//! (`tests/data/train/gen_transformer.py`, committed `.npy` files) to 1e-4 relative in f32, in
//! the interpreter, the JIT and a compiled program, and fall below 1.1 (from ln 16 ≈ 2.8).

use super::steps::{example, logged_losses, root, run_everywhere};

const STEPS: usize = 20;

#[test]
fn train_transformer_first_20_losses_match_jax_in_every_runtime() {
    let data = root().join("tests/data/train/transformer");
    let want: Vec<f64> = match tapc_runtime::npy::read(&data.join("expected_loss.npy"))
        .unwrap()
        .data
    {
        tapc_runtime::Data::F32(v) => v.into_iter().map(f64::from).collect(),
        d => panic!("expected f32 losses, found {:?}", d.dtype()),
    };
    assert_eq!(want.len(), STEPS);
    let dir = crate::common::scratch("train-transformer");
    let file = example("train_transformer.teg");
    let input_dir = data.display().to_string();
    for (runtime, o, _) in run_everywhere(&file, &input_dir, &dir, STEPS) {
        let got = logged_losses(runtime, &o, STEPS);
        for (s, (g, w)) in got.iter().zip(&want).enumerate() {
            let rel = (g - w).abs() / w.abs();
            assert!(
                rel <= 1e-4,
                "{runtime} step {}: {g} against JAX's {w}",
                s + 1
            );
        }
        assert!(got[STEPS - 1] < 1.1, "{runtime}: {got:?}");
    }
}
