//! Element conversions the importer needs for every dtype: little-endian bytes (ONNX
//! `raw_data` and external data) to values, and values to and from i64/f64 for folding shape
//! glue at import time.

use tapc_runtime::{bf16, data_of, f16, with_data, DType, Data};

/// One element type of [`Data`].
pub trait Elem: Copy {
    /// Bytes per element in ONNX's little-endian encoding.
    const BYTES: usize;
    fn from_le(b: &[u8]) -> Self;
    fn to_f64(self) -> f64;
    fn to_i64(self) -> i64;
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;
}

macro_rules! prim_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            fn from_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("chunk of the element size"))
            }
            fn to_f64(self) -> f64 { self as f64 }
            fn to_i64(self) -> i64 { self as i64 }
            fn from_f64(v: f64) -> Self { v as $t }
            fn from_i64(v: i64) -> Self { v as $t }
        }
    )*};
}
prim_elem!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const BYTES: usize = 2;
            fn from_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("chunk of the element size"))
            }
            fn to_f64(self) -> f64 { self.to_f64() }
            fn to_i64(self) -> i64 { self.to_f64() as i64 }
            fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            fn from_i64(v: i64) -> Self { <$t>::from_f64(v as f64) }
        }
    )*};
}
half_elem!(f16, bf16);

impl Elem for bool {
    const BYTES: usize = 1;
    fn from_le(b: &[u8]) -> Self {
        b[0] != 0
    }
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
    fn to_i64(self) -> i64 {
        i64::from(self)
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}

/// `n` elements of `dtype` decoded from little-endian `bytes` (`None` if the length is not
/// `n` elements).
pub fn from_le_bytes(dtype: DType, bytes: &[u8], n: usize) -> Option<Data> {
    fn decode<T: Elem>(bytes: &[u8], n: usize) -> Option<Vec<T>> {
        (bytes.len() == n.checked_mul(T::BYTES)?)
            .then(|| bytes.chunks_exact(T::BYTES).map(T::from_le).collect())
    }
    Some(data_of!(dtype, T => decode::<T>(bytes, n)?))
}

/// The elements as i64 (floats truncated toward zero, as a cast does).
pub fn to_i64s(d: &Data) -> Vec<i64> {
    with_data!(d, v => v.iter().map(|x| x.to_i64()).collect())
}

/// The elements as f64.
pub fn to_f64s(d: &Data) -> Vec<f64> {
    with_data!(d, v => v.iter().map(|x| x.to_f64()).collect())
}

/// `d` converted to `dtype` (ints through i64, so an i64 shape survives; floats through f64).
pub fn cast(d: &Data, dtype: DType) -> Data {
    if d.dtype().is_float() || dtype.is_float() {
        let v = to_f64s(d);
        data_of!(dtype, T => v.iter().map(|&x| T::from_f64(x)).collect())
    } else {
        let v = to_i64s(d);
        data_of!(dtype, T => v.iter().map(|&x| T::from_i64(x)).collect())
    }
}

/// A buffer of `dtype` from i64 values.
pub fn from_i64s(dtype: DType, v: &[i64]) -> Data {
    data_of!(dtype, T => v.iter().map(|&x| T::from_i64(x)).collect())
}

/// A buffer of `dtype` from f64 values.
pub fn from_f64s(dtype: DType, v: &[f64]) -> Data {
    data_of!(dtype, T => v.iter().map(|&x| T::from_f64(x)).collect())
}

/// The elements `idx` of `d`, in that order (a gather of whole elements).
pub fn pick(d: &Data, idx: &[usize]) -> Data {
    tapc_runtime::map_data!(d, v => idx.iter().map(|&i| v[i]).collect())
}

/// `a`'s elements followed by `b`'s (converted to `a`'s dtype).
pub fn join(a: &Data, b: &Data) -> Data {
    if a.dtype().is_float() {
        let v: Vec<f64> = to_f64s(a).into_iter().chain(to_f64s(b)).collect();
        from_f64s(a.dtype(), &v)
    } else {
        let v: Vec<i64> = to_i64s(a).into_iter().chain(to_i64s(b)).collect();
        from_i64s(a.dtype(), &v)
    }
}

/// `ConstantOfShape`: `shape` filled with the one element of `value` (an f32 zero without
/// one); `None` when `value` holds another number of elements.
pub fn filled(
    value: Option<&tapc_runtime::Tensor>,
    shape: Vec<usize>,
) -> Option<tapc_runtime::Tensor> {
    let numel: usize = shape.iter().product();
    let data = match value {
        Some(t) if t.data.len() != 1 => return None,
        Some(t) => pick(&t.data, &vec![0; numel]),
        None => Data::F32(vec![0.0; numel]),
    };
    Some(tapc_runtime::Tensor { shape, data })
}
