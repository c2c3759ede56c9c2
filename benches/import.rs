//! Imported ONNX models against onnxruntime (not part of `cargo test`):
//! `cargo bench --bench import -- [--runs N] [--passes LIST] [--profile] [--light] [--only A,B]` (default pipeline: `canonicalize`).
//!
//! Each model of tests/data/onnx/models is imported (`tapc::import::import_onnx`), compiled
//! once with the JIT after the standard pipeline, and run with 1 and then 2 worker threads; the
//! median wall time of the schedule (kernels and buffers, not input or output copies) is
//! reported. onnxruntime (CPU execution provider, `intra_op_num_threads` 1 and 2, sequential)
//! runs the same model on the same inputs, timed by `benches/onnxruntime_ref.py` around
//! `session.run` (which includes its input and output copies). The ratio is onnxruntime time /
//! tapc time (above 1: tapc is faster). The BERT block runs at batch 1 and 8
//! (`--input-shape`), the GPT-2 block (fixed input shape) at batch 1, and the trained PP-OCR
//! direction classifier and text detector (when `tests/import/real.rs` has fetched them) at
//! batch 1 and 8; `--light` adds the nine ImageNet nets of the `onnx` wheel at batch 1, and
//! `--only A,B` keeps the models whose label contains A or B. The load average is
//! printed before and after. `--profile` adds, per model and thread count, where tapc's time
//! goes (job time per op kind and the slowest tasks; benches/import/profile.rs).

#[path = "import/profile.rs"]
mod profile;
#[path = "../tests/common/pyenv.rs"]
mod pyenv;

use profile::median;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tapc_runtime::exec::Options;
use tapc_runtime::{Data, Tensor};

struct Model {
    label: String,
    onnx: PathBuf,
    shapes: Vec<(String, Vec<usize>)>,
}

fn models(light: bool) -> Vec<Model> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx/models");
    let bert = |b: usize| Model {
        label: format!("bert_block batch {b}"),
        onnx: root.join("bert_block/model.onnx"),
        shapes: vec![
            ("input_ids".into(), vec![b, 8]),
            ("attention_mask".into(), vec![b, 8]),
        ],
    };
    let mut all = vec![
        bert(1),
        bert(8),
        Model {
            label: "gpt2_block batch 1".into(),
            onnx: root.join("gpt2_block/model.onnx"),
            shapes: vec![],
        },
    ];
    all.extend(ppocr());
    if light {
        all.extend(light_models());
    }
    all
}

/// `--light`: the ImageNet nets inside the `onnx` wheel (AlexNet, DenseNet-121, Inception v1/v2,
/// ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512) at their fixed batch-1 inputs. Their
/// weights are `ConstantOfShape` fills, so only their speed means anything here.
fn light_models() -> Vec<Model> {
    pyenv::onnx_light_models()
        .into_iter()
        .map(|onnx| Model {
            label: format!("{} batch 1", onnx.file_stem().unwrap().to_string_lossy()),
            onnx,
            shapes: vec![],
        })
        .collect()
}

/// The trained PP-OCR classifier and detector of the `rapidocr-onnxruntime` wheel at batch 1
/// and 8, at the sizes `tests/import/real.rs` checks; that test fetches them into the target
/// directory. Without them the bench says so and runs the others.
fn ppocr() -> Vec<Model> {
    let dir = pyenv::target_dir().join("rapidocr-onnxruntime-1.4.4");
    let cases = [
        (
            "ppocr_cls",
            "ch_ppocr_mobile_v2.0_cls_infer.onnx",
            [48, 192],
        ),
        ("ppocr_det", "ch_PP-OCRv4_det_infer.onnx", [64, 128]),
    ];
    if !cases.iter().all(|(_, f, _)| dir.join(f).exists()) {
        println!(
            "PP-OCR models: NOT MEASURED (not in {}; `cargo test --test import ppocr` fetches them)",
            dir.display()
        );
        return vec![];
    }
    let mut out = Vec::new();
    for (label, file, [h, w]) in cases {
        for b in [1, 8] {
            out.push(Model {
                label: format!("{label} batch {b}"),
                onnx: dir.join(file),
                shapes: vec![("x".into(), vec![b, 3, h, w])],
            });
        }
    }
    out
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Deterministic inputs for the model's sources: token ids in [0, 50), masks of ones, floats.
fn model_inputs(m: &tapc::ir::Module, inputs: &[String]) -> HashMap<String, Tensor> {
    let g = &m.graphs[0];
    let mut out = HashMap::new();
    let mut state = 0x9e37_79b9_u64;
    for (name, ty, _) in g.sources() {
        if !inputs.contains(&name.to_string()) {
            continue;
        }
        let n = ty.elements() as usize;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as f64 / (1u64 << 31) as f64
        };
        let data = match ty.dtype {
            tapc_runtime::DType::I64 if name.contains("mask") => Data::I64(vec![1; n]),
            tapc_runtime::DType::I64 => Data::I64((0..n).map(|_| (next() * 50.0) as i64).collect()),
            _ => Data::F32((0..n).map(|_| (next() * 2.0 - 1.0) as f32).collect()),
        };
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        out.insert(name.to_string(), Tensor::new(shape, data).unwrap());
    }
    out
}

/// tapc's medians at 1 and 2 threads, and the inputs it ran on (in the model's input order).
fn time_tapc(model: &Model, runs: usize, passes: &str, prof: bool) -> ([f64; 2], Vec<Tensor>) {
    let opts = tapc::import::ImportOptions {
        input_shapes: model.shapes.clone(),
        ..Default::default()
    };
    let imp = tapc::import::import_onnx(&model.onnx, &opts)
        .unwrap_or_else(|d| panic!("{}: {d:?}", model.label));
    let (mut m, facts, diags) = tapc::compile_source(&imp.teg);
    assert!(!diags.has_errors(), "{}: {:?}", model.label, diags.0);
    let facts = tapc::passes::manager::run_pipeline(
        &mut m,
        facts,
        passes,
        &Default::default(),
        &mut String::new(),
    )
    .unwrap_or_else(|d| panic!("{}: {}", model.label, d.message))
    .facts;
    let ins = model_inputs(&m, &imp.inputs);
    let mut all = ins.clone();
    all.extend(imp.weights.iter().cloned());
    let times = tapc::codegen::with_jit(&m, 0, &facts[0], &Default::default(), |p| {
        [1usize, 2].map(|threads| {
            let o = Options {
                threads,
                record: false,
            };
            p.run(&all, &o).unwrap();
            if prof {
                profile_runs(model, &m, p, &all, threads, runs);
            }
            median(
                (0..runs)
                    .map(|_| p.run(&all, &o).unwrap().1.wall.as_secs_f64())
                    .collect(),
            )
        })
    })
    .unwrap_or_else(|d| panic!("{}: {}", model.label, d.message));
    // In the model's input order: TEG names may differ from ONNX's (`gpu_0/data_0`).
    let ordered = imp.inputs.iter().map(|n| ins[n].clone()).collect();
    (times, ordered)
}

/// Prints where `runs` recorded runs of `p` at `threads` spend their time.
fn profile_runs(
    model: &Model,
    m: &tapc::ir::Module,
    p: &tapc::codegen::Program,
    all: &HashMap<String, Tensor>,
    threads: usize,
    runs: usize,
) {
    let o = Options {
        threads,
        record: true,
    };
    let (mut times, mut wall) = (vec![], vec![]);
    let mut names = vec![];
    for _ in 0..runs {
        let r = p.run(all, &o).unwrap().1;
        times.push(profile::task_times(&r));
        wall.push(r.wall.as_secs_f64());
        names = r.task_names;
    }
    let label = format!("{} {threads}T", model.label);
    profile::print(&label, &m.graphs[0], &names, &times, wall);
}

/// onnxruntime's median at `threads`, on `ins` written as `input{k}.npy` under `dir`.
fn time_ort(model: &Model, ins: &[Tensor], dir: &Path, threads: usize, runs: usize) -> f64 {
    std::fs::create_dir_all(dir).unwrap();
    for (k, t) in ins.iter().enumerate() {
        tapc_runtime::npy::write(&dir.join(format!("input{k}.npy")), t).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/onnxruntime_ref.py");
    let o = Command::new(pyenv::python())
        .arg(script)
        .arg(&model.onnx)
        .arg(dir)
        .arg(threads.to_string())
        .arg(runs.to_string())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "onnxruntime: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("a median in seconds")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .map_or(50, |v| v.parse().expect("--runs N"));
    let passes = args
        .iter()
        .position(|a| a == "--passes")
        .and_then(|i| args.get(i + 1))
        .map_or("canonicalize", String::as_str);
    let prof = args.iter().any(|a| a == "--profile");
    let light = args.iter().any(|a| a == "--light");
    let only: Vec<&str> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map_or(vec![], |v| v.split(',').collect());
    println!("tapc pipeline: {passes}");
    println!("load average before: {}", load_average());
    println!(
        "{:<22} {:>11} {:>11} {:>9} {:>11} {:>11} {:>9}",
        "model", "tapc 1T µs", "ort 1T µs", "ort/tapc", "tapc 2T µs", "ort 2T µs", "ort/tapc"
    );
    let dir = std::env::temp_dir().join(format!("tapc-bench-import-{}", std::process::id()));
    let chosen = |m: &&Model| only.is_empty() || only.iter().any(|o| m.label.contains(o));
    for (k, model) in models(light).iter().filter(chosen).enumerate() {
        let (t, ins) = time_tapc(model, runs, passes, prof);
        let sub = dir.join(k.to_string());
        let o: Vec<f64> = [1, 2]
            .iter()
            .map(|&th| time_ort(model, &ins, &sub, th, runs))
            .collect();
        println!(
            "{:<22} {:>11.1} {:>11.1} {:>9.2} {:>11.1} {:>11.1} {:>9.2}",
            model.label,
            t[0] * 1e6,
            o[0] * 1e6,
            o[0] / t[0],
            t[1] * 1e6,
            o[1] * 1e6,
            o[1] / t[1]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("load average after: {}", load_average());
}
