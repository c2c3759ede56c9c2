//! Reading and writing NumPy `.npy` files: the format `tapc` programs take their
//! source tensors from and write their sink tensors to.
//!
//! Supported element types are little-endian `f2`, `f4`, `f8`, `i1`, `i2`, `i4`, `i8`, `u1`,
//! `u2`, `u4`, `u8` and `|b1` (bool), in C or Fortran order, including 0-d scalars. `bf16` has
//! no numpy type code: a bf16 source reads the 2-byte void (`|V2`/`<V2`, what `np.save` writes
//! for an `ml_dtypes.bfloat16` array) or `<u2` holding the bf16 bits, and a bf16 sink is written
//! as `<u2` holding the bits (`np.load(f).view(ml_dtypes.bfloat16)` reads it). Every error names the file
//! and says what was expected and what was found, and no input bytes can make
//! [`read`] panic: the header is checked by a small strict parser
//! (`npy/header.rs`), and checked against the expected type, before any data is read; the
//! data is read into a fallibly allocated buffer, from a file or a stream. Files are written exactly as
//! numpy's `np.save` writes them (version 1.0, 64-byte aligned header).

mod header;
mod into;

pub use into::{read_piece_into, read_window_into, WindowBox};

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::paths::shown;
use crate::tensor::{checked_numel, type_string, DType, Data, Tensor};
use header::{parse_header_dict, Descr};

/// The 6 bytes every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Largest header text accepted (numpy itself writes well under 1 KiB).
const MAX_HEADER_LEN: usize = 1 << 20;

/// The `.npy` type strings this crate reads and writes, with their dtypes.
/// The first entry of a dtype is the one written; `bf16` is written as `<u2` (its bits).
const SUPPORTED: [(&str, DType); 14] = [
    ("<f4", DType::F32),
    ("<f8", DType::F64),
    ("<i4", DType::I32),
    ("<i8", DType::I64),
    ("|b1", DType::Bool),
    ("<f2", DType::F16),
    ("|V2", DType::BF16),
    ("<V2", DType::BF16),
    ("|i1", DType::I8),
    ("|u1", DType::U8),
    ("<i2", DType::I16),
    ("<u2", DType::U16),
    ("<u4", DType::U32),
    ("<u8", DType::U64),
];

/// The `.npy` type string written for `dtype`.
fn written_descr(dtype: DType) -> &'static str {
    match dtype {
        DType::BF16 => "<u2",
        d => SUPPORTED
            .iter()
            .find(|(_, x)| *x == d)
            .map_or("<f4", |(s, _)| *s),
    }
}

/// What kind of failure an [`NpyError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NpyErrorKind {
    /// The file (or directory) could not be opened, read, created, written or renamed.
    Io,
    /// The bytes are not a `.npy` file: bad magic, unknown version, corrupt header.
    NotNpy,
    /// The file ends before the header or the data it announces.
    Truncated,
    /// More bytes follow the data than the header announces.
    TrailingBytes,
    /// A well-formed file whose dtype this crate does not handle.
    UnsupportedDtype,
    /// The data bytes are invalid for the dtype (e.g. a bool byte that is not 0 or 1).
    InvalidData,
    /// The file is valid but its dtype or shape is not the one expected.
    Mismatch,
    /// A bad argument: an inconsistent tensor or an unusable output name.
    InvalidArgument,
}

/// An error reading or writing a `.npy` file. Its message names the file and says
/// what was expected and what was found.
#[derive(Debug)]
pub struct NpyError {
    path: PathBuf,
    kind: NpyErrorKind,
    message: String,
    io: Option<io::Error>,
}

impl NpyError {
    pub(crate) fn new(path: &Path, kind: NpyErrorKind, message: String) -> NpyError {
        NpyError {
            path: path.to_path_buf(),
            kind,
            message,
            io: None,
        }
    }

    /// `"{what} {path}: {io error}"`, e.g. `cannot read x.npy: No such file or directory`.
    pub(crate) fn io(what: &str, path: &Path, err: io::Error) -> NpyError {
        NpyError {
            path: path.to_path_buf(),
            kind: NpyErrorKind::Io,
            message: format!("{what} {}: {}", shown(path), io_message(&err)),
            io: Some(err),
        }
    }

    /// The file (or directory) the error is about.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> NpyErrorKind {
        self.kind
    }

    /// The full message (same as `to_string()`).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying I/O error, if any.
    pub fn io_error(&self) -> Option<&io::Error> {
        self.io.as_ref()
    }

    fn with_prefix(mut self, prefix: &str) -> NpyError {
        self.message = format!("{prefix}: {}", self.message);
        self
    }
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NpyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

pub use crate::paths::io_message;

/// Reads a `.npy` file into a C-order tensor.
///
/// A regular file's size is checked against the header before any data is read; anything else
/// (a pipe, a FIFO, `/dev/stdin`, a process substitution `<(...)`) is read as a stream, whose
/// end is found by reading. Opening a FIFO blocks until some process opens it for writing
/// (as with any reader of a FIFO).
pub fn read(path: &Path) -> Result<Tensor, NpyError> {
    read_checked(path, None)
}

/// [`read`], with the header checked against `expect` (dtype and shape) before any data.
fn read_checked(path: &Path, expect: Option<Expect>) -> Result<Tensor, NpyError> {
    let file = File::open(path).map_err(|e| NpyError::io("cannot read", path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| NpyError::io("cannot read", path, e))?;
    let len = meta.is_file().then_some(meta.len());
    decode(BufReader::with_capacity(1 << 20, file), len, path, expect)
}

/// Decodes the bytes of a `.npy` file held in memory; `path` is only used in messages.
pub fn read_bytes(bytes: &[u8], path: &Path) -> Result<Tensor, NpyError> {
    decode(bytes, Some(bytes.len() as u64), path, None)
}

/// The dtype and shape a source expects, with its name for messages.
#[derive(Clone, Copy)]
struct Expect<'a> {
    source: &'a str,
    dtype: DType,
    shape: &'a [usize],
}

/// Reads a `.npy` file that is the input for `source` and checks its dtype and shape.
///
/// `source` is the TEG source name, with or without its leading `@`. A mismatch reads
/// `input for source @x (x.npy): expected f32[64, 784], found f64[64, 784]`; any other
/// failure is [`read`]'s message prefixed by `input for source @x: `.
pub fn read_expecting(
    path: &Path,
    source: &str,
    dtype: DType,
    shape: &[usize],
) -> Result<Tensor, NpyError> {
    for_source(source, dtype, shape, |x| read_checked(path, Some(x)))
}

/// [`read_expecting`] of only the elements in `runs` (sorted, disjoint `(first, length)`
/// runs of element offsets in C order; every other element is zero): the header and the
/// file's size are checked first, then each run is one seek and one read. Returns the tensor
/// and the number of data bytes read. A stream (no seeking) or a Fortran-order file is read
/// whole.
pub fn read_window_expecting(
    path: &Path,
    source: &str,
    dtype: DType,
    shape: &[usize],
    runs: &[(i64, i64)],
) -> Result<(Tensor, u64), NpyError> {
    let numel = checked_numel(shape).unwrap_or(0);
    let (mut t, n) = read_piece_expecting(path, source, dtype, shape, (0, numel), runs)?;
    t.shape = shape.to_vec();
    Ok((t, n))
}

/// [`read_window_expecting`] into a *piece* of the tensor only: the 1-D tensor of the
/// `piece.1` elements (C order) from element `piece.0` on, of which the `runs` (every one
/// inside the piece) are read and the rest are zero. What a rank of a distributed program
/// holds of a source: only the windows it touches, never the whole tensor.
pub fn read_piece_expecting(
    path: &Path,
    source: &str,
    dtype: DType,
    shape: &[usize],
    piece: (usize, usize),
    runs: &[(i64, i64)],
) -> Result<(Tensor, u64), NpyError> {
    for_source(source, dtype, shape, |x| {
        let mut file = File::open(path).map_err(|e| NpyError::io("cannot read", path, e))?;
        let meta = file
            .metadata()
            .map_err(|e| NpyError::io("cannot read", path, e))?;
        if !meta.is_file() {
            let t = decode(BufReader::with_capacity(1 << 20, file), None, path, Some(x))?;
            let n = (checked_numel(&t.shape).unwrap_or(0) * dtype.size_bytes()) as u64;
            return Ok((cut_piece(t, piece), n));
        }
        let h = read_header(&mut file, Some(meta.len()), path, Some(x))?;
        if h.fortran_order {
            let t = read_body(BufReader::with_capacity(1 << 20, file), &h, false, path)?;
            return Ok((cut_piece(t, piece), h.data_bytes as u64));
        }
        read_runs(&mut file, &h, piece, runs, path)
    })
}

/// Elements `piece.0 .. piece.0 + piece.1` of `t` (C order) as a 1-D tensor.
fn cut_piece(t: Tensor, (at, len): (usize, usize)) -> Tensor {
    fn cut<T: Clone>(v: Vec<T>, at: usize, len: usize) -> Vec<T> {
        v[at.min(v.len())..(at + len).min(v.len())].to_vec()
    }
    let data = crate::map_data!(t.data, v => cut(v, at, len));
    Tensor {
        shape: vec![data.len()],
        data,
    }
}

/// Runs `read` with the expected dtype and shape of `source` (with or without its `@`) and
/// prefixes its errors, except a mismatch (which already names the source), with the source.
fn for_source<T>(
    source: &str,
    dtype: DType,
    shape: &[usize],
    read: impl FnOnce(Expect) -> Result<T, NpyError>,
) -> Result<T, NpyError> {
    let source = if source.starts_with('@') {
        source.to_string()
    } else {
        format!("@{source}")
    };
    let expect = Expect {
        source: &source,
        dtype,
        shape,
    };
    read(expect).map_err(|e| {
        if e.kind == NpyErrorKind::Mismatch {
            e
        } else {
            e.with_prefix(&format!("input for source {source}"))
        }
    })
}

/// Reads until `buf` is full or the input ends; returns how many bytes were read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Decodes a `.npy` stream of `total_len` bytes (unknown for a pipe: then its end is found by
/// reading); a header that does not match `expect` is an error before any data is read.
fn decode<R: Read>(
    mut r: R,
    total_len: Option<u64>,
    path: &Path,
    expect: Option<Expect>,
) -> Result<Tensor, NpyError> {
    let h = read_header(&mut r, total_len, path, expect)?;
    read_body(r, &h, total_len.is_none(), path)
}

/// A checked header: what the data after it holds.
struct Header {
    dtype: DType,
    shape: Vec<usize>,
    numel: usize,
    data_bytes: usize,
    fortran_order: bool,
    /// Bytes before the data (preamble and header text).
    len: u64,
}

/// An error of kind `kind` about `path`: the file's name, then `what`.
fn file_error(path: &Path, kind: NpyErrorKind, what: String) -> NpyError {
    NpyError::new(path, kind, format!("{} {what}", shown(path)))
}

fn truncated(path: &Path, what: String) -> NpyError {
    file_error(
        path,
        NpyErrorKind::Truncated,
        format!("is truncated: {what}"),
    )
}

fn not_npy(path: &Path, what: String) -> NpyError {
    file_error(
        path,
        NpyErrorKind::NotNpy,
        format!("is not a .npy file: {what}"),
    )
}

/// `extra` bytes after data of type `ty` (`data_bytes` long); `found` bytes after the header.
fn trailing(path: &Path, ty: &str, data_bytes: usize, extra: u64, found: u64) -> NpyError {
    let file = shown(path);
    NpyError::new(
        path,
        NpyErrorKind::TrailingBytes,
        format!(
            "{file} has {extra} unexpected bytes after the data: header says {ty} = {data_bytes} bytes of data, found {found}"
        ),
    )
}

/// Reads and checks the preamble and header of a `.npy` stream of `total_len` bytes (when
/// known, the data's size is checked against it too), leaving `r` at the first data byte.
fn read_header<R: Read>(
    r: &mut R,
    total_len: Option<u64>,
    path: &Path,
    expect: Option<Expect>,
) -> Result<Header, NpyError> {
    let (text, len) = read_header_text(r, total_len, path)?;
    let dict = parse_header_dict(&text).map_err(|e| not_npy(path, format!("bad header: {e}")))?;
    let (dtype, shape, numel, data_bytes) = header_type(&dict, path, expect.map(|x| x.dtype))?;
    let ty = type_string(dtype, &shape);
    if let Some(x) = expect {
        // As the file stores it (a Fortran-order file has the same logical shape).
        if dtype != x.dtype || shape != x.shape {
            return Err(NpyError::new(
                path,
                NpyErrorKind::Mismatch,
                format!(
                    "input for source {} ({}): expected {}, found {ty}",
                    x.source,
                    shown(path),
                    type_string(x.dtype, x.shape)
                ),
            ));
        }
    }
    if let Some(total_len) = total_len {
        check_data_size(path, &ty, data_bytes, total_len.saturating_sub(len))?;
    }
    Ok(Header {
        dtype,
        shape,
        numel,
        data_bytes,
        fortran_order: dict.fortran_order,
        len,
    })
}

/// Reads the preamble (magic, version, header length) and the header text; returns the text
/// and the bytes read.
fn read_header_text<R: Read>(
    r: &mut R,
    total_len: Option<u64>,
    path: &Path,
) -> Result<(String, u64), NpyError> {
    let read_err = |e: io::Error| NpyError::io("cannot read", path, e);
    let mut pre = [0u8; 12];
    let n = read_up_to(r, &mut pre[..10]).map_err(read_err)?;
    let len_field_size = preamble_version(&pre, n, path)?;
    let prefix_len = 8 + len_field_size;
    let n = n + read_up_to(r, &mut pre[n..prefix_len]).map_err(read_err)?;
    if n < prefix_len {
        return Err(truncated(path, format!(
            "the file ends inside the header length field ({prefix_len} bytes of preamble expected, found {n})"
        )));
    }
    let header_len = if len_field_size == 2 {
        usize::from(u16::from_le_bytes([pre[8], pre[9]]))
    } else {
        u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize
    };
    if header_len > MAX_HEADER_LEN {
        return Err(not_npy(path, format!(
            "the header length field says {header_len} bytes, more than the {MAX_HEADER_LEN} accepted"
        )));
    }
    let available = total_len.map_or(u64::MAX, |t| t.saturating_sub(prefix_len as u64));
    if (header_len as u64) > available {
        return Err(truncated(
            path,
            format!("the header length field says {header_len} bytes of header, found {available}"),
        ));
    }
    let mut header_bytes = vec![0u8; header_len];
    let got = read_up_to(r, &mut header_bytes).map_err(read_err)?;
    if got < header_len {
        return Err(truncated(
            path,
            format!("the header length field says {header_len} bytes of header, found {got}"),
        ));
    }
    let text = String::from_utf8(header_bytes).map_err(|_| {
        not_npy(
            path,
            "bad header: expected ASCII/UTF-8 text, found other bytes".into(),
        )
    })?;
    Ok((text, (prefix_len + header_len) as u64))
}

/// Checks the magic and version among the first `n` bytes of `pre`; returns the size of the
/// header length field.
fn preamble_version(pre: &[u8], n: usize, path: &Path) -> Result<usize, NpyError> {
    if n < MAGIC.len() || pre[..6] != MAGIC[..] {
        return Err(not_npy(
            path,
            format!(
                "bad magic (expected the 6 bytes \"{}\", found \"{}\")",
                MAGIC.escape_ascii(),
                pre[..n.min(6)].escape_ascii()
            ),
        ));
    }
    if n < 8 {
        return Err(truncated(
            path,
            format!("the file ends inside the format version (file is {n} bytes)"),
        ));
    }
    let (major, minor) = (pre[6], pre[7]);
    match (major, minor) {
        (1, 0) => Ok(2),
        (2, 0) | (3, 0) => Ok(4),
        _ => Err(not_npy(
            path,
            format!("unsupported format version {major}.{minor} (supported: 1.0, 2.0, 3.0)"),
        )),
    }
}

/// The dtype, shape, element count and data bytes a header dictionary announces.
/// `<u2` is read as bf16 bits where a bf16 tensor is expected (`want`).
fn header_type(
    dict: &header::HeaderDict,
    path: &Path,
    want: Option<DType>,
) -> Result<(DType, Vec<usize>, usize, usize), NpyError> {
    let dtype = match &dict.descr {
        Descr::TypeStr(s) if s == "<u2" && want == Some(DType::BF16) => Some(DType::BF16),
        Descr::TypeStr(s) => SUPPORTED.iter().find(|(t, _)| t == s).map(|(_, d)| *d),
        Descr::Other(_) => None,
    };
    let Some(dtype) = dtype else {
        return Err(NpyError::new(
            path,
            NpyErrorKind::UnsupportedDtype,
            format!(
                "{} has unsupported dtype {}; supported: {}",
                shown(path),
                describe_descr(&dict.descr),
                supported_list()
            ),
        ));
    };
    let shape: Option<Vec<usize>> = dict
        .shape
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect();
    // Like numpy, require the product of the non-zero dimensions to be addressable
    // too, so that no stride computation downstream can overflow.
    let data_len = shape.as_deref().and_then(|s| {
        let nonzero: Vec<usize> = s.iter().copied().filter(|&d| d != 0).collect();
        checked_numel(&nonzero).and_then(|n| n.checked_mul(dtype.size_bytes()))?;
        checked_numel(s).and_then(|n| n.checked_mul(dtype.size_bytes()).map(|b| (n, b)))
    });
    let (Some(shape), Some((numel, data_bytes))) = (shape, data_len) else {
        let dims: Vec<String> = dict.shape.iter().map(|d| d.to_string()).collect();
        return Err(not_npy(
            path,
            format!(
                "bad header: shape ({}) has more elements than can be addressed",
                dims.join(", ")
            ),
        ));
    };
    Ok((dtype, shape, numel, data_bytes))
}

/// Checks that the `available` bytes after the header are exactly the `data_bytes` of type
/// `ty` it announces.
fn check_data_size(
    path: &Path,
    ty: &str,
    data_bytes: usize,
    available: u64,
) -> Result<(), NpyError> {
    if available < data_bytes as u64 {
        return Err(truncated(
            path,
            format!("header says {ty} = {data_bytes} bytes of data, found {available}"),
        ));
    }
    if available > data_bytes as u64 {
        let extra = available - data_bytes as u64;
        return Err(trailing(path, ty, data_bytes, extra, available));
    }
    Ok(())
}

/// Reads the data a checked header announces (to its end, for a `stream`).
fn read_body<R: Read>(mut r: R, h: &Header, stream: bool, path: &Path) -> Result<Tensor, NpyError> {
    let (dtype, numel, data_bytes) = (h.dtype, h.numel, h.data_bytes);
    let ty = type_string(dtype, &h.shape);

    let data = read_data(&mut r, dtype, numel).map_err(|e| data_error(e, path, &ty, data_bytes))?;
    if stream {
        // A stream: its end must follow the data.
        let mut extra = 0u64;
        let mut buf = [0u8; 4096];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => extra += n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(NpyError::io("cannot read", path, e)),
            }
        }
        if extra > 0 {
            return Err(trailing(
                path,
                &ty,
                data_bytes,
                extra,
                data_bytes as u64 + extra,
            ));
        }
    }
    let shape = h.shape.clone();
    let data = if h.fortran_order {
        crate::map_data!(data, v => fortran_to_c(v, &shape))
    } else {
        data
    };
    Ok(Tensor { shape, data })
}

enum DataError {
    /// The element buffer could not be allocated.
    Memory,
    /// The input ended after this many data bytes.
    Eof(u64),
    /// Element `k` of a bool array is this byte, not 0 or 1.
    Bool(usize, u8),
    Io(io::Error),
}

/// The message for a failed data read of `file` (type `ty`, `data_bytes` long).
fn data_error(e: DataError, path: &Path, ty: &str, data_bytes: usize) -> NpyError {
    let file = shown(path);
    match e {
        DataError::Memory => NpyError::new(
            path,
            NpyErrorKind::Io,
            format!("out of memory: cannot allocate {data_bytes} bytes to read {file} ({ty})"),
        ),
        DataError::Eof(got) => truncated(
            path,
            format!("header says {ty} = {data_bytes} bytes of data, found {got}"),
        ),
        DataError::Bool(at, b) => NpyError::new(
            path,
            NpyErrorKind::InvalidData,
            format!(
                "{file} has invalid {ty} data: element {at} is the byte {b}, not a bool (0 or 1)"
            ),
        ),
        DataError::Io(e) => NpyError::io("cannot read", path, e),
    }
}

/// An element type as `.npy` stores it (little-endian).
trait Elem: Sized + Copy {
    const N: usize;
    /// Decodes one element from `N` bytes; `Err(byte)`: not a value (a bool byte not 0 or 1).
    fn from_le(b: &[u8]) -> Result<Self, u8>;
    /// Appends the element's `N` little-endian bytes.
    fn to_le(self, out: &mut Vec<u8>);
}

macro_rules! le_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const N: usize = std::mem::size_of::<$t>();
            fn from_le(b: &[u8]) -> Result<Self, u8> {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                Ok(<$t>::from_le_bytes(a))
            }
            fn to_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_elem!(f32, f64, i32, i64, i8, u8, i16, u16, u32, u64);

macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const N: usize = 2;
            fn from_le(b: &[u8]) -> Result<Self, u8> {
                Ok(<$t>::from_bits(u16::from_le_bytes([b[0], b[1]])))
            }
            fn to_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_bits().to_le_bytes());
            }
        }
    )*};
}
half_elem!(crate::f16, crate::bf16);

impl Elem for bool {
    const N: usize = 1;
    fn from_le(b: &[u8]) -> Result<Self, u8> {
        match b[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(b),
        }
    }
    fn to_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
}

/// Reads `numel` little-endian elements into a buffer allocated fallibly (a chunk at a time,
/// so a short stream is found before it is all in memory).
fn read_data(r: &mut impl Read, dtype: DType, numel: usize) -> Result<Data, DataError> {
    fn fill<T: Elem>(r: &mut impl Read, numel: usize) -> Result<Vec<T>, DataError> {
        let mut v: Vec<T> = Vec::new();
        v.try_reserve_exact(numel).map_err(|_| DataError::Memory)?;
        let mut buf = vec![0u8; (1 << 16) * T::N];
        while v.len() < numel {
            let want = (numel - v.len()).min(1 << 16) * T::N;
            let got = read_up_to(r, &mut buf[..want]).map_err(DataError::Io)?;
            for c in buf[..got - got % T::N].chunks_exact(T::N) {
                let k = v.len();
                v.push(T::from_le(c).map_err(|b| DataError::Bool(k, b))?);
            }
            if got < want {
                return Err(DataError::Eof((v.len() * T::N + got % T::N) as u64));
            }
        }
        Ok(v)
    }
    Ok(crate::data_of!(dtype, T => fill::<T>(r, numel)?))
}

/// The end (in elements) of piece `(origin, size)` of the file of `h`; errors if a run is not
/// inside it.
fn check_runs(
    h: &Header,
    (origin, size): (usize, usize),
    runs: &[(i64, i64)],
    path: &Path,
) -> Result<i64, NpyError> {
    let end = origin.saturating_add(size).min(h.numel) as i64;
    if let Some(&(a, n)) = runs
        .iter()
        .find(|&&(a, n)| a < origin as i64 || n < 0 || a.saturating_add(n) > end)
    {
        let ty = type_string(h.dtype, &h.shape);
        return Err(NpyError::new(
            path,
            NpyErrorKind::InvalidArgument,
            format!("elements {a}..{} are outside {ty}", a.saturating_add(n)),
        ));
    }
    Ok(end)
}

/// Reads the C-order element `runs` of the data after header `h` from a seekable file into
/// `piece` (see [`read_piece_expecting`]), a 1-D tensor of zeros; returns it and the data
/// bytes read.
fn read_runs<R: Read + Seek>(
    r: &mut R,
    h: &Header,
    (origin, size): (usize, usize),
    runs: &[(i64, i64)],
    path: &Path,
) -> Result<(Tensor, u64), NpyError> {
    fn fill<T: Elem>(
        r: &mut (impl Read + Seek),
        start: u64,
        runs: &[(i64, i64)],
        dst: &mut [T],
        origin: usize,
    ) -> Result<u64, DataError> {
        let mut buf = vec![0u8; (1 << 16) * T::N];
        let mut read = 0u64;
        for &(first, len) in runs {
            let (first, len) = (first as usize, len as usize);
            r.seek(SeekFrom::Start(start + (first * T::N) as u64))
                .map_err(DataError::Io)?;
            let mut k = first;
            while k < first + len {
                let want = (first + len - k).min(1 << 16) * T::N;
                let got = read_up_to(r, &mut buf[..want]).map_err(DataError::Io)?;
                for c in buf[..got - got % T::N].chunks_exact(T::N) {
                    dst[k - origin] = T::from_le(c).map_err(|b| DataError::Bool(k, b))?;
                    k += 1;
                }
                read += got as u64;
                if got < want {
                    return Err(DataError::Eof(((k - first) * T::N) as u64));
                }
            }
        }
        Ok(read)
    }
    let ty = type_string(h.dtype, &h.shape);
    let end = check_runs(h, (origin, size), runs, path)?;
    let mut data = Data::zeros(h.dtype, end.saturating_sub(origin as i64).max(0) as usize);
    let got = crate::with_data!(&mut data, v => fill(r, h.len, runs, v, origin));
    let read = got.map_err(|e| data_error(e, path, &ty, h.data_bytes))?;
    Ok((
        Tensor {
            shape: vec![data.len()],
            data,
        },
        read,
    ))
}

fn supported_list() -> String {
    let items: Vec<String> = SUPPORTED
        .iter()
        .map(|(s, d)| format!("'{s}' ({d})"))
        .collect();
    items.join(", ")
}

/// Describes a dtype found in a header, e.g. `'>f4' (big-endian float32)`.
fn describe_descr(descr: &Descr) -> String {
    let s = match descr {
        Descr::Other(raw) => return format!("{raw} (a structured dtype)"),
        Descr::TypeStr(s) => s,
    };
    let mut chars = s.chars();
    let (order, rest) = match chars.next() {
        Some('>') => ("big-endian ", chars.as_str()),
        Some('<') => ("little-endian ", chars.as_str()),
        Some('|') | Some('=') => ("", chars.as_str()),
        _ => ("", s.as_str()),
    };
    let mut rc = rest.chars();
    let kind = match rc.next() {
        Some('f') => "float",
        Some('i') => "int",
        Some('u') => "uint",
        Some('b') => "bool",
        Some('c') => "complex",
        Some('O') => return format!("'{s}' (Python objects)"),
        Some('S') | Some('a') => return format!("'{s}' (byte strings)"),
        Some('U') => return format!("'{s}' (unicode strings)"),
        Some('V') => return format!("'{s}' (raw void data)"),
        Some('M') | Some('m') => return format!("'{s}' (datetime)"),
        _ => return format!("'{s}'"),
    };
    match rc.as_str().parse::<u32>() {
        Ok(bytes) if bytes <= 64 => {
            let bits = if kind == "bool" {
                String::new()
            } else {
                (bytes * 8).to_string()
            };
            format!("'{s}' ({order}{kind}{bits})")
        }
        _ => format!("'{s}'"),
    }
}

/// Reorders Fortran-order (first axis fastest) elements into C order.
fn fortran_to_c<T: Copy>(src: Vec<T>, shape: &[usize]) -> Vec<T> {
    let nd = shape.len();
    if nd < 2 || src.is_empty() {
        return src;
    }
    let mut c_strides = vec![1usize; nd];
    for i in (0..nd - 1).rev() {
        c_strides[i] = c_strides[i + 1] * shape[i + 1];
    }
    let mut dst = src.clone();
    let mut idx = vec![0usize; nd];
    let mut off = 0usize;
    for &v in &src {
        dst[off] = v;
        for ax in 0..nd {
            idx[ax] += 1;
            off += c_strides[ax];
            if idx[ax] < shape[ax] {
                break;
            }
            off -= c_strides[ax] * shape[ax];
            idx[ax] = 0;
        }
    }
    dst
}

/// The header numpy's `np.save` writes for this type, byte for byte: the dict text
/// (keys sorted, spare room for the shape to grow), padded with spaces and a newline
/// so the data starts at a multiple of 64 bytes; version 1.0 unless it needs 2.0.
pub(crate) fn header_bytes(dtype: DType, shape: &[usize]) -> Vec<u8> {
    let descr = written_descr(dtype);
    let shape_repr = match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", dims.join(", "))
        }
    };
    let mut text =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    if let Some(first) = shape.first() {
        // numpy's GROWTH_AXIS_MAX_DIGITS = 21.
        let pad = 21usize.saturating_sub(first.to_string().len());
        text.push_str(&" ".repeat(pad));
    }
    let wrap = |len_field: usize| {
        let hlen = text.len() + 1;
        let padlen = 64 - (6 + 2 + len_field + hlen) % 64;
        (hlen + padlen, padlen)
    };
    let (version, len_field) = if wrap(2).0 <= usize::from(u16::MAX) {
        (1u8, 2)
    } else {
        (2u8, 4)
    };
    let (total, padlen) = wrap(len_field);
    let mut out = Vec::with_capacity(8 + len_field + total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if len_field == 2 {
        out.extend_from_slice(&(total as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(total as u32).to_le_bytes());
    }
    out.extend_from_slice(text.as_bytes());
    out.resize(out.len() + padlen, b' ');
    out.push(b'\n');
    out
}

/// Writes `t` as `.npy` (C order, little-endian) to `w`, exactly as `np.save` would.
fn encode<W: Write + ?Sized>(w: &mut W, t: &Tensor) -> io::Result<()> {
    w.write_all(&header_bytes(t.dtype(), &t.shape))?;
    fn chunks<T: Elem, W: Write + ?Sized>(w: &mut W, v: &[T]) -> io::Result<()> {
        let mut buf = Vec::with_capacity((1 << 16) * T::N);
        for c in v.chunks(1 << 16) {
            buf.clear();
            c.iter().for_each(|&x| x.to_le(&mut buf));
            w.write_all(&buf)?;
        }
        Ok(())
    }
    crate::with_data!(&t.data, v => chunks(w, v))
}

/// Why the tensor's data length does not match its shape (the fields are public), if it does not.
fn inconsistency(t: &Tensor) -> Option<String> {
    let n = checked_numel(&t.shape);
    (n != Some(t.data.len())).then(|| {
        format!(
            "tensor of type {} should have {} elements, but its data has {}",
            t.shape_string(),
            n.map_or("too many".to_string(), |n| n.to_string()),
            t.data.len()
        )
    })
}

fn check_consistent(path: &Path, t: &Tensor) -> Result<(), NpyError> {
    match inconsistency(t) {
        Some(why) => Err(NpyError::new(
            path,
            NpyErrorKind::InvalidArgument,
            format!("cannot write {}: {why}", shown(path)),
        )),
        None => Ok(()),
    }
}

/// Writes `t` to `path` as a standard `.npy` file: version 1.0, little-endian, C order,
/// byte-identical to what numpy's `np.save` writes for the same array.
pub fn write(path: &Path, t: &Tensor) -> Result<(), NpyError> {
    check_consistent(path, t)?;
    let file = File::create(path).map_err(|e| NpyError::io("cannot write", path, e))?;
    let mut w = BufWriter::new(file);
    encode(&mut w, t)
        .and_then(|()| w.flush())
        .map_err(|e| NpyError::io("cannot write", path, e))
}

/// Writes `t` as `.npy` to `w` ([`write`] without the file): how outputs stage a tensor. An
/// inconsistent tensor is an `InvalidInput` error.
pub fn write_into(w: &mut dyn Write, t: &Tensor) -> io::Result<()> {
    if let Some(why) = inconsistency(t) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    }
    encode(w, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_reorder() {
        // 2x3 matrix [[0,1,2],[3,4,5]] stored column-major is 0,3,1,4,2,5.
        assert_eq!(
            fortran_to_c(vec![0, 3, 1, 4, 2, 5], &[2, 3]),
            vec![0, 1, 2, 3, 4, 5]
        );
        // 2x3x2: C index = 6i + 2j + k; Fortran position = i + 2j + 6k.
        let mut f = vec![0; 12];
        for i in 0..2 {
            for j in 0..3 {
                for k in 0..2 {
                    f[i + 2 * j + 6 * k] = 6 * i + 2 * j + k;
                }
            }
        }
        assert_eq!(fortran_to_c(f, &[2, 3, 2]), (0..12).collect::<Vec<_>>());
    }

    #[test]
    fn window_reads_only_its_runs() {
        let path = std::env::temp_dir().join(format!("tapc-npy-window-{}.npy", std::process::id()));
        let t = Tensor::new(vec![3, 4], Data::I64((0..12).collect())).unwrap();
        write(&path, &t).unwrap();
        let (got, bytes) =
            read_window_expecting(&path, "x", DType::I64, &[3, 4], &[(1, 2), (8, 3)]).unwrap();
        assert_eq!(
            got.data,
            Data::I64(vec![0, 1, 2, 0, 0, 0, 0, 0, 8, 9, 10, 0])
        );
        assert_eq!(bytes, 5 * 8);
        // The header is checked before any data, as for a whole read.
        let e = read_window_expecting(&path, "x", DType::F32, &[3, 4], &[(0, 1)]).unwrap_err();
        assert_eq!(e.kind(), NpyErrorKind::Mismatch);
        let e = read_window_expecting(&path, "x", DType::I64, &[3, 4], &[(10, 3)]).unwrap_err();
        assert!(e.message().contains("outside"), "{e}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn describes_dtypes() {
        let d = |s: &str| describe_descr(&Descr::TypeStr(s.into()));
        assert_eq!(d(">f4"), "'>f4' (big-endian float32)");
        assert_eq!(d("<f2"), "'<f2' (little-endian float16)");
        assert_eq!(d("|u1"), "'|u1' (uint8)");
        assert_eq!(d("<c16"), "'<c16' (little-endian complex128)");
        assert_eq!(d("|O"), "'|O' (Python objects)");
        assert_eq!(d("zz"), "'zz'");
    }

    #[test]
    fn io_message_drops_os_error_code() {
        let e = io::Error::from_raw_os_error(2);
        assert_eq!(io_message(&e), "No such file or directory");
    }
}
