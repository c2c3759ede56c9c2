//! Stage one of the import: the ONNX protobuf decoded into a generic node list. Each node
//! carries its domain, the opset version the model imports for that domain, its attributes
//! (decoded, tensors included) and its input and output names; initializers are decoded into
//! tensors (external data read relative to the model file); graph inputs and outputs keep
//! their declared dtypes and dimensions. Nothing here knows what an operator means.

use super::elem;
use super::proto;
use crate::diag::{codes, Diagnostic};
use prost::Message;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use tapc_runtime::{DType, Data, Tensor};

/// A decoded model.
#[derive(Debug)]
pub struct Model {
    pub path: PathBuf,
    /// Opset version per domain (`""` for the default domain `ai.onnx`).
    pub opsets: HashMap<String, i64>,
    pub graph: Graph,
}

/// The main graph.
#[derive(Debug)]
pub struct Graph {
    pub name: String,
    pub nodes: Vec<Node>,
    pub initializers: Vec<(String, Tensor)>,
    /// The graph inputs that are not initializers.
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
    /// The annotated intermediate values (`value_info`), by name.
    pub value_info: HashMap<String, ValueInfo>,
}

/// A declared value: its dtype (ONNX element type) and dims when annotated.
#[derive(Clone, Debug)]
pub struct ValueInfo {
    pub name: String,
    pub elem_type: Option<i32>,
    pub dims: Option<Vec<Dim>>,
}

/// One declared dimension.
#[derive(Clone, Debug, PartialEq)]
pub enum Dim {
    Known(i64),
    Param(String),
    Unknown,
}

/// One node of the generic list.
#[derive(Clone, Debug)]
pub struct Node {
    /// The node's name, or `op_type#index` when it has none.
    pub name: String,
    pub op_type: String,
    pub domain: String,
    /// The opset version of `domain` the model imports.
    pub opset: i64,
    /// Input names; `""` is an omitted optional input.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Vec<(String, Attr)>,
    /// The elementwise nodes this one stands for, in order, when the import's simplification
    /// (`simplify.rs`) fused a chain over input 0 into it; empty for a node of the file.
    pub chain: Vec<Node>,
}

/// A decoded attribute.
#[derive(Clone, Debug)]
pub enum Attr {
    Float(f32),
    Int(i64),
    Str(String),
    Tensor(Tensor),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strs(Vec<String>),
    /// A kind the importer does not read (a sub-graph, a sparse tensor, a type).
    Other(i32),
}

impl Node {
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }
    /// The `i`-th input's name, `None` when absent or omitted.
    pub fn input(&self, i: usize) -> Option<&str> {
        self.inputs
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}

/// The TEG dtype of an ONNX element type, `None` for strings, complex and 8-bit/4-bit floats.
pub fn dtype_of(elem_type: i32) -> Option<DType> {
    Some(match elem_type {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        12 => DType::U32,
        13 => DType::U64,
        16 => DType::BF16,
        _ => return None,
    })
}

/// A diagnostic about the model file `path`.
pub fn error(code: crate::diag::Code, path: &Path, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(code, msg).note(format!("in {}", path.display()))
}

/// Reads and decodes the model at `path`.
pub fn read(path: &Path) -> Result<Model, Diagnostic> {
    let bytes = std::fs::read(path).map_err(|e| {
        error(
            codes::ONNX_READ,
            path,
            format!("cannot read the ONNX model: {e}"),
        )
    })?;
    let m = proto::ModelProto::decode(bytes.as_slice()).map_err(|e| {
        error(
            codes::ONNX_READ,
            path,
            format!("not a valid ONNX model ({} bytes): {e}", bytes.len()),
        )
        .note("the file may be truncated or not an ONNX protobuf")
    })?;
    let Some(g) = m.graph else {
        return Err(error(codes::ONNX_READ, path, "the ONNX model has no graph")
            .note("the file may be empty, truncated or not an ONNX protobuf"));
    };
    let mut opsets = HashMap::new();
    for o in &m.opset_import {
        let d = o.domain.clone().unwrap_or_default();
        let d = if d == "ai.onnx" { String::new() } else { d };
        opsets.insert(d, o.version.unwrap_or(1));
    }
    if !opsets.contains_key("") {
        // IR version 3 and later must import the default domain; older files mean opset 1.
        opsets.insert(String::new(), 1);
    }
    let graph = decode_graph(g, &opsets, path)?;
    Ok(Model {
        path: path.to_path_buf(),
        opsets,
        graph,
    })
}

fn decode_graph(
    g: proto::GraphProto,
    opsets: &HashMap<String, i64>,
    path: &Path,
) -> Result<Graph, Diagnostic> {
    let mut initializers = Vec::new();
    for t in &g.initializer {
        let name = t.name.clone().unwrap_or_default();
        initializers.push((name, tensor(t, path)?));
    }
    let init_names: std::collections::HashSet<&str> =
        initializers.iter().map(|(n, _)| n.as_str()).collect();
    let inputs = g
        .input
        .iter()
        .map(value_info)
        .filter(|v| !init_names.contains(v.name.as_str()))
        .collect();
    let outputs = g.output.iter().map(value_info).collect();
    let annotated = g
        .value_info
        .iter()
        .map(|v| (v.name.clone().unwrap_or_default(), value_info(v)))
        .collect();
    let mut nodes = Vec::new();
    for (i, n) in g.node.iter().enumerate() {
        nodes.push(node(n, i, opsets, path)?);
    }
    Ok(Graph {
        name: g.name.unwrap_or_else(|| "main".into()),
        nodes,
        initializers,
        inputs,
        outputs,
        value_info: annotated,
    })
}

fn value_info(v: &proto::ValueInfoProto) -> ValueInfo {
    let t = v.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
    let dims = t.and_then(|t| t.shape.as_ref()).map(|s| {
        s.dim
            .iter()
            .map(|d| match (d.dim_value, &d.dim_param) {
                (Some(v), _) if v >= 0 => Dim::Known(v),
                (_, Some(p)) if !p.is_empty() => Dim::Param(p.clone()),
                _ => Dim::Unknown,
            })
            .collect()
    });
    ValueInfo {
        name: v.name.clone().unwrap_or_default(),
        elem_type: t.and_then(|t| t.elem_type),
        dims,
    }
}

fn node(
    n: &proto::NodeProto,
    index: usize,
    opsets: &HashMap<String, i64>,
    path: &Path,
) -> Result<Node, Diagnostic> {
    let op_type = n.op_type.clone().unwrap_or_default();
    let domain = n.domain.clone().unwrap_or_default();
    let domain = if domain == "ai.onnx" {
        String::new()
    } else {
        domain
    };
    let name = match n.name.as_deref() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => format!("{op_type}#{index}"),
    };
    let mut attrs = Vec::new();
    for a in &n.attribute {
        let aname = a.name.clone().unwrap_or_default();
        attrs.push((aname, attr(a, path)?));
    }
    Ok(Node {
        name,
        opset: opsets.get(&domain).copied().unwrap_or(0),
        op_type,
        domain,
        inputs: n.input.clone(),
        outputs: n.output.clone(),
        attrs,
        chain: vec![],
    })
}

fn attr(a: &proto::AttributeProto, path: &Path) -> Result<Attr, Diagnostic> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(match a.r#type.unwrap_or(0) {
        1 => Attr::Float(a.f.unwrap_or(0.0)),
        2 => Attr::Int(a.i.unwrap_or(0)),
        3 => Attr::Str(text(a.s.as_deref().unwrap_or_default())),
        4 => match &a.t {
            Some(t) => Attr::Tensor(tensor(t, path)?),
            None => Attr::Other(4),
        },
        6 => Attr::Floats(a.floats.clone()),
        7 => Attr::Ints(a.ints.clone()),
        8 => Attr::Strs(a.strings.iter().map(|s| text(s)).collect()),
        k => Attr::Other(k),
    })
}

/// Decodes a `TensorProto`, reading external data relative to the model file.
pub fn tensor(t: &proto::TensorProto, path: &Path) -> Result<Tensor, Diagnostic> {
    let name = t.name.clone().unwrap_or_default();
    let code = t.data_type.unwrap_or(0);
    let dtype = dtype_of(code).ok_or_else(|| {
        error(
            codes::ONNX_UNSUPPORTED_FORM,
            path,
            format!("tensor `{name}` has ONNX element type {code}, which TEG has no dtype for"),
        )
    })?;
    let bad = |m: String| error(codes::ONNX_READ, path, format!("tensor `{name}`: {m}"));
    if t.dims.iter().any(|&d| d < 0) {
        return Err(bad(format!("negative dimension in {:?}", t.dims)));
    }
    let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
    let n = tapc_runtime::checked_numel(&shape)
        .filter(|&n| {
            n.checked_mul(dtype.size_bytes())
                .is_some_and(|b| b < 1 << 40)
        })
        .ok_or_else(|| bad(format!("dimensions {:?} are too large", t.dims)))?;
    let data = if t.data_location == Some(1) {
        let raw = external(t, &name, n * dtype.size_bytes(), path)?;
        elem::from_le_bytes(dtype, &raw, n)
    } else if let Some(raw) = &t.raw_data {
        elem::from_le_bytes(dtype, raw, n)
    } else {
        typed_fields(t, dtype, n)
    };
    let data = data.ok_or_else(|| {
        bad(format!(
            "its data does not hold {n} elements of {}",
            dtype.name()
        ))
    })?;
    Tensor::new(shape, data).map_err(bad)
}

/// The data of a tensor stored in its typed fields (`float_data`, `int32_data`, ...).
fn typed_fields(t: &proto::TensorProto, dtype: DType, n: usize) -> Option<Data> {
    let d = match dtype {
        DType::F32 => Data::F32(t.float_data.clone()),
        DType::F64 => Data::F64(t.double_data.clone()),
        DType::I64 => Data::I64(t.int64_data.clone()),
        DType::U32 | DType::U64 => {
            let v: Vec<i64> = t.uint64_data.iter().map(|&x| x as i64).collect();
            elem::from_i64s(dtype, &v)
        }
        DType::F16 | DType::BF16 => {
            // Stored as the 16-bit patterns in int32_data.
            let b: Vec<u8> = t
                .int32_data
                .iter()
                .flat_map(|&x| (x as u16).to_le_bytes())
                .collect();
            elem::from_le_bytes(dtype, &b, t.int32_data.len())?
        }
        _ => {
            let v: Vec<i64> = t.int32_data.iter().map(|&x| i64::from(x)).collect();
            elem::from_i64s(dtype, &v)
        }
    };
    (d.len() == n).then_some(d)
}

/// The bytes of an external-data tensor: `location` relative to the model's directory (never
/// outside it), from `offset`, `length` bytes (default: `want`).
fn external(
    t: &proto::TensorProto,
    name: &str,
    want: usize,
    path: &Path,
) -> Result<Vec<u8>, Diagnostic> {
    let key = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key.as_deref() == Some(k))
            .and_then(|e| e.value.clone())
    };
    let fail = |m: String| error(codes::ONNX_EXTERNAL, path, format!("tensor `{name}`: {m}"));
    let location =
        key("location").ok_or_else(|| fail("external data without a `location`".into()))?;
    let rel = Path::new(&location);
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(fail(format!(
            "external data location `{location}` is not a plain path inside the model's directory"
        )));
    }
    let num = |k: &str| -> Result<usize, Diagnostic> {
        match key(k) {
            None => Ok(0),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| fail(format!("external data `{k}` is `{v}`, not a byte count"))),
        }
    };
    let offset = num("offset")?;
    let length = match key("length") {
        None => want,
        Some(_) => num("length")?,
    };
    let file = path.parent().unwrap_or(Path::new(".")).join(rel);
    let bytes = std::fs::read(&file)
        .map_err(|e| fail(format!("cannot read external data {}: {e}", file.display())))?;
    let end = offset
        .checked_add(length)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            fail(format!(
                "external data {} has {} bytes; the tensor needs bytes {offset}..{}",
                file.display(),
                bytes.len(),
                offset.saturating_add(length)
            ))
        })?;
    Ok(bytes[offset..end].to_vec())
}
