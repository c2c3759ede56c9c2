//! The ONNX importer, in two stages as torch-mlir's: [`model`] decodes the protobuf
//! ([`proto`]) into a generic node list (domain, opset, attributes, initializers, value
//! infos), then [`lower`] runs one lowering function per operator, folding the shape glue,
//! and emits TEG ops and selectors. The text is verified before it is returned.

pub mod elem;
pub mod lower;
pub mod model;
pub mod proto;
pub mod simplify;

use crate::diag::{codes, Diagnostic};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tapc_runtime::Tensor;

/// Options of an import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Static dims for graph inputs (`--input-shape NAME=d0,d1,...`), by ONNX input name.
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// Inputs bound to constants (`--input-value NAME=FILE.npy`): each becomes an initializer,
    /// so shape glue and attributes that read it fold at import.
    pub input_values: Vec<(String, PathBuf)>,
}

/// An imported model: TEG text whose sources are the model's inputs and its weights.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The module (one graph, named after the ONNX graph).
    pub teg: String,
    /// The weight sources, in the order they appear: source name (without `@`) and tensor.
    pub weights: Vec<(String, Tensor)>,
    /// The model's input sources (names as in the TEG, without `@`), in ONNX order.
    pub inputs: Vec<String>,
    /// The model's output sinks (names as in the TEG), in ONNX order.
    pub outputs: Vec<String>,
}

/// Imports the ONNX model at `path`. Every failure is a diagnostic (E0120–E0127) naming the
/// file and, for a node, the operator, node name and opset.
pub fn import_onnx(path: &Path, opts: &ImportOptions) -> Result<Imported, Vec<Diagnostic>> {
    let mut m = model::read(path).map_err(|d| vec![d])?;
    let mut shapes = HashMap::new();
    for (name, dims) in &opts.input_shapes {
        named_input(&m, path, "--input-shape", name)?;
        shapes.insert(name.clone(), dims.clone());
    }
    for (name, file) in &opts.input_values {
        bind_input(&mut m, path, name, file).map_err(|d| vec![d])?;
    }
    simplify::run(&mut m.graph);
    let lowered = lower::lower(&m, &shapes).map_err(|d| vec![d])?;
    let (_, _, diags) = crate::compile_source(&lowered.teg);
    if diags.has_errors() {
        let mut d = model::error(
            codes::ONNX_INTERNAL,
            path,
            "the imported TEG does not verify (a size TEG cannot hold, or an importer bug: please report it with the model)",
        );
        for e in diags.0.iter().filter(|e| e.is_error()).take(5) {
            let code = e.code.map(|c| c.to_string()).unwrap_or_default();
            d = d.note(format!("{code}: {}", e.message));
        }
        return Err(vec![d]);
    }
    Ok(Imported {
        teg: lowered.teg,
        weights: lowered.weights,
        inputs: m
            .graph
            .inputs
            .iter()
            .map(|i| lower::ident(&i.name))
            .collect(),
        outputs: m
            .graph
            .outputs
            .iter()
            .map(|o| lower::ident(&o.name))
            .collect(),
    })
}

/// E0125 unless `name` is an input of the model (`flag` is the option that named it).
fn named_input(
    m: &model::Model,
    path: &Path,
    flag: &str,
    name: &str,
) -> Result<(), Vec<Diagnostic>> {
    if m.graph.inputs.iter().any(|i| i.name == name) {
        return Ok(());
    }
    let known: Vec<&str> = m.graph.inputs.iter().map(|i| i.name.as_str()).collect();
    Err(vec![model::error(
        codes::ONNX_INPUT_SHAPE,
        path,
        format!("`{flag} {name}=...` names no input of the model"),
    )
    .note(format!("the inputs are: {}", known.join(", ")))])
}

/// Makes input `name` the initializer read from `file` (E0125 when the file cannot be read or
/// its dtype or static dims differ from the input's declared ones).
fn bind_input(
    m: &mut model::Model,
    path: &Path,
    name: &str,
    file: &Path,
) -> Result<(), Diagnostic> {
    named_input(m, path, "--input-value", name).map_err(|mut d| d.remove(0))?;
    let bad = |msg: String| {
        model::error(
            codes::ONNX_INPUT_SHAPE,
            path,
            format!("`--input-value {name}=...`: {msg}"),
        )
    };
    let t = tapc_runtime::npy::read(file).map_err(|e| bad(e.to_string()))?;
    let k = m
        .graph
        .inputs
        .iter()
        .position(|i| i.name == name)
        .expect("checked above");
    let info = &m.graph.inputs[k];
    if let Some(want) = info.elem_type.and_then(model::dtype_of) {
        if want != t.dtype() {
            return Err(bad(format!(
                "the input is {}, the file holds {}",
                want.name(),
                t.dtype().name()
            )));
        }
    }
    if let Some(dims) = &info.dims {
        let fits = dims.len() == t.shape.len()
            && dims
                .iter()
                .zip(&t.shape)
                .all(|(d, &s)| !matches!(d, model::Dim::Known(k) if *k as usize != s));
        if !fits {
            return Err(bad(format!(
                "the file's shape {:?} does not fit the input's",
                t.shape
            )));
        }
    }
    m.graph.inputs.remove(k);
    m.graph.initializers.push((name.to_string(), t));
    Ok(())
}

/// Parses `NAME=FILE.npy` (E0125 when malformed).
pub fn parse_input_value(s: &str) -> Result<(String, PathBuf), Diagnostic> {
    match s.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => {
            Ok((name.to_string(), PathBuf::from(file)))
        }
        _ => Err(Diagnostic::error(
            codes::ONNX_INPUT_SHAPE,
            format!("`--input-value {s}` is not NAME=FILE.npy"),
        )),
    }
}

/// Parses `NAME=d0,d1,...` (E0125 when malformed).
pub fn parse_input_shape(s: &str) -> Result<(String, Vec<usize>), Diagnostic> {
    let bad = || {
        Diagnostic::error(
            codes::ONNX_INPUT_SHAPE,
            format!("`--input-shape {s}` is not NAME=d0,d1,..."),
        )
        .note("each dimension is a non-negative integer, e.g. `--input-shape input_ids=1,128`")
    };
    let (name, dims) = s.rsplit_once('=').ok_or_else(bad)?;
    if name.is_empty() {
        return Err(bad());
    }
    let dims: Result<Vec<usize>, _> = if dims.trim().is_empty() {
        Ok(vec![])
    } else {
        dims.split(',').map(|d| d.trim().parse::<usize>()).collect()
    };
    Ok((name.to_string(), dims.map_err(|_| bad())?))
}
