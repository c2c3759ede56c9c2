//! Typed storage for the interpreter's values: a tensor is held in its dtype (4 bytes per f32,
//! 1 per bool), as the runtime's [`Data`], and read and written one [`Scalar`] at a time.
//! Buffers are reserved fallibly, so a value too big for memory is an error, not an abort.
//! A [`Value`] is a typed tensor held this way; [`for_each_coord`] walks its coordinates.

use crate::ir::instance::Scalar;
use crate::ir::{DType, TensorType};
use tapc_runtime::Data;

/// A buffer that could not be allocated, and how many bytes it needed.
#[derive(Debug)]
pub struct NoMemory {
    pub bytes: u128,
}

fn reserve<T>(len: usize) -> Result<Vec<T>, NoMemory> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| NoMemory {
        bytes: len as u128 * std::mem::size_of::<T>() as u128,
    })?;
    Ok(v)
}

/// An empty buffer of `dtype` with room for `len` elements.
pub fn with_capacity(dtype: DType, len: i64) -> Result<Data, NoMemory> {
    let len = usize::try_from(len.max(0)).map_err(|_| NoMemory {
        bytes: len as u128 * dtype.size_bytes() as u128,
    })?;
    Ok(tapc_runtime::data_of!(dtype, T => reserve::<T>(len)?))
}

/// A copy of `d`, allocated fallibly.
pub fn try_clone(d: &Data) -> Result<Data, NoMemory> {
    fn copy<T: Copy>(v: &[T]) -> Result<Vec<T>, NoMemory> {
        let mut out = reserve(v.len())?;
        out.extend_from_slice(v);
        Ok(out)
    }
    Ok(tapc_runtime::map_data!(d, v => copy(v)?))
}

/// Appends `s`, converted to the buffer's dtype. Values are already rounded to their dtype
/// (f32, f16 and bf16 after every operation, narrow integers wrapped; a u64 is held as its
/// bits), so this loses nothing.
pub fn push(d: &mut Data, s: Scalar) {
    match d {
        Data::F32(v) => v.push(s.as_f64() as f32),
        Data::F64(v) => v.push(s.as_f64()),
        Data::F16(v) => v.push(half::f16::from_f64(s.as_f64())),
        Data::BF16(v) => v.push(half::bf16::from_f64(s.as_f64())),
        Data::I8(v) => v.push(s.as_i64() as i8),
        Data::U8(v) => v.push(s.as_i64() as u8),
        Data::I16(v) => v.push(s.as_i64() as i16),
        Data::U16(v) => v.push(s.as_i64() as u16),
        Data::I32(v) => v.push(s.as_i64() as i32),
        Data::U32(v) => v.push(s.as_i64() as u32),
        Data::I64(v) => v.push(s.as_i64()),
        Data::U64(v) => v.push(s.as_i64() as u64),
        Data::Bool(v) => v.push(s.as_bool()),
    }
}

/// Element `i` as a scalar (floats widened to f64, ints to i64).
pub fn get(d: &Data, i: usize) -> Scalar {
    match d {
        Data::F32(v) => Scalar::F(v[i] as f64),
        Data::F64(v) => Scalar::F(v[i]),
        Data::F16(v) => Scalar::F(v[i].to_f64()),
        Data::BF16(v) => Scalar::F(v[i].to_f64()),
        Data::I8(v) => Scalar::I(v[i] as i64),
        Data::U8(v) => Scalar::I(v[i] as i64),
        Data::I16(v) => Scalar::I(v[i] as i64),
        Data::U16(v) => Scalar::I(v[i] as i64),
        Data::I32(v) => Scalar::I(v[i] as i64),
        Data::U32(v) => Scalar::I(v[i] as i64),
        Data::I64(v) => Scalar::I(v[i]),
        Data::U64(v) => Scalar::I(v[i] as i64),
        Data::Bool(v) => Scalar::B(v[i]),
    }
}

/// A materialized value: type plus elements in row-major order, stored in the value's dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub ty: TensorType,
    pub data: Data,
}

impl Value {
    /// Element `i` as a scalar.
    pub fn get(&self, i: usize) -> Scalar {
        get(&self.data, i)
    }
}

/// Row-major coordinates of every element of `shape`, in order.
pub fn for_each_coord(shape: &[i64], mut f: impl FnMut(&[i64])) {
    if shape.iter().any(|&d| d <= 0) {
        return;
    }
    let mut c = vec![0i64; shape.len()];
    loop {
        f(&c);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            c[d] += 1;
            if c[d] < shape[d] {
                break;
            }
            c[d] = 0;
        }
    }
}
