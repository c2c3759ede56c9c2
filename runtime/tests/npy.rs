//! Integration tests for `tapc_runtime::npy`: round trips, Fortran order, numpy-written
//! fixtures (tests/data/npy, tests/data/mlp), every error message, atomic multi-file
//! writes (`tapc_runtime::output::write_all_atomic`), and a robustness sweep over random and
//! mutated bytes.

use std::fs;
use std::path::{Path, PathBuf};

use tapc_runtime::npy::{self, NpyErrorKind};
use tapc_runtime::output;
use tapc_runtime::{DType, Data, Tensor};

fn t(shape: &[usize], data: Data) -> Tensor {
    Tensor::new(shape, data).unwrap()
}

/// `tests/data` at the repository root.
fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("tests")
        .join("data")
}

/// Builds a .npy file by hand: version 1.0, the given dict text, raw data bytes.
fn raw_npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.as_bytes().to_vec();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out
}

fn write_bytes(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

fn read_err(path: &Path) -> (NpyErrorKind, String) {
    let e = npy::read(path).expect_err("read should fail");
    assert_eq!(e.path(), path);
    (e.kind(), e.to_string())
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------- round trips

#[test]
fn round_trip_every_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        t(
            &[2, 3],
            Data::F32(vec![0.5, -1.0, f32::MAX, f32::MIN_POSITIVE, 0.0, -0.0]),
        ),
        t(
            &[4],
            Data::F64(vec![1e300, -2.5, f64::INFINITY, f64::EPSILON]),
        ),
        t(&[3, 1, 2], Data::I32(vec![i32::MIN, -1, 0, 1, 7, i32::MAX])),
        t(&[2, 2], Data::I64(vec![i64::MIN, -3, 4, i64::MAX])),
        t(&[5], Data::Bool(vec![true, false, false, true, true])),
    ];
    for (i, tensor) in cases.iter().enumerate() {
        let path = dir.path().join(format!("t{i}.npy"));
        npy::write(&path, tensor).unwrap();
        assert_eq!(
            &npy::read(&path).unwrap(),
            tensor,
            "{}",
            tensor.shape_string()
        );
    }
}

#[test]
fn round_trip_nan_bits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nan.npy");
    npy::write(&path, &t(&[1], Data::F32(vec![f32::NAN]))).unwrap();
    match npy::read(&path).unwrap().data {
        Data::F32(v) => assert!(v[0].is_nan()),
        other => panic!("wrong dtype {other:?}"),
    }
}

#[test]
fn round_trip_0d_scalars() {
    let dir = tempfile::tempdir().unwrap();
    for (i, data) in [
        Data::F32(vec![3.25]),
        Data::F64(vec![-1.5]),
        Data::I32(vec![-7]),
        Data::I64(vec![1 << 40]),
        Data::Bool(vec![true]),
    ]
    .into_iter()
    .enumerate()
    {
        let tensor = t(&[], data);
        let path = dir.path().join(format!("s{i}.npy"));
        npy::write(&path, &tensor).unwrap();
        let back = npy::read(&path).unwrap();
        assert_eq!(back, tensor);
        assert!(back.shape.is_empty());
        let bytes = fs::read(&path).unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains("'shape': ()"));
    }
}

#[test]
fn round_trip_zero_sized_dims() {
    let dir = tempfile::tempdir().unwrap();
    for (i, tensor) in [
        Tensor::zeros(DType::F32, [0]),
        Tensor::zeros(DType::I32, [3, 0]),
        Tensor::zeros(DType::Bool, [0, 4, 2]),
        Tensor::zeros(DType::F64, [2, 0, 5]),
    ]
    .iter()
    .enumerate()
    {
        let path = dir.path().join(format!("z{i}.npy"));
        npy::write(&path, tensor).unwrap();
        let back = npy::read(&path).unwrap();
        assert_eq!(&back, tensor);
        assert!(back.is_empty());
    }
}

#[test]
fn written_file_is_standard_v1_little_endian_c_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.npy");
    npy::write(&path, &t(&[2, 2], Data::I32(vec![1, 2, 3, 0x01020304]))).unwrap();
    let bytes = fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    assert_eq!((10 + header_len) % 64, 0, "data must be 64-byte aligned");
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(header.contains("'descr': '<i4'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    assert!(header.contains("'shape': (2, 2)"), "{header}");
    assert!(header.ends_with('\n'));
    assert_eq!(&bytes[10 + header_len..][12..], &[4, 3, 2, 1]);
    assert_eq!(bytes.len(), 10 + header_len + 16);
}

#[test]
fn written_files_are_byte_identical_to_numpy() {
    let d = data_dir().join("npy");
    let dir = tempfile::tempdir().unwrap();
    for (name, tensor) in [
        (
            "c_f32_2x3",
            t(&[2, 3], Data::F32(vec![0., 1., 2., 3., 4., 5.])),
        ),
        ("c_i64_5", t(&[5], Data::I64(vec![0, 1, 2, 3, 4]))),
        (
            "c_bool_2x2",
            t(&[2, 2], Data::Bool(vec![true, false, false, true])),
        ),
        ("scalar_f64", t(&[], Data::F64(vec![2.5]))),
        ("empty_i32_0x3", Tensor::zeros(DType::I32, [0, 3])),
    ] {
        let p = dir.path().join(format!("{name}.npy"));
        npy::write(&p, &tensor).unwrap();
        let numpy = fs::read(d.join(format!("{name}.npy"))).unwrap();
        assert_eq!(fs::read(&p).unwrap(), numpy, "{name}");
    }
    // A large fixture too: read it and write it back unchanged.
    let x = data_dir().join("mlp").join("w1.npy");
    let p = dir.path().join("w1.npy");
    npy::write(&p, &npy::read(&x).unwrap()).unwrap();
    assert!(fs::read(&p).unwrap() == fs::read(&x).unwrap());
}

// ---------------------------------------------------------------- layouts and numpy fixtures

#[test]
fn reads_fortran_order() {
    let dir = tempfile::tempdir().unwrap();
    // [[1, 2, 3], [4, 5, 6]] stored column-major: 1 4 2 5 3 6.
    let data: Vec<u8> = [1i64, 4, 2, 5, 3, 6]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let p = write_bytes(
        dir.path(),
        "f.npy",
        &raw_npy(
            "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }",
            &data,
        ),
    );
    assert_eq!(
        npy::read(&p).unwrap(),
        t(&[2, 3], Data::I64(vec![1, 2, 3, 4, 5, 6]))
    );
    // Fortran order in one dimension is the same as C order.
    let p = write_bytes(
        dir.path(),
        "f1.npy",
        &raw_npy(
            "{'descr': '|b1', 'fortran_order': True, 'shape': (3,), }",
            &[1, 0, 1],
        ),
    );
    assert_eq!(
        npy::read(&p).unwrap(),
        t(&[3], Data::Bool(vec![true, false, true]))
    );
}

fn iota_f64(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

#[test]
fn reads_numpy_written_fixtures() {
    let d = data_dir().join("npy");
    let r = |name: &str| npy::read(&d.join(name)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r("c_f32_2x3.npy"),
        t(&[2, 3], Data::F32(vec![0., 1., 2., 3., 4., 5.]))
    );
    assert_eq!(
        r("fortran_f64_2x3x4.npy"),
        t(&[2, 3, 4], Data::F64(iota_f64(24)))
    );
    assert_eq!(
        r("fortran_i32_3x2.npy"),
        t(&[3, 2], Data::I32(vec![0, 1, 2, 3, 4, 5]))
    );
    assert_eq!(r("c_i64_5.npy"), t(&[5], Data::I64(vec![0, 1, 2, 3, 4])));
    assert_eq!(
        r("c_bool_2x2.npy"),
        t(&[2, 2], Data::Bool(vec![true, false, false, true]))
    );
    assert_eq!(r("scalar_f64.npy"), t(&[], Data::F64(vec![2.5])));
    assert_eq!(r("empty_i32_0x3.npy"), Tensor::zeros(DType::I32, [0, 3]));
    assert_eq!(r("v2_f32_4.npy"), t(&[4], Data::F32(vec![0., 1., 2., 3.])));
    let halves = [0.0, 1.0, 2.0].map(tapc_runtime::f16::from_f64).to_vec();
    assert_eq!(r("f16.npy"), t(&[3], Data::F16(halves)));
    assert_eq!(r("u8.npy"), t(&[3], Data::U8(vec![0, 1, 2])));
}

#[test]
fn rejects_numpy_written_unsupported_dtypes() {
    let d = data_dir().join("npy");
    for (name, found) in [
        ("be_f32.npy", "'>f4' (big-endian float32)"),
        ("c64.npy", "'<c8' (little-endian complex64)"),
        ("object.npy", "'|O' (Python objects)"),
        (
            "structured.npy",
            "[('a', '<f4'), ('b', '<i4')] (a structured dtype)",
        ),
    ] {
        let path = d.join(name);
        let (kind, msg) = read_err(&path);
        assert_eq!(kind, NpyErrorKind::UnsupportedDtype, "{msg}");
        assert_eq!(
            msg,
            format!(
                "{} has unsupported dtype {found}; supported: '<f4' (f32), '<f8' (f64), \
                 '<i4' (i32), '<i8' (i64), '|b1' (bool), '<f2' (f16), '|V2' (bf16), \
                 '<V2' (bf16), '|i1' (i8), '|u1' (u8), '<i2' (i16), '<u2' (u16), \
                 '<u4' (u32), '<u8' (u64)",
                path.display()
            )
        );
    }
}

#[test]
fn mlp_fixtures_have_the_documented_types() {
    let d = data_dir().join("mlp");
    for (name, shape) in [
        ("x", &[64, 784][..]),
        ("w1", &[784, 512]),
        ("b1", &[512]),
        ("w2", &[512, 10]),
        ("b2", &[10]),
        ("expected_logits", &[64, 10]),
        ("expected_sampled", &[10, 32]),
    ] {
        let path = d.join(format!("{name}.npy"));
        npy::read_expecting(&path, name, DType::F32, shape).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Recomputes the MLP in f64 from the fixture inputs and compares with the
/// numpy-computed expected outputs: checks the fixtures agree with their documentation.
#[test]
fn mlp_fixtures_are_consistent() {
    let d = data_dir().join("mlp");
    let f = |name: &str| -> Vec<f64> {
        match npy::read(&d.join(format!("{name}.npy"))).unwrap().data {
            Data::F32(v) => v.into_iter().map(f64::from).collect(),
            other => panic!("{name}: not f32: {:?}", other.dtype()),
        }
    };
    let (x, w1, b1, w2, b2) = (f("x"), f("w1"), f("b1"), f("w2"), f("b2"));
    let mut a = vec![0f64; 64 * 512];
    for i in 0..64 {
        let row = &mut a[i * 512..(i + 1) * 512];
        row.copy_from_slice(&b1);
        for k in 0..784 {
            let xv = x[i * 784 + k];
            for (j, r) in row.iter_mut().enumerate() {
                *r += xv * w1[k * 512 + j];
            }
        }
        for r in row.iter_mut() {
            *r = r.max(0.0);
        }
    }
    let mut y = vec![0f64; 64 * 10];
    for i in 0..64 {
        for j in 0..10 {
            y[i * 10 + j] = b2[j]
                + (0..512)
                    .map(|k| a[i * 512 + k] * w2[k * 10 + j])
                    .sum::<f64>();
        }
    }
    let logits = f("expected_logits");
    let sampled = f("expected_sampled");
    let close = |got: f64, want: f64| (got - want).abs() <= 1e-5 * (1.0 + want.abs());
    for (i, (&want, &got)) in logits.iter().zip(&y).enumerate() {
        assert!(close(got, want), "logits[{i}]: {got} vs {want}");
    }
    for r in 0..10 {
        for c in 0..32 {
            let (got, want) = (y[(2 * c) * 10 + r], sampled[r * 32 + c]);
            assert!(close(got, want), "sampled[{r},{c}]: {got} vs {want}");
        }
    }
}

// ---------------------------------------------------------------- error messages

#[test]
fn missing_file_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.npy");
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::Io);
    assert_eq!(
        msg,
        format!("cannot read {}: No such file or directory", p.display())
    );
    // Relative paths are reported as given.
    let rel = Path::new("definitely-missing-dir/x.npy");
    assert_eq!(
        npy::read(rel).unwrap_err().to_string(),
        "cannot read definitely-missing-dir/x.npy: No such file or directory"
    );
}

#[test]
fn truncated_data_message() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = raw_npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 784), }",
        &[0u8; 1000],
    );
    let p = write_bytes(dir.path(), "x.npy", &bytes);
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::Truncated);
    assert_eq!(
        msg,
        format!(
            "{} is truncated: header says f32[64, 784] = 200704 bytes of data, found 1000",
            p.display()
        )
    );
}

#[test]
fn truncated_header_messages() {
    let dir = tempfile::tempdir().unwrap();
    let full = raw_npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        &[0; 8],
    );
    let p = write_bytes(dir.path(), "h.npy", &full[..40]);
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::Truncated);
    assert_eq!(
        msg,
        format!(
            "{} is truncated: the header length field says 118 bytes of header, found 30",
            p.display()
        )
    );
    let p = write_bytes(dir.path(), "p.npy", &full[..9]);
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::Truncated);
    assert!(
        msg.ends_with("is truncated: the file ends inside the header length field (10 bytes of preamble expected, found 9)"),
        "{msg}"
    );
}

#[test]
fn bad_magic_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_bytes(dir.path(), "x.npy", b"PK\x03\x04 this is a zip file");
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::NotNpy);
    assert_eq!(
        msg,
        format!(
            "{} is not a .npy file: bad magic (expected the 6 bytes \"\\x93NUMPY\", found \"PK\\x03\\x04 t\")",
            p.display()
        )
    );
    let p = write_bytes(dir.path(), "empty.npy", b"");
    let (_, msg) = read_err(&p);
    assert!(
        msg.ends_with(
            "is not a .npy file: bad magic (expected the 6 bytes \"\\x93NUMPY\", found \"\")"
        ),
        "{msg}"
    );
}

#[test]
fn unsupported_version_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = raw_npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
        &[0; 4],
    );
    bytes[6] = 4;
    let p = write_bytes(dir.path(), "v.npy", &bytes);
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::NotNpy);
    assert!(
        msg.ends_with(
            "is not a .npy file: unsupported format version 4.0 (supported: 1.0, 2.0, 3.0)"
        ),
        "{msg}"
    );
}

#[test]
fn corrupt_header_messages() {
    let dir = tempfile::tempdir().unwrap();
    for (dict, want) in [
        (
            "{'descr': '<f4', 'fortran_order': False}",
            "bad header: expected the keys 'descr', 'fortran_order' and 'shape', missing shape",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
            "bad header: expected 'shape' to be a tuple of non-negative integers, found (2, -3)",
        ),
        (
            "{'descr': '<f4', 'fortran_order': 'no', 'shape': (), }",
            "bad header: expected 'fortran_order' to be True or False, found 'no'",
        ),
        ("[1, 2, 3]", "bad header: expected a dictionary literal starting with '{', found \"[1, 2, 3]"),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
            "bad header: shape (4294967296, 4294967296, 4294967296) has more elements than can be addressed",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }",
            "bad header: shape (0, 4294967296, 4294967296) has more elements than can be addressed",
        ),
    ] {
        let p = write_bytes(dir.path(), "c.npy", &raw_npy(dict, &[]));
        let (kind, msg) = read_err(&p);
        assert_eq!(kind, NpyErrorKind::NotNpy, "{msg}");
        let prefix = format!("{} is not a .npy file: ", p.display());
        assert!(msg.starts_with(&prefix), "{msg}");
        assert!(msg.contains(want), "{msg:?} lacks {want:?}");
    }
}

#[test]
fn unsupported_dtype_message_from_hand_built_header() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_bytes(
        dir.path(),
        "be.npy",
        &raw_npy(
            "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }",
            &[0; 8],
        ),
    );
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::UnsupportedDtype);
    assert!(
        msg.starts_with(&format!(
            "{} has unsupported dtype '>f8' (big-endian float64); supported: '<f4' (f32)",
            p.display()
        )),
        "{msg}"
    );
}

#[test]
fn trailing_bytes_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_bytes(
        dir.path(),
        "t.npy",
        &raw_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            &[0; 12],
        ),
    );
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::TrailingBytes);
    assert_eq!(
        msg,
        format!(
            "{} has 4 unexpected bytes after the data: header says f32[2] = 8 bytes of data, found 12",
            p.display()
        )
    );
}

#[test]
fn invalid_bool_byte_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_bytes(
        dir.path(),
        "b.npy",
        &raw_npy(
            "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
            &[1, 0, 7],
        ),
    );
    let (kind, msg) = read_err(&p);
    assert_eq!(kind, NpyErrorKind::InvalidData);
    assert!(
        msg.starts_with(&format!("{} has invalid bool[3] data: ", p.display())),
        "{msg}"
    );
    assert!(msg.contains('7'), "{msg}");
}

#[test]
fn read_bytes_names_the_given_path() {
    let e = npy::read_bytes(b"garbage", Path::new("mem/x.npy")).unwrap_err();
    assert!(e
        .to_string()
        .starts_with("mem/x.npy is not a .npy file: bad magic"));
    let good = raw_npy(
        "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }",
        &[9, 0, 0, 0],
    );
    assert_eq!(
        npy::read_bytes(&good, Path::new("mem")).unwrap(),
        t(&[1], Data::I32(vec![9]))
    );
}

// ---------------------------------------------------------------- read_expecting

#[test]
fn read_expecting_accepts_matching_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.npy");
    let tensor = Tensor::zeros(DType::F32, [64, 784]);
    npy::write(&p, &tensor).unwrap();
    assert_eq!(
        npy::read_expecting(&p, "@x", DType::F32, &[64, 784]).unwrap(),
        tensor
    );
}

#[test]
fn read_expecting_reports_dtype_and_shape_mismatches() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.npy");
    npy::write(&p, &Tensor::zeros(DType::F64, [64, 784])).unwrap();
    let e = npy::read_expecting(&p, "@x", DType::F32, &[64, 784]).unwrap_err();
    assert_eq!(e.kind(), NpyErrorKind::Mismatch);
    assert_eq!(e.path(), p);
    assert_eq!(
        e.to_string(),
        format!(
            "input for source @x ({}): expected f32[64, 784], found f64[64, 784]",
            p.display()
        )
    );
    // The leading '@' is optional; shape mismatches (incl. rank) are reported alike.
    let e = npy::read_expecting(&p, "x", DType::F64, &[784, 64]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "input for source @x ({}): expected f64[784, 64], found f64[64, 784]",
            p.display()
        )
    );
    let e = npy::read_expecting(&p, "x", DType::F64, &[]).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("expected f64[], found f64[64, 784]"),
        "{e}"
    );
}

#[test]
fn read_expecting_prefixes_read_errors_with_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("w1.npy");
    let e = npy::read_expecting(&p, "@w1", DType::F32, &[784, 512]).unwrap_err();
    assert_eq!(e.kind(), NpyErrorKind::Io);
    assert_eq!(
        e.to_string(),
        format!(
            "input for source @w1: cannot read {}: No such file or directory",
            p.display()
        )
    );
    assert!(std::error::Error::source(&e).is_some());
}

// ---------------------------------------------------------------- write errors

#[test]
fn write_reports_unwritable_path() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("no-such-dir").join("y.npy");
    let e = npy::write(&p, &Tensor::zeros(DType::F32, [1])).unwrap_err();
    assert_eq!(e.kind(), NpyErrorKind::Io);
    assert_eq!(
        e.to_string(),
        format!("cannot write {}: No such file or directory", p.display())
    );
}

#[test]
fn write_rejects_inconsistent_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("y.npy");
    let bad = Tensor {
        shape: vec![3],
        data: Data::F32(vec![1.0]),
    };
    let e = npy::write(&p, &bad).unwrap_err();
    assert_eq!(e.kind(), NpyErrorKind::InvalidArgument);
    assert_eq!(
        e.to_string(),
        format!(
            "cannot write {}: tensor of type f32[3] should have 3 elements, but its data has 1",
            p.display()
        )
    );
    assert!(!p.exists());
}

// ---------------------------------------------------------------- write_all_atomic

#[test]
fn write_all_atomic_writes_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out").join("nested");
    let a = t(&[2], Data::F32(vec![1.0, 2.0]));
    let b = t(&[], Data::Bool(vec![true]));
    let paths = output::write_all_atomic(&out, &[("logits", &a), ("flag", &b)]).unwrap();
    assert_eq!(paths, vec![out.join("logits.npy"), out.join("flag.npy")]);
    assert_eq!(listing(&out), vec!["flag.npy", "logits.npy"]);
    assert_eq!(npy::read(&paths[0]).unwrap(), a);
    assert_eq!(npy::read(&paths[1]).unwrap(), b);
    // Overwrites existing outputs.
    let a2 = t(&[1], Data::I64(vec![5]));
    output::write_all_atomic(&out, &[("logits", &a2)]).unwrap();
    assert_eq!(npy::read(&paths[0]).unwrap(), a2);
    assert_eq!(listing(&out), vec!["flag.npy", "logits.npy"]);
    // No outputs at all is fine.
    assert!(output::write_all_atomic(&out, &[]).unwrap().is_empty());
}

#[test]
fn write_all_atomic_leaves_nothing_when_a_target_is_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    fs::write(out.join("a.npy"), b"old a").unwrap();
    fs::create_dir(out.join("b.npy")).unwrap();
    let a = t(&[2], Data::F32(vec![1.0, 2.0]));
    let b = t(&[1], Data::F32(vec![3.0]));
    let c = t(&[1], Data::I32(vec![4]));
    let e = output::write_all_atomic(out, &[("a", &a), ("b", &b), ("c", &c)]).unwrap_err();
    assert_eq!(e.kind(), NpyErrorKind::Io);
    assert_eq!(e.path(), out.join("b.npy"));
    assert_eq!(
        e.to_string(),
        format!(
            "cannot write {}: expected a file or nothing there, found a directory",
            out.join("b.npy").display()
        )
    );
    // Nothing renamed, no temporaries left, the old a.npy untouched.
    assert_eq!(listing(out), vec!["a.npy", "b.npy"]);
    assert_eq!(fs::read(out.join("a.npy")).unwrap(), b"old a");
    assert!(listing(&out.join("b.npy")).is_empty());
}

#[test]
fn write_all_atomic_removes_temporaries_when_a_later_write_fails() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let a = t(&[2], Data::F32(vec![1.0, 2.0]));
    let bad = Tensor {
        shape: vec![2, 2],
        data: Data::F32(vec![0.0; 3]),
    };
    let e = output::write_all_atomic(out, &[("a", &a), ("bad", &bad), ("c", &a)]).unwrap_err();
    assert_eq!(e.kind(), NpyErrorKind::InvalidArgument);
    assert_eq!(e.path(), out.join("bad.npy"));
    assert!(
        e.to_string()
            .contains("should have 4 elements, but its data has 3"),
        "{e}"
    );
    assert!(listing(out).is_empty(), "{:?}", listing(out));
}

#[test]
fn write_all_atomic_rejects_bad_names_and_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let a = t(&[1], Data::F32(vec![1.0]));
    for name in ["", ".", "..", "a/b", "a\\b", "nul\0"] {
        let e = output::write_all_atomic(out, &[("ok", &a), (name, &a)]).unwrap_err();
        assert_eq!(e.kind(), NpyErrorKind::InvalidArgument);
        assert!(e.to_string().contains("expected a plain file name"), "{e}");
    }
    let e = output::write_all_atomic(out, &[("y", &a), ("y", &a)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "cannot write {}: output \"y\" is given twice",
            out.join("y.npy").display()
        )
    );
    assert!(listing(out).is_empty());
}

#[test]
fn write_all_atomic_reports_a_file_in_place_of_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let not_dir = dir.path().join("out");
    fs::write(&not_dir, b"file").unwrap();
    let a = t(&[1], Data::F32(vec![1.0]));
    let e = output::write_all_atomic(&not_dir, &[("a", &a)]).unwrap_err();
    assert_eq!(e.path(), not_dir);
    assert_eq!(
        e.to_string(),
        format!(
            "cannot write outputs to {}: expected a directory, found a file",
            not_dir.display()
        )
    );
    let below = not_dir.join("sub");
    let e = output::write_all_atomic(&below, &[("a", &a)]).unwrap_err();
    assert_eq!(e.path(), below);
    assert!(
        e.to_string().starts_with(&format!(
            "cannot create output directory {}: ",
            below.display()
        )),
        "{e}"
    );
}

// ---------------------------------------------------------------- robustness

/// xorshift64*: a tiny deterministic generator, so the sweep needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Valid files of every dtype and layout, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    let tensors = [
        t(&[2, 3], Data::F32(vec![1.0; 6])),
        t(&[3], Data::F64(vec![2.0; 3])),
        t(&[], Data::I32(vec![7])),
        t(&[2, 0], Data::I64(vec![])),
        t(&[4], Data::Bool(vec![true, false, true, true])),
    ];
    for (i, tensor) in tensors.iter().enumerate() {
        let p = dir.path().join(format!("{i}.npy"));
        npy::write(&p, tensor).unwrap();
        out.push(fs::read(&p).unwrap());
    }
    out.push(raw_npy(
        "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2), }",
        &[0; 16],
    ));
    out
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    match rng.below(9) {
        0 => b.truncate(rng.below(b.len() + 1)),
        1 => {
            for _ in 0..=rng.below(4) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
        }
        2 => {
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
        }
        3 => {
            // Mutate inside the header text, where the parser lives.
            let end = b.len().min(128);
            let i = 10 + rng.below(end.saturating_sub(10));
            if i < b.len() {
                b[i] = b"{}()[],:'\"0123456789-+TFLe \n\\x"[rng.below(30)];
            }
        }
        4 => {
            let n = rng.below(600);
            b = (0..n).map(|_| rng.next() as u8).collect();
            if rng.below(2) == 0 && b.len() >= 6 {
                b[..6].copy_from_slice(b"\x93NUMPY");
            }
        }
        5 => {
            // Corrupt the header length field.
            let v = rng.next();
            if b.len() >= 10 {
                b[8] = v as u8;
                b[9] = (v >> 8) as u8;
            }
        }
        6 => {
            // Oversized or weird shapes and dtypes.
            let text = String::from_utf8_lossy(&b).into_owned();
            let replacement = [
                "(18446744073709551615, 2)",
                "(99999999999999999999999,)",
                "(-1,)",
                "((1,),)",
                "(1.5,)",
                "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
                "(65536, 65536, 65536, 65536)",
                "(0, 18446744073709551615)",
                "(0, 4294967296, 4294967296, 4294967296)",
            ][rng.below(9)];
            let replaced = match (text.find("'shape': ("), text.find(')')) {
                (Some(s), Some(e)) if e > s => {
                    format!("{}'shape': {}{}", &text[..s], replacement, &text[e + 1..])
                }
                _ => text,
            };
            b = raw_npy(replaced.lines().next().unwrap_or(""), &[0; 16]);
        }
        7 => {
            let descr = [
                "'>f4'",
                "'<f2'",
                "'|O'",
                "'<U10'",
                "'<f16'",
                "'<i99999999999999999'",
                "'b1'",
                "[('a', '<f4')]",
                "'",
                "[[[[[",
                "None",
                "3",
            ][rng.below(12)];
            let shape = ["()", "(3,)", "(2, 2)"][rng.below(3)];
            let fortran = ["True", "False", "1"][rng.below(3)];
            b = raw_npy(
                &format!("{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"),
                &vec![1u8; rng.below(40)],
            );
        }
        _ => {
            // Grow: append garbage, or a deeply nested header.
            if rng.below(2) == 0 {
                let n = rng.below(64);
                b.extend((0..n).map(|_| rng.next() as u8));
            } else {
                let depth = 1 + rng.below(5000);
                b = raw_npy(
                    &format!("{{'descr': {}", "(".repeat(depth))
                        .chars()
                        .take(60000)
                        .collect::<String>(),
                    &[],
                );
            }
        }
    }
    b
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = seeds();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut ok, mut err) = (0, 0);
    for i in 0..600 {
        let seed = &seeds[i % seeds.len()];
        let bytes = mutate(&mut rng, seed);
        let path = dir.path().join(format!("m{}.npy", i % 8));
        fs::write(&path, &bytes).unwrap();
        let from_file = std::panic::catch_unwind(|| npy::read(&path));
        let from_mem = std::panic::catch_unwind(|| npy::read_bytes(&bytes, &path));
        let (Ok(from_file), Ok(from_mem)) = (from_file, from_mem) else {
            panic!("read panicked on case {i}: {bytes:?}");
        };
        match (&from_file, &from_mem) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b);
                ok += 1;
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string());
                assert!(a.to_string().contains(&path.display().to_string()), "{a}");
                err += 1;
            }
            _ => panic!("file and memory reads disagree on case {i}"),
        }
    }
    // The sweep must exercise both outcomes.
    assert!(ok >= 5 && err >= 300, "ok={ok} err={err}");
}

#[test]
fn every_truncation_of_a_valid_file_is_an_error() {
    for seed in seeds() {
        for n in 0..seed.len() {
            let e = npy::read_bytes(&seed[..n], Path::new("t.npy"));
            if let Ok(t) = e {
                // Only an empty tensor can survive losing bytes: none can.
                panic!("truncation to {n} bytes read as {}", t.shape_string());
            }
        }
    }
}

// ---------------------------------------------------------------- inputs (issue 13)

#[test]
fn a_mismatched_header_is_an_error_before_any_data_is_read() {
    // The header announces 2^40 elements whose data is not there: reading data first would
    // say "truncated" (or try to allocate 4 TiB); the type is what is wrong.
    let dir = tempfile::tempdir().unwrap();
    let p = write_bytes(
        dir.path(),
        "x.npy",
        &raw_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }",
            &[0; 8],
        ),
    );
    let e = npy::read_expecting(&p, "x", DType::F32, &[2, 3]).unwrap_err();
    assert_eq!(e.kind(), NpyErrorKind::Mismatch);
    assert_eq!(
        e.to_string(),
        format!(
            "input for source @x ({}): expected f32[2, 3], found f32[1099511627776]",
            p.display()
        )
    );
}

#[test]
fn pipes_are_read_as_streams() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.npy");
    let want = t(&[2, 3], Data::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    npy::write(&p, &want).unwrap();
    let bytes = fs::read(&p).unwrap();
    // A FIFO fed by a writer thread (metadata size 0: the old reader said "truncated").
    let fifo = dir.path().join("fifo.npy");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let feed = |data: Vec<u8>| {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = fs::OpenOptions::new().write(true).open(fifo).unwrap();
            let _ = f.write_all(&data);
        })
    };
    let w = feed(bytes.clone());
    assert_eq!(
        npy::read_expecting(&fifo, "x", DType::F32, &[2, 3]).unwrap(),
        want
    );
    w.join().unwrap();
    // Short and long streams are still truncated / trailing.
    let w = feed(bytes[..bytes.len() - 1].to_vec());
    let e = npy::read(&fifo).unwrap_err();
    w.join().unwrap();
    assert_eq!(e.kind(), NpyErrorKind::Truncated, "{e}");
    let mut long = bytes.clone();
    long.extend_from_slice(b"xyz");
    let w = feed(long);
    let e = npy::read(&fifo).unwrap_err();
    w.join().unwrap();
    assert_eq!(e.kind(), NpyErrorKind::TrailingBytes, "{e}");
    assert!(e.to_string().contains("3 unexpected bytes"), "{e}");
    // Through a real pipe, as a process substitution gives it.
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let b2 = bytes.clone();
    let w = std::thread::spawn(move || stdin.write_all(&b2));
    let out = child.stdout.take().unwrap();
    use std::os::fd::AsRawFd;
    let path = PathBuf::from(format!("/proc/self/fd/{}", out.as_raw_fd()));
    assert_eq!(npy::read(&path).unwrap(), want);
    w.join().unwrap().unwrap();
    child.wait().unwrap();
}

// ---------------------------------------------------------------- pieces read in place

/// `npy::read_piece_into` (what a rank of a distributed program reads its source windows
/// with, straight into the buffer the run then takes over) gives the bytes of
/// `read_piece_expecting`'s tensor, for every dtype: the runs read, zeros elsewhere; a
/// Fortran-order file (read whole, then cut) too; a run outside the piece is an error.
#[test]
fn a_piece_read_in_place_equals_the_piece_read_as_a_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let cases = [
        t(
            &[4, 6],
            Data::F32((0..24).map(|i| i as f32 * 0.5).collect()),
        ),
        t(&[4, 6], Data::I64((0..24).map(|i| i * 1000 - 7).collect())),
        t(&[4, 6], Data::Bool((0..24).map(|i| i % 3 == 0).collect())),
        t(&[4, 6], Data::U8((0..24).map(|i| i as u8 * 9).collect())),
    ];
    let (piece, runs) = ((5usize, 14usize), [(6i64, 4i64), (12, 6)]);
    for (k, x) in cases.iter().enumerate() {
        let path = dir.join(format!("x{k}.npy"));
        npy::write(&path, x).unwrap();
        let (want, n) =
            npy::read_piece_expecting(&path, "x", x.dtype(), &x.shape, piece, &runs).unwrap();
        let size = x.dtype().size_bytes();
        let mut dst = vec![0u8; piece.1 * size];
        let got = npy::read_piece_into(&path, "x", (x.dtype(), &x.shape), piece, &runs, &mut dst)
            .unwrap();
        assert_eq!(got, n, "{:?}", x.dtype());
        assert_eq!(dst, tensor_bytes(&want), "{:?}", x.dtype());
        let bad = [(2i64, 4i64)];
        let e = npy::read_piece_into(&path, "x", (x.dtype(), &x.shape), piece, &bad, &mut dst);
        assert!(
            e.unwrap_err().to_string().contains("outside"),
            "{:?}",
            x.dtype()
        );
    }
    let fortran = data_dir().join("npy").join("fortran_i32_3x2.npy");
    let (want, _) =
        npy::read_piece_expecting(&fortran, "f", DType::I32, &[3, 2], (1, 4), &[(2, 3)]).unwrap();
    let mut dst = vec![0u8; 16];
    npy::read_piece_into(
        &fortran,
        "f",
        (DType::I32, &[3, 2]),
        (1, 4),
        &[(2, 3)],
        &mut dst,
    )
    .unwrap();
    assert_eq!(dst, tensor_bytes(&want));
}

/// A tensor's elements as the executor stores them (a bool one byte 0 or 1).
fn tensor_bytes(x: &Tensor) -> Vec<u8> {
    // SAFETY: every element type is plain bytes (a bool is one byte 0 or 1).
    tapc_runtime::with_data!(&x.data, v => unsafe {
        std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(&v[..])).to_vec()
    })
}

// ---------------------------------------------------------------- source windows (issue 17)

/// The f32 elements of `bytes`.
fn f32s(bytes: &[u8]) -> Vec<f32> {
    (bytes.chunks_exact(4))
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn reads_a_window_dense_from_c_and_fortran_order_files() {
    let dir = tempfile::tempdir().unwrap();
    // A 4×5 f32 tensor holding 0..20 in C order, written both ways.
    let c: Vec<u8> = (0..20).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let f: Vec<u8> = (0..5)
        .flat_map(|j| (0..4).map(move |i| (i * 5 + j) as f32))
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let dict = |fortran: &str| {
        format!("{{'descr': '<f4', 'fortran_order': {fortran}, 'shape': (4, 5), }}")
    };
    let files = [
        write_bytes(dir.path(), "c.npy", &raw_npy(&dict("False"), &c)),
        write_bytes(dir.path(), "f.npy", &raw_npy(&dict("True"), &f)),
    ];
    // The box of rows 1..4 and columns 2..4: [[7, 8], [12, 13], [17, 18]].
    let w = npy::WindowBox {
        origin: &[1, 2],
        bx: &[3, 2],
    };
    let mut checked = 0;
    for p in &files {
        let ty = (DType::F32, &[4usize, 5][..]);
        let mut dst = vec![0u8; 24];
        let n = npy::read_window_into(p, "x", ty, &w, (0, 6), &[(0, 6)], &mut dst).unwrap();
        assert_eq!(f32s(&dst), [7.0, 8.0, 12.0, 13.0, 17.0, 18.0], "{p:?}");
        // Part of the window (its elements 1..4) into a piece from its element 1: the rest
        // stays zero.
        let mut dst = vec![0u8; 16];
        npy::read_window_into(p, "x", ty, &w, (1, 4), &[(1, 3)], &mut dst).unwrap();
        assert_eq!(f32s(&dst), [8.0, 12.0, 13.0, 0.0], "{p:?}");
        // The C-order file is read row by row of the box: only its 6 elements.
        if p.ends_with("c.npy") {
            assert_eq!(n, 24);
        }
        checked += 1;
    }
    assert_eq!(checked, 2);
}
