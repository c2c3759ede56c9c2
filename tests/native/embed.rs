//! The embedding API (`tapc::embed`, the Python package's core) from Rust: a compiled
//! program runs many times against the interpreter, hands a sink that is all of its buffer
//! over without a copy, reads borrowed inputs in place, and reports compile errors with spans.

use crate::common::{compile_ok, example, f64s, mlp_inputs, run};
use tapc::embed::{compile, Options};
use tapc_runtime::exec::{Borrowed, Input, SinkData};
use tapc_runtime::{DType, Tensor};

#[test]
fn the_mlp_runs_repeatedly_and_matches_the_interpreter() {
    let src = example("mlp.teg");
    let c = compile("mlp.teg", src.clone().into_bytes(), &Options::default()).unwrap();
    let names: Vec<&str> = c.inputs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "w1", "b1", "w2", "b2"]);
    let inputs = mlp_inputs();
    let (m, facts) = compile_ok("mlp.teg", &src);
    let want = run(&m, &facts, 0, &inputs);
    let tensors: Vec<&Tensor> = names.iter().map(|n| &inputs[*n]).collect();
    let ins: Vec<Input> = tensors.iter().map(|t| Input::Tensor(t)).collect();
    for _ in 0..3 {
        let (sinks, _) = c.run_owned(&ins).unwrap();
        for (p, s) in c.outputs.iter().zip(sinks) {
            // Both sinks are views of one buffer (the logits and a strided slice of them).
            let SinkData::Copy(t) = s else {
                panic!("@{} shares its buffer", p.name)
            };
            let (got, exp) = (f64s(&t), f64s(&want[&p.name]));
            assert_eq!(got.len(), exp.len());
            for (g, e) in got.iter().zip(&exp) {
                assert!(
                    (g - e).abs() <= 1e-4 * (1.0 + e.abs()),
                    "@{}: {g} vs {e}",
                    p.name
                );
            }
        }
    }
    assert!(c.teg.contains("graph @mlp") && c.signature().contains("apply @linear"));
    assert!(c.cost().unwrap().contains("totals:"));
}

const SCALE: &str = "op @scale(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] * 3.0
}
graph @g {
  %x = source @x : f32[100]
  %y = apply @scale(%x)
  sink @y %y
}
";

#[test]
fn borrowed_inputs_are_read_in_place_and_a_whole_buffer_sink_is_handed_over() {
    let opts = Options {
        threads: Some(2),
        ..Options::default()
    };
    let c = compile("scale", SCALE.as_bytes().to_vec(), &opts).unwrap();
    assert_eq!(c.threads, 2);
    let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let shape = [100];
    // SAFETY: `x` holds 100 f32s and is not written during the run.
    let b = unsafe { Borrowed::new(x.as_ptr().cast(), DType::F32, &shape) };
    let (sinks, report) = c.run_owned(&[Input::Borrowed(b)]).unwrap();
    assert_eq!(report.source_addrs, [x.as_ptr() as usize]);
    let [SinkData::Buffer(buf)] = &sinks[..] else {
        panic!("@y is all of its buffer")
    };
    // SAFETY: the buffer holds @y's 100 f32s and is ours.
    let y = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<f32>(), 100) };
    assert!(y.iter().zip(&x).all(|(&y, &x)| y == 3.0 * x));
}

#[test]
fn compile_errors_carry_codes_and_line_columns() {
    let text = "graph @g {\n  %x = source @x : f32[2]\n  sink @y %nope\n}\n";
    let e = compile("bad.teg", text.as_bytes().to_vec(), &Options::default())
        .err()
        .expect("an undefined value");
    let json: serde_json::Value = serde_json::from_str(e.json().trim()).unwrap();
    assert_eq!(json["code"], "E0011");
    assert_eq!(json["labels"][0]["line_start"], 3);
    assert_eq!(json["labels"][0]["col_start"], 11);
    assert!(e.human().contains("bad.teg:3:11"), "{}", e.human());
    let passes = Options {
        passes: Some("no_such_pass".into()),
        ..Options::default()
    };
    let e = compile("scale", SCALE.as_bytes().to_vec(), &passes)
        .err()
        .expect("bad pass");
    assert_eq!(e.diagnostics[0].code.map(|c| c.0), Some("E0103"));
}
