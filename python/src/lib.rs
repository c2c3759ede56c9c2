//! `tapc._native`: the extension module under the `tapc` Python package. It compiles TEG text
//! with [`tapc::embed`] into a [`Program`] that keeps its JIT-compiled machine code, and runs it
//! on numpy arrays: C-contiguous, aligned inputs are read in place, others copied once; the GIL
//! is released while the program runs; outputs are numpy arrays that take over the runtime's
//! vectors (no copy), or are written into caller-given arrays (`out`).
//! The Python layer (`python/tapc/__init__.py`) binds arguments by name and caches programs.

use numpy::npyffi::{self, NpyTypes, PY_ARRAY_API};
use numpy::{PyArray1, PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::Mutex;
use tapc::embed::{self, Compiled, Port};
use tapc_runtime::exec::{Borrowed, Input, OwnedBuffer, SinkData, SinkView};
use tapc_runtime::{DType, Data, Tensor};

pyo3::create_exception!(
    tapc,
    CompileError,
    PyException,
    "A TEG text did not compile. `diagnostics` holds one dict per diagnostic: `severity`, \
     `code` (e.g. \"E0012\"), `message`, `notes` and `labels` (each with `message`, \
     `line_start`, `col_start`, `line_end`, `col_end`, 1-based, and byte offsets)."
);

/// A compiled graph (see `tapc.compile`).
#[pyclass(frozen, module = "tapc._native")]
struct Program {
    inner: Compiled,
    /// The address of each source's buffer in the last run (`_last_source_addresses`).
    last_addrs: Mutex<Vec<usize>>,
}

/// The numpy dtype of every tapc dtype (in `DType::ALL` order), made once per process.
static DTYPES: PyOnceLock<Vec<Py<PyArrayDescr>>> = PyOnceLock::new();

/// The numpy dtype of a tapc dtype: bf16 is `ml_dtypes.bfloat16` when that package can be
/// imported the first time a dtype is mapped, else numpy's `uint16` (the same bits).
fn np_dtype<'py>(py: Python<'py>, d: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    let all = DTYPES.get_or_try_init(py, || {
        (DType::ALL.iter())
            .map(|&d| make_np_dtype(py, d).map(Bound::unbind))
            .collect::<PyResult<Vec<_>>>()
    })?;
    let k = DType::ALL.iter().position(|&x| x == d).unwrap_or(0);
    Ok(all[k].bind(py).clone())
}

fn make_np_dtype<'py>(py: Python<'py>, d: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    if d == DType::BF16 {
        if let Ok(m) = py.import("ml_dtypes") {
            return PyArrayDescr::new(py, m.getattr("bfloat16")?);
        }
        return PyArrayDescr::new(py, "uint16");
    }
    let name = match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::Bool => "bool",
        DType::F16 => "float16",
        DType::I8 => "int8",
        DType::U8 => "uint8",
        DType::I16 => "int16",
        DType::U16 | DType::BF16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
    };
    PyArrayDescr::new(py, name)
}

/// `(name, tapc dtype, numpy dtype, shape)` of a port.
fn port_tuple<'py>(py: Python<'py>, p: &Port) -> PyResult<Bound<'py, PyTuple>> {
    let shape = PyTuple::new(py, &p.shape)?;
    let items: Vec<Bound<PyAny>> = vec![
        p.name.clone().into_pyobject(py)?.into_any(),
        p.dtype.name().into_pyobject(py)?.into_any(),
        np_dtype(py, p.dtype)?.into_any(),
        shape.into_any(),
    ];
    PyTuple::new(py, items)
}

/// What a message says of an array: `float32 (2, 3)`.
fn found(a: &Bound<PyUntypedArray>) -> String {
    let dims: Vec<String> = a.shape().iter().map(|d| d.to_string()).collect();
    let comma = if dims.len() == 1 { "," } else { "" };
    let dtype = a
        .dtype()
        .str()
        .map_or_else(|_| "?".into(), |s| s.to_string());
    format!("{dtype} ({}{comma})", dims.join(", "))
}

/// What a message says a port expects: `f32[2, 3] (numpy float32 (2, 3))`.
fn expected(py: Python, p: &Port) -> String {
    let np = np_dtype(py, p.dtype).map_or_else(|_| "?".into(), |d| d.to_string());
    let dims: Vec<String> = p.shape.iter().map(|d| d.to_string()).collect();
    let comma = if dims.len() == 1 { "," } else { "" };
    format!(
        "{} (numpy {np} ({}{comma}))",
        tapc_runtime::type_string(p.dtype, &p.shape),
        dims.join(", ")
    )
}

/// `obj` as an array of port `p`'s dtype and shape, else a TypeError (not an array, or the
/// wrong dtype) or a ValueError (the wrong shape) naming the port, what it expects and finds.
fn checked<'py>(
    py: Python<'py>,
    what: &str,
    p: &Port,
    obj: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let name = &p.name;
    let Ok(a) = obj.cast::<PyUntypedArray>() else {
        let ty = obj.get_type().name()?;
        return Err(PyTypeError::new_err(format!(
            "{what} `{name}`: expected a numpy array of {}, found {ty}",
            expected(py, p)
        )));
    };
    if !a.dtype().is_equiv_to(&np_dtype(py, p.dtype)?) {
        return Err(PyTypeError::new_err(format!(
            "{what} `{name}`: expected {}, found {}",
            expected(py, p),
            found(a)
        )));
    }
    if a.shape() != p.shape.as_slice() {
        return Err(PyValueError::new_err(format!(
            "{what} `{name}`: expected {}, found {}",
            expected(py, p),
            found(a)
        )));
    }
    Ok(a.clone())
}

/// An input array the program can read in place: `a` itself when it is C-contiguous and
/// aligned, else one C-order copy.
fn readable<'py>(a: Bound<'py, PyUntypedArray>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if a.is_c_contiguous() && a.is_aligned() {
        return Ok(a);
    }
    let copy = a.call_method1("copy", ("C",))?;
    Ok(copy.cast_into::<PyUntypedArray>()?)
}

fn data_ptr(a: &Bound<PyUntypedArray>) -> *mut u8 {
    // SAFETY: a live array object; `data` is its first element.
    unsafe { (*a.as_array_ptr()).fields.data.cast() }
}

/// A sink tensor as a numpy array that takes over its vector (no copy).
fn to_numpy<'py>(py: Python<'py>, t: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let shape = PyTuple::new(py, &t.shape)?;
    let flat = match t.data {
        Data::BF16(v) => {
            let mut v = std::mem::ManuallyDrop::new(v);
            // SAFETY: bf16 is a transparent u16; the vector's allocation moves over whole.
            let bits =
                unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<u16>(), v.len(), v.capacity()) };
            let a = PyArray1::from_vec(py, bits).into_any();
            a.call_method1("view", (np_dtype(py, DType::BF16)?,))?
        }
        other => tapc_runtime::with_data!(other, v => PyArray1::from_vec(py, v).into_any()),
    };
    flat.call_method1("reshape", (shape,))
}

/// The memory of a numpy array made from a sink's buffer: the array's base object, which
/// frees the buffer when numpy drops the array.
#[pyclass(frozen, module = "tapc._native")]
struct SinkBuffer {
    _buf: OwnedBuffer,
}

/// A numpy array over a sink's own buffer (no copy): C order, writeable, owned through its
/// base object.
fn buffer_to_numpy<'py>(
    py: Python<'py>,
    p: &Port,
    buf: OwnedBuffer,
) -> PyResult<Bound<'py, PyAny>> {
    let descr = np_dtype(py, p.dtype)?;
    let mut dims: Vec<npyffi::npy_intp> = p.shape.iter().map(|&d| d as npyffi::npy_intp).collect();
    let data = buf.as_ptr();
    let base = Bound::new(py, SinkBuffer { _buf: buf })?;
    // SAFETY: the descriptor reference is stolen by the call; `data` holds the sink's
    // elements in C order and lives as long as `base`, which the array then owns.
    unsafe {
        let ty = npyffi::get_type_object(py, NpyTypes::PyArray_Type);
        let arr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            ty,
            descr.into_ptr().cast(),
            dims.len() as std::os::raw::c_int,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            data.cast(),
            npyffi::NPY_ARRAY_CARRAY,
            std::ptr::null_mut(),
        );
        let arr = Bound::from_owned_ptr_or_err(py, arr)?;
        if PY_ARRAY_API.PyArray_SetBaseObject(py, arr.as_ptr().cast(), base.into_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(arr)
    }
}

/// The `CompileError` of `e`, its `diagnostics` parsed from the JSON rendering.
fn compile_error(py: Python, e: &embed::CompileError) -> PyErr {
    let err = CompileError::new_err(e.human());
    let diags = (|| -> PyResult<Bound<PyList>> {
        let loads = py.import("json")?.getattr("loads")?;
        let list = PyList::empty(py);
        for line in e.json().lines() {
            list.append(loads.call1((line,))?)?;
        }
        Ok(list)
    })();
    match diags {
        Ok(list) => match err.value(py).setattr("diagnostics", list) {
            Ok(()) => err,
            Err(e) => e,
        },
        Err(e) => e,
    }
}

/// Compiles TEG `text` (named `file` in diagnostics) with graph `graph`, pass pipeline
/// `passes` (default: the standard pipeline) and `threads` workers (default: every core).
#[pyfunction]
#[pyo3(signature = (file, text, graph=None, passes=None, threads=None))]
fn compile(
    py: Python,
    file: &str,
    text: Vec<u8>,
    graph: Option<String>,
    passes: Option<String>,
    threads: Option<usize>,
) -> PyResult<Program> {
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    let opts = embed::Options {
        graph,
        passes,
        threads,
    };
    let file = file.to_string();
    let made = py.detach(move || embed::compile(&file, text, &opts).map_err(Box::new));
    match made {
        Ok(inner) => Ok(Program {
            inner,
            last_addrs: Mutex::new(Vec::new()),
        }),
        Err(e) => Err(compile_error(py, &e)),
    }
}

/// Imports the ONNX model at `path`: `(teg, weights, inputs, outputs)`, the weights a dict of
/// numpy arrays by source name, the inputs and outputs the model's own in ONNX order.
/// `input_shapes` fixes dynamic dimensions as `tapc import --input-shape` does.
#[pyfunction]
#[pyo3(signature = (path, input_shapes=None))]
#[allow(clippy::type_complexity)]
fn import_onnx<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    input_shapes: Option<Vec<(String, Vec<usize>)>>,
) -> PyResult<(String, Bound<'py, PyDict>, Vec<String>, Vec<String>)> {
    let opts = tapc::import::ImportOptions {
        input_shapes: input_shapes.unwrap_or_default(),
        ..Default::default()
    };
    let imported = py
        .detach(|| embed::import_onnx(&path, &opts).map_err(Box::new))
        .map_err(|e| compile_error(py, &e))?;
    let weights = PyDict::new(py);
    for (name, t) in imported.weights {
        weights.set_item(name, to_numpy(py, t)?)?;
    }
    Ok((imported.teg, weights, imported.inputs, imported.outputs))
}

/// The host CPU and its features: part of the key programs are cached under.
#[pyfunction]
fn host_cpu() -> PyResult<String> {
    let h = tapc::codegen::target::host().map_err(PyException::new_err)?;
    Ok(format!("{} {} {}", h.triple, h.cpu, h.features))
}

/// The inputs of a call, checked against the sources and made readable in place; the arrays
/// must stay alive while the addresses are used.
fn call_inputs<'py>(
    py: Python<'py>,
    c: &Compiled,
    args: &[Bound<'py, PyAny>],
) -> PyResult<(Vec<Bound<'py, PyUntypedArray>>, Vec<usize>)> {
    if args.len() != c.inputs.len() {
        return Err(PyTypeError::new_err(format!(
            "graph @{} takes {} input(s), {} given",
            c.graph,
            c.inputs.len(),
            args.len()
        )));
    }
    let arrays: Vec<Bound<PyUntypedArray>> = (c.inputs.iter().zip(args))
        .map(|(p, a)| readable(checked(py, "input", p, a)?))
        .collect::<PyResult<_>>()?;
    let addrs = arrays.iter().map(|a| data_ptr(a) as usize).collect();
    Ok((arrays, addrs))
}

/// The runtime's view of the input arrays at `addrs` (from [`call_inputs`]).
fn borrowed<'a>(c: &'a Compiled, addrs: &[usize]) -> Vec<Input<'a>> {
    (addrs.iter().zip(&c.inputs))
        // SAFETY: each array is C-contiguous, aligned, of the port's dtype and shape, and
        // kept alive by the caller until the run returns.
        .map(|(&p, port)| {
            Input::Borrowed(unsafe { Borrowed::new(p as *const u8, port.dtype, &port.shape) })
        })
        .collect()
}

/// Writes a sink into a caller's array (C-contiguous, `bytes` long).
fn write_into(v: &SinkView, dst: *mut u8, bytes: usize) -> Result<(), String> {
    // SAFETY: `dst` is a writeable C-contiguous array of the sink's dtype and shape, kept
    // alive by the caller for the run.
    let mut slice = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
    v.write_data(&mut slice)
        .map_err(|e| format!("sink @{}: {e}", v.name))
}

impl Program {
    /// A call with no `out` arrays: each sink comes back in the buffer the program wrote,
    /// as a numpy array's memory, where that buffer is its own (else copied once).
    fn run_owned<'py>(&self, py: Python<'py>, addrs: &[usize]) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.inner;
        let ran = py.detach(|| c.run_owned(&borrowed(c, addrs)));
        let (sinks, report) = ran.map_err(PyValueError::new_err)?;
        *self.last_addrs.lock().unwrap_or_else(|e| e.into_inner()) = report.source_addrs;
        let dict = PyDict::new(py);
        for (p, sink) in c.outputs.iter().zip(sinks) {
            let array = match sink {
                SinkData::Buffer(b) => buffer_to_numpy(py, p, b)?,
                SinkData::Copy(t) => to_numpy(py, t)?,
            };
            dict.set_item(&p.name, array)?;
        }
        Ok(dict)
    }

    /// The `out` array of sink `p`, checked: of its dtype and shape, C-contiguous, writeable.
    fn out_array<'py>(
        &self,
        py: Python<'py>,
        p: &Port,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyUntypedArray>> {
        let a = checked(py, "output", p, obj)?;
        let writeable = a
            .getattr("flags")?
            .getattr("writeable")?
            .extract::<bool>()?;
        if !a.is_c_contiguous() || !a.is_aligned() || !writeable {
            return Err(PyValueError::new_err(format!(
                "output `{}`: the array must be C-contiguous, aligned and writeable",
                p.name
            )));
        }
        Ok(a)
    }
}

#[pymethods]
impl Program {
    /// The sources, in order: `(name, tapc dtype, numpy dtype, shape)`.
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        self.inner
            .inputs
            .iter()
            .map(|p| port_tuple(py, p))
            .collect()
    }

    /// The sinks, in order: `(name, tapc dtype, numpy dtype, shape)`.
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        self.inner
            .outputs
            .iter()
            .map(|p| port_tuple(py, p))
            .collect()
    }

    /// The module after the passes, as TEG text.
    #[getter]
    fn teg(&self) -> &str {
        &self.inner.teg
    }

    /// The compiled graph's name.
    #[getter]
    fn graph(&self) -> &str {
        &self.inner.graph
    }

    /// Worker threads of each run.
    #[getter]
    fn threads(&self) -> usize {
        self.inner.threads
    }

    /// Per apply: its index space, port projections and derived costs.
    fn signature(&self) -> String {
        self.inner.signature()
    }

    /// The cost model's report (the `cost` pass).
    fn cost(&self, py: Python) -> PyResult<String> {
        self.inner.cost().map_err(|e| compile_error(py, &e))
    }

    /// The address of each source's buffer during the last run (a debugging hook: equal to
    /// the input array's data pointer when the array was read in place).
    fn _last_source_addresses(&self) -> Vec<usize> {
        self.last_addrs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Runs the program `n` times on `args` from Rust, with no Python in between; returns
    /// each run's seconds (a benchmarking hook: the program's own time, against which a
    /// Python call's overhead is measured).
    fn _time_runs(&self, py: Python, args: Vec<Bound<PyAny>>, n: usize) -> PyResult<Vec<f64>> {
        let c = &self.inner;
        let (_arrays, addrs) = call_inputs(py, c, &args)?;
        let times = py.detach(move || {
            let inputs = borrowed(c, &addrs);
            (0..n)
                .map(|_| {
                    let t0 = std::time::Instant::now();
                    // As a call without `out` runs it; the sinks are freed here.
                    c.run_owned(&inputs).map(|_| t0.elapsed().as_secs_f64())
                })
                .collect::<Result<Vec<f64>, String>>()
        });
        times.map_err(PyValueError::new_err)
    }

    /// Runs on `args` (one array per source, in order); `out` is None or one array-or-None
    /// per sink. Returns a dict of the sinks by name (the `out` arrays where given).
    #[pyo3(signature = (args, out=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        args: Vec<Bound<'py, PyAny>>,
        out: Option<Vec<Option<Bound<'py, PyAny>>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.inner;
        let (_arrays, addrs) = call_inputs(py, c, &args)?;
        let out = out.unwrap_or_else(|| vec![None; c.outputs.len()]);
        let outs: Vec<Option<Bound<PyUntypedArray>>> = (c.outputs.iter().zip(&out))
            .map(|(p, o)| o.as_ref().map(|o| self.out_array(py, p, o)).transpose())
            .collect::<PyResult<_>>()?;
        if outs.iter().all(Option::is_none) {
            return self.run_owned(py, &addrs);
        }
        let ptrs = (
            addrs,
            (outs.iter())
                .map(|o| {
                    o.as_ref()
                        .map(|a| (data_ptr(a) as usize, a.len() * a.dtype().itemsize()))
                })
                .collect::<Vec<_>>(),
        );
        let ran = py.detach(move || {
            let (addrs, outs) = &ptrs;
            let inputs = borrowed(c, addrs);
            c.run(&inputs, |views| {
                (views.iter().zip(outs))
                    .map(|(v, o)| match o {
                        Some((p, n)) => write_into(v, *p as *mut u8, *n).map(|()| None),
                        None => v.to_tensor().map(Some),
                    })
                    .collect::<Result<Vec<_>, String>>()
            })
        });
        let (tensors, report) = ran.map_err(PyValueError::new_err)?;
        *self.last_addrs.lock().unwrap_or_else(|e| e.into_inner()) = report.source_addrs;
        let dict = PyDict::new(py);
        for ((p, t), o) in c.outputs.iter().zip(tensors).zip(outs) {
            match (t, o) {
                (Some(t), _) => dict.set_item(&p.name, to_numpy(py, t)?)?,
                (None, Some(a)) => dict.set_item(&p.name, a)?,
                (None, None) => unreachable!("a sink is either returned or written"),
            }
        }
        Ok(dict)
    }
}

#[pymodule]
fn _native(m: &Bound<PyModule>) -> PyResult<()> {
    m.add("CompileError", m.py().get_type::<CompileError>())?;
    m.add_class::<Program>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(host_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(import_onnx, m)?)?;
    Ok(())
}
