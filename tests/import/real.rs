//! Real models with trained weights that a PyPI package ships: the PP-OCR models inside the
//! `rapidocr-onnxruntime` wheel (pinned below; fetched with the test environment's pip, no
//! dependencies, and unpacked under the target directory once). Each is imported and compared
//! with onnxruntime, run here on the same input: a synthetic page of dark glyph-like bars on
//! white, normalized as PP-OCR does (`(v - 0.5) / 0.5`), so the detector's probability map
//! spans 0..1 (on noise its outputs are all near 0, and onnxruntime's approximate `Sigmoid`
//! alone differs from the exact one by more than 1e-4 of that tiny scale).
//!
//! The detector (MobileNetV3 backbone with HardSigmoid squeeze-excite, depthwise convolutions,
//! nearest `Resize` in its FPN neck, a stride-2 `ConvTranspose` head) and the direction
//! classifier run interpreted, JIT-compiled, as a compiled program and under `cost{nodes=2}`;
//! the recognizer (an SVTR attention neck: MatMul, Softmax, a LayerNorm expansion) runs
//! interpreted only, since each JIT compile of a whole model costs CI most of a minute.

use crate::common::pyenv;
use crate::common::Rng;
use crate::models;
use crate::support::{self, s, Case};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use tapc_runtime::{npy, Data, Tensor};

/// The wheel the models come from, pinned so the weights (and references) stay the same.
const PACKAGE: &str = "rapidocr-onnxruntime==1.4.4";

/// One download at a time inside this test binary.
static FETCH: Mutex<()> = Mutex::new(());

/// The directory holding the wheel's `.onnx` files (`<target>/rapidocr-onnxruntime-1.4.4`),
/// downloaded and unpacked when missing (in a scratch directory, then renamed into place).
fn models_dir() -> PathBuf {
    let _guard = FETCH.lock().unwrap_or_else(|e| e.into_inner());
    let dir = pyenv::target_dir().join(PACKAGE.replace("==", "-"));
    if dir.join("ready").exists() {
        return dir;
    }
    let scratch = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let python = pyenv::python();
    let how = format!(
        "this test needs the `{PACKAGE}` wheel from PyPI; by hand: {} -m pip download --no-deps {PACKAGE} -d DIR",
        python.display()
    );
    let st = Command::new(&python)
        .args(["-m", "pip", "download", "-q", "--no-deps"])
        .args(["--disable-pip-version-check", PACKAGE, "-d"])
        .arg(scratch.join("wheel"))
        .status()
        .unwrap_or_else(|e| panic!("{e}: {how}"));
    assert!(st.success(), "pip download failed: {how}");
    let unpack = "import glob, os, sys, zipfile\n\
        out = sys.argv[1]\n\
        for w in glob.glob(os.path.join(out, 'wheel', '*.whl')):\n\
        \x20   z = zipfile.ZipFile(w)\n\
        \x20   for m in z.namelist():\n\
        \x20       if m.endswith('.onnx'):\n\
        \x20           open(os.path.join(out, os.path.basename(m)), 'wb').write(z.read(m))\n";
    let st = Command::new(&python)
        .args(["-c", unpack])
        .arg(&scratch)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "cannot unpack the wheel in {}",
        scratch.display()
    );
    let _ = std::fs::remove_dir_all(scratch.join("wheel"));
    std::fs::write(scratch.join("ready"), PACKAGE).unwrap();
    if std::fs::rename(&scratch, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    assert!(dir.join("ready").exists(), "{} was not made", dir.display());
    dir
}

/// A `[1, 3, h, w]` page: rows of dark bars of random widths and heights (glyphs) on white,
/// normalized to [-1, 1] as PP-OCR's preprocessing does.
fn text_image(h: usize, w: usize) -> Tensor {
    let mut img = vec![1.0f32; h * w];
    let mut rng = Rng(0x0c2_7e47);
    let bar = |img: &mut [f32], y0: usize, y1: usize, x0: usize, x1: usize| {
        for y in y0..y1.min(h) {
            for x in x0..x1.min(w) {
                img[y * w + x] = 0.1;
            }
        }
    };
    let mut y0 = h / 8;
    while y0 + 12 < h {
        let mut x = 6;
        while x + 10 < w {
            let gw = 3 + rng.below(5);
            bar(&mut img, y0, y0 + 12, x, x + gw);
            let top = y0 + rng.below(8);
            bar(&mut img, top, top + 2 + rng.below(4), x, x + gw + 3);
            x += gw + 2 + rng.below(3);
        }
        y0 += 24;
    }
    let page: Vec<f32> = img.iter().map(|v| (v - 0.5) / 0.5).collect();
    let data = [page.clone(), page.clone(), page].concat();
    Tensor::new(vec![1, 3, h, w], Data::F32(data)).unwrap()
}

/// `file` of the wheel on a `h`×`w` page, against onnxruntime: interpreted, and unless
/// `interp_only`, JIT-compiled, as a compiled program and under `cost{nodes=2}`.
fn real_model(file: &str, h: usize, w: usize, interp_only: bool) {
    let model = models_dir().join(file);
    let work = crate::common::scratch(&format!("import-real-{file}"));
    let image = work.join("page.npy");
    npy::write(&image, &text_image(h, w)).unwrap();
    let io = work.join("io");
    let st = Command::new(pyenv::python())
        .arg(support::data_dir().join("ort_run.py"))
        .arg(&model)
        .arg(&io)
        .arg(format!("x={}", s(&image)))
        .status()
        .unwrap();
    assert!(st.success(), "onnxruntime on {file}");
    let mut c: Case = support::case(&io);
    c.name = file.to_string();
    c.model = model;
    c.shapes = vec![format!("x=1,3,{h},{w}")];
    let teg = support::import(&c, &work.join("m"));
    let mut n = support::check_modes(&c, &teg, &["--interp"]);
    if !interp_only {
        n += support::check_modes(&c, &teg, &["--native"]);
        n += models::compiled(&c, &teg, &work.join("out-prog"));
        let costed = models::opt(&teg, "canonicalize,cost{nodes=2},canonicalize", "costed");
        let text = std::fs::read_to_string(&costed).unwrap();
        assert!(
            text.contains(") @["),
            "{file}: cost{{nodes=2}} placed nothing"
        );
        n += support::check_modes(&c, &costed, &["--native"]);
    }
    let modes = if interp_only { 1 } else { 4 };
    println!("{file}: {n} outputs compared with onnxruntime in {modes} mode(s)");
    assert_eq!(n, modes * c.refs.len());
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn ppocr_text_detector_matches_onnxruntime_in_every_mode() {
    real_model("ch_PP-OCRv4_det_infer.onnx", 64, 128, false);
}

#[test]
fn ppocr_direction_classifier_matches_onnxruntime_in_every_mode() {
    real_model("ch_ppocr_mobile_v2.0_cls_infer.onnx", 48, 192, false);
}

#[test]
fn ppocr_text_recognizer_matches_onnxruntime_interpreted() {
    real_model("ch_PP-OCRv4_rec_infer.onnx", 48, 160, true);
}
