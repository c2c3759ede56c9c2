//! Whole models against onnxruntime: the generated BERT and GPT-2 blocks (opset 17) run
//! interpreted, JIT-compiled, as a compiled program, sharded (`shard{parts=2}`) and under
//! `cost{nodes=2}`; the small models inside the `onnx` wheel are imported and run JIT-compiled
//! against onnxruntime run at test time.

use crate::common::pyenv;
use crate::support::{self, s, Case};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `tapc opt TEG --passes=PIPELINE` written beside TEG as NAME.teg.
pub fn opt(teg: &Path, pipeline: &str, name: &str) -> PathBuf {
    let text = support::tapc(&["opt", &s(teg), &format!("--passes={pipeline}")]);
    let path = teg.with_file_name(format!("{name}.teg"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `tapc TEG -o prog`, then the program run on the case's inputs into `out`.
pub fn compiled(c: &Case, teg: &Path, out: &Path) -> usize {
    let prog = teg.with_file_name("prog");
    support::tapc(&[&s(teg), "-o", &s(&prog)]);
    std::fs::create_dir_all(out).unwrap();
    let o = Command::new(&prog)
        .args(support::input_args(c, teg.parent().unwrap()))
        .arg("--out-dir")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        c.name,
        String::from_utf8_lossy(&o.stderr)
    );
    support::compare(c, out, "compiled program")
}

fn whole_model(name: &str) {
    let c = support::case(&support::data_dir().join("models").join(name));
    let work = crate::common::scratch(&format!("import-{name}"));
    let teg = support::import(&c, &work);
    let mut n = support::check_modes(&c, &teg, &["--interp", "--native"]);
    n += compiled(&c, &teg, &work.join("out-prog"));
    let sharded = opt(
        &teg,
        "canonicalize,shard{parts=2},fuse,canonicalize",
        "sharded",
    );
    let text = std::fs::read_to_string(&sharded).unwrap();
    assert!(
        text.contains(") @["),
        "{name}: nothing was sharded:\n{text}"
    );
    n += support::check_modes(&c, &sharded, &["--interp", "--native"]);
    let costed = opt(&teg, "canonicalize,cost{nodes=2},canonicalize", "costed");
    n += support::check_modes(&c, &costed, &["--native"]);
    println!(
        "{name}: {n} outputs compared (interpreted, JIT, compiled, sharded x2, cost{{nodes=2}})"
    );
    assert_eq!(n, 6 * c.refs.len());
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn bert_block_matches_onnxruntime_in_every_mode() {
    whole_model("bert_block");
}

#[test]
fn gpt2_block_matches_onnxruntime_in_every_mode() {
    whole_model("gpt2_block");
}

/// The light models run JIT-compiled here (the others are imported and verified only: the
/// interpreter and the JIT take minutes on ImageNet-sized VGG, ResNet-50 and DenseNet).
const RUN: &[&str] = &["light_squeezenet", "light_shufflenet", "light_bvlc_alexnet"];

#[test]
fn onnx_wheel_light_models_import_and_match_onnxruntime() {
    let models = pyenv::onnx_light_models();
    let work = crate::common::scratch("import-light");
    let (mut imported, mut ran) = (0, 0);
    for m in &models {
        let name = m.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = work.join(&name);
        let io = dir.join("io");
        let st = Command::new(pyenv::python())
            .arg(support::data_dir().join("ort_run.py"))
            .arg(m)
            .arg(&io)
            .status()
            .unwrap();
        assert!(st.success(), "onnxruntime on {name}");
        let mut c = support::case(&io);
        c.name = name.clone();
        c.model = m.clone();
        let teg = support::import(&c, &dir);
        imported += 1;
        if RUN.contains(&name.as_str()) {
            support::check_modes(&c, &teg, &["--native"]);
            ran += 1;
        }
    }
    println!("light models: {imported} imported and verified, {ran} run JIT-compiled against onnxruntime");
    assert_eq!(imported, models.len());
    assert!(
        imported >= 9 && ran == RUN.len(),
        "{imported} imported, {ran} ran"
    );
    let _ = std::fs::remove_dir_all(&work);
}
