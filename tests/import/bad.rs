//! Bad models and arguments: each is one diagnostic with its code, naming the model file (and
//! for a node: the operator, node and opset), exit 1, and nothing written.

use crate::support::{data_dir, s};

/// `tapc import MODEL -o DIR/m.teg EXTRA --error-format json` in an empty directory: the JSON
/// diagnostic, after checking exit 1 and that the directory is still empty.
fn fails(model: &str, extra: &[&str]) -> serde_json::Value {
    let dir = crate::common::scratch(&format!("import-bad-{}", model.replace('.', "-")));
    let path = data_dir().join("bad").join(model);
    let out = dir.join("m.teg");
    let mut args = vec![
        "import".to_string(),
        s(&path),
        "-o".into(),
        s(&out),
        "--error-format".into(),
        "json".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let o = tapc::driver::run(&args);
    assert_eq!(o.code, 1, "{model}: {}", o.stderr);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{model}: the failed import left {left:?}");
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{model}: one diagnostic expected:\n{}",
        o.stderr
    );
    let d: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(
        d["file"],
        s(&path),
        "{model}: the diagnostic names the model"
    );
    let _ = std::fs::remove_dir_all(&dir);
    d
}

fn message(d: &serde_json::Value) -> String {
    d["message"].as_str().unwrap().to_string()
}

#[test]
fn truncated_and_corrupt_protobufs_are_e0120() {
    for m in ["truncated.onnx", "garbage.onnx", "no_such_model.onnx"] {
        let d = fails(m, &[]);
        assert_eq!(d["code"], "E0120", "{m}: {d}");
    }
}

#[test]
fn missing_external_data_is_e0121_and_present_external_data_is_read() {
    let d = fails("missing_external.onnx", &[]);
    assert_eq!(d["code"], "E0121");
    assert!(message(&d).contains("missing_weights.bin"), "{d}");
    // The same model with its data file beside it imports; the weight is the file's bytes.
    let dir = crate::common::scratch("import-external-ok");
    let out = dir.join("m.teg");
    let model = data_dir().join("bad/external_ok.onnx");
    crate::support::tapc(&["import", &s(&model), "-o", &s(&out)]);
    let w = tapc_runtime::npy::read(&dir.join("w.npy")).unwrap();
    let bytes = std::fs::read(data_dir().join("bad/weights.bin")).unwrap();
    let want: Vec<f32> = bytes
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(w.data, tapc_runtime::Data::F32(want));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unsupported_op_is_one_e0122_naming_op_node_and_opset() {
    let d = fails("unsupported_op.onnx", &[]);
    assert_eq!(d["code"], "E0122");
    let m = message(&d);
    for part in ["`NonZero`", "opset 17", "`nz_node`"] {
        assert!(m.contains(part), "{part} missing from: {m}");
    }
}

#[test]
fn a_resize_coordinate_mode_not_lowered_is_e0123_naming_it() {
    let d = fails("resize_crop.onnx", &[]);
    assert_eq!(d["code"], "E0123");
    let m = message(&d);
    for part in ["`crop_node`", "`tf_crop_and_resize`", "half_pixel"] {
        assert!(m.contains(part), "{part} missing from: {m}");
    }
}

#[test]
fn import_time_tables_too_large_to_build_are_e0123() {
    for (model, node) in [
        ("cumsum_long_axis.onnx", "`long_cumsum`"),
        ("resize_huge.onnx", "`huge_resize`"),
    ] {
        let d = fails(model, &[]);
        assert_eq!(d["code"], "E0123", "{model}: {d}");
        assert!(message(&d).contains(node), "{model}: {d}");
    }
}

#[test]
fn an_unsupported_form_is_e0123_and_an_undefined_value_is_e0126() {
    let d = fails("unsupported_form.onnx", &[]);
    assert_eq!(d["code"], "E0123");
    assert!(message(&d).contains("`smul`"), "{d}");
    let d = fails("undefined_value.onnx", &[]);
    assert_eq!(d["code"], "E0126");
    assert!(message(&d).contains("`nope`"), "{d}");
    // A declared shape the inferred one contradicts.
    let d = fails("wrong_declared_shape.onnx", &[]);
    assert_eq!(d["code"], "E0126");
    assert!(
        message(&d).contains("[4, 3]") && message(&d).contains("[3, 4]"),
        "{d}"
    );
}

#[test]
fn dynamic_dims_need_input_shape() {
    let d = fails("dynamic.onnx", &[]);
    assert_eq!(d["code"], "E0124");
    assert!(d["notes"].to_string().contains("--input-shape x="), "{d}");
    for bad in ["x=2", "y=2,4", "x=2,a", "=2"] {
        let d = fails("dynamic.onnx", &["--input-shape", bad]);
        assert_eq!(d["code"], "E0125", "{bad}: {d}");
    }
    let dir = crate::common::scratch("import-dynamic-ok");
    let out = dir.join("m.teg");
    let model = data_dir().join("bad/dynamic.onnx");
    crate::support::tapc(&[
        "import",
        &s(&model),
        "-o",
        &s(&out),
        "--input-shape",
        "x=3,4",
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("%x = source @x : f32[3, 4]"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_weights_dir_is_made_and_an_unwritable_one_leaves_nothing() {
    let dir = crate::common::scratch("import-weights-dir");
    let model = data_dir().join("ops/matmul_2d/model.onnx");
    let out = dir.join("m.teg");
    let weights = dir.join("deep/weights");
    crate::support::tapc(&[
        "import",
        &s(&model),
        "-o",
        &s(&out),
        "--weights-dir",
        &s(&weights),
    ]);
    assert!(
        weights.join("w.npy").is_file(),
        "the weight is in the directory made for it"
    );
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("%w = source @w : f32[4, 5]"));
    // A weights "directory" that is a file: E0100, and neither output is written.
    let dir2 = crate::common::scratch("import-weights-file");
    let file = dir2.join("weights");
    std::fs::write(&file, "not a directory").unwrap();
    let out2 = dir2.join("m.teg");
    let o = tapc::driver::run(&[
        "import",
        &s(&model),
        "-o",
        &s(&out2),
        "--weights-dir",
        &s(&file),
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("error[E0100]"), "{}", o.stderr);
    assert!(
        !out2.exists(),
        "no TEG is written when the weights cannot be"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

/// `-o DIR/m.teg` makes a missing DIR, as the weights directory is made (it failed with E0100
/// when the weights went elsewhere); when the import then fails, the directory made is removed.
#[test]
fn a_missing_output_dir_is_made_and_removed_again_on_failure() {
    let dir = crate::common::scratch("import-output-dir");
    let model = data_dir().join("ops/matmul_2d/model.onnx");
    let import = |out: &std::path::Path, weights: &std::path::Path| {
        let (m, o, w) = (s(&model), s(out), s(weights));
        tapc::driver::run(&["import", &m, "-o", &o, "--weights-dir", &w])
    };
    let (out, weights) = (dir.join("new/m.teg"), dir.join("w"));
    let o = import(&out, &weights);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(out.is_file() && weights.join("w.npy").is_file());
    let file = dir.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let o = import(&dir.join("new2/m.teg"), &file);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("error[E0100]"), "{}", o.stderr);
    assert!(
        !dir.join("new2").exists(),
        "the directory made for -o is left behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
