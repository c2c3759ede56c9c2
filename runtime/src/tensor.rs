//! Dense, row-major (C-order) tensors: the values `tapc` programs consume and
//! produce at run time, and the element types ([`DType`]) they may hold.

use half::{bf16, f16};
use std::fmt;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    I32,
    I64,
    Bool,
    F16,
    BF16,
    I8,
    U8,
    I16,
    U16,
    U32,
    U64,
}

impl DType {
    /// Every dtype, in declaration order (compiled schedules encode a dtype as its position
    /// here, so new dtypes are appended).
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::Bool,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The name used in TEG source and in messages: `"f32"`, `"bf16"`, `"u8"`, `"bool"`, ...
    pub fn name(&self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }

    /// Inverse of [`DType::name`].
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Size of one element in bytes (as stored in a `.npy` file; `bool` is one byte).
    pub fn size_bytes(&self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// `true` for the floating-point dtypes `f16`, `bf16`, `f32` and `f64`.
    pub fn is_float(&self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// `true` for the 16-bit floats `f16` and `bf16` (stored in 2 bytes, computed in f32).
    pub fn is_half(&self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// `true` for every integer dtype, signed or unsigned (not `bool`).
    pub fn is_int(&self) -> bool {
        self.is_signed_int() || self.is_unsigned()
    }

    /// `true` for `i8`, `i16`, `i32` and `i64`.
    pub fn is_signed_int(&self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// `true` for `u8`, `u16`, `u32` and `u64`.
    pub fn is_unsigned(&self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// The width in bits of an integer dtype (8 for `bool`, which is stored as one byte).
    pub fn bits(&self) -> u32 {
        self.size_bytes() as u32 * 8
    }

    /// The least and greatest value of an integer dtype, as i128 (`None` for floats and bool).
    pub fn int_range(&self) -> Option<(i128, i128)> {
        let b = self.bits();
        if self.is_signed_int() {
            Some((-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1))
        } else if self.is_unsigned() {
            Some((0, (1i128 << b) - 1))
        } else {
            None
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The flat element buffer of a tensor, one variant per [`DType`].
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

/// Calls `$body` with `$v` bound to the vector inside any [`Data`] variant.
#[macro_export]
macro_rules! with_data {
    ($d:expr, $v:ident => $body:expr) => {
        match $d {
            $crate::Data::F32($v) => $body,
            $crate::Data::F64($v) => $body,
            $crate::Data::I32($v) => $body,
            $crate::Data::I64($v) => $body,
            $crate::Data::Bool($v) => $body,
            $crate::Data::F16($v) => $body,
            $crate::Data::BF16($v) => $body,
            $crate::Data::I8($v) => $body,
            $crate::Data::U8($v) => $body,
            $crate::Data::I16($v) => $body,
            $crate::Data::U16($v) => $body,
            $crate::Data::U32($v) => $body,
            $crate::Data::U64($v) => $body,
        }
    };
}

/// Maps the vector inside any [`Data`] variant to a vector of the same element type with
/// `$body`, which sees it as `$v`.
#[macro_export]
macro_rules! map_data {
    ($d:expr, $v:ident => $body:expr) => {
        match $d {
            $crate::Data::F32($v) => $crate::Data::F32($body),
            $crate::Data::F64($v) => $crate::Data::F64($body),
            $crate::Data::I32($v) => $crate::Data::I32($body),
            $crate::Data::I64($v) => $crate::Data::I64($body),
            $crate::Data::Bool($v) => $crate::Data::Bool($body),
            $crate::Data::F16($v) => $crate::Data::F16($body),
            $crate::Data::BF16($v) => $crate::Data::BF16($body),
            $crate::Data::I8($v) => $crate::Data::I8($body),
            $crate::Data::U8($v) => $crate::Data::U8($body),
            $crate::Data::I16($v) => $crate::Data::I16($body),
            $crate::Data::U16($v) => $crate::Data::U16($body),
            $crate::Data::U32($v) => $crate::Data::U32($body),
            $crate::Data::U64($v) => $crate::Data::U64($body),
        }
    };
}

/// Builds the [`Data`] variant of `$dtype` from `$make`, a generic expression evaluated at the
/// variant's element type (`T` in `$make` names it).
#[macro_export]
macro_rules! data_of {
    ($dtype:expr, $T:ident => $make:expr) => {
        match $dtype {
            $crate::DType::F32 => $crate::Data::F32({
                type $T = f32;
                $make
            }),
            $crate::DType::F64 => $crate::Data::F64({
                type $T = f64;
                $make
            }),
            $crate::DType::I32 => $crate::Data::I32({
                type $T = i32;
                $make
            }),
            $crate::DType::I64 => $crate::Data::I64({
                type $T = i64;
                $make
            }),
            $crate::DType::Bool => $crate::Data::Bool({
                type $T = bool;
                $make
            }),
            $crate::DType::F16 => $crate::Data::F16({
                type $T = $crate::f16;
                $make
            }),
            $crate::DType::BF16 => $crate::Data::BF16({
                type $T = $crate::bf16;
                $make
            }),
            $crate::DType::I8 => $crate::Data::I8({
                type $T = i8;
                $make
            }),
            $crate::DType::U8 => $crate::Data::U8({
                type $T = u8;
                $make
            }),
            $crate::DType::I16 => $crate::Data::I16({
                type $T = i16;
                $make
            }),
            $crate::DType::U16 => $crate::Data::U16({
                type $T = u16;
                $make
            }),
            $crate::DType::U32 => $crate::Data::U32({
                type $T = u32;
                $make
            }),
            $crate::DType::U64 => $crate::Data::U64({
                type $T = u64;
                $make
            }),
        }
    };
}

impl Data {
    /// A buffer of `len` zeros (`false` for `bool`).
    pub fn zeros(dtype: DType, len: usize) -> Data {
        data_of!(dtype, T => vec![T::default(); len])
    }

    /// The element type of this buffer.
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::Bool(_) => DType::Bool,
            Data::F16(_) => DType::F16,
            Data::BF16(_) => DType::BF16,
            Data::I8(_) => DType::I8,
            Data::U8(_) => DType::U8,
            Data::I16(_) => DType::I16,
            Data::U16(_) => DType::U16,
            Data::U32(_) => DType::U32,
            Data::U64(_) => DType::U64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    /// `true` if there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Number of elements of a tensor of the given shape, or `None` on overflow.
/// The empty shape (a 0-d scalar) has one element.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Formats a type like `f32[64, 784]` (a 0-d scalar is `f32[]`).
pub fn type_string(dtype: DType, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", dtype.name(), dims.join(", "))
}

/// A dense tensor: `shape` plus a flat buffer in C order (row-major, last axis fastest).
///
/// The fields are public for convenience; [`Tensor::new`] is the checked constructor
/// guaranteeing `data.len()` equals the product of `shape`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    /// Builds a tensor, checking that the number of elements matches the shape.
    pub fn new(shape: impl Into<Vec<usize>>, data: Data) -> Result<Tensor, String> {
        let shape = shape.into();
        match checked_numel(&shape) {
            None => Err(format!(
                "tensor shape {} has too many elements to address",
                type_string(data.dtype(), &shape)
            )),
            Some(n) if n != data.len() => Err(format!(
                "tensor shape {} needs {} elements, but {} were given",
                type_string(data.dtype(), &shape),
                n,
                data.len()
            )),
            Some(_) => Ok(Tensor { shape, data }),
        }
    }

    /// A tensor of zeros (`false` for `bool`).
    ///
    /// # Panics
    /// If the number of elements overflows `usize`.
    pub fn zeros(dtype: DType, shape: impl Into<Vec<usize>>) -> Tensor {
        let shape = shape.into();
        let n = checked_numel(&shape).expect("Tensor::zeros: element count overflows usize");
        Tensor {
            shape,
            data: Data::zeros(dtype, n),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Number of elements (product of the shape; 1 for a 0-d scalar).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// `true` if the tensor has no elements (some dimension is zero).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The type as written in TEG source and messages, e.g. `f32[64, 784]`.
    pub fn shape_string(&self) -> String {
        type_string(self.dtype(), &self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(d.to_string(), d.name());
        }
        assert_eq!(DType::from_name("f8"), None);
        assert_eq!(DType::F64.size_bytes(), 8);
        assert!(DType::F32.is_float() && !DType::F32.is_int());
        assert!(DType::I64.is_int() && !DType::Bool.is_int() && !DType::Bool.is_float());
    }

    #[test]
    fn new_checks_len() {
        let t = Tensor::new(vec![2, 3], Data::F32(vec![0.0; 6])).unwrap();
        assert_eq!(t.shape_string(), "f32[2, 3]");
        assert_eq!(t.len(), 6);
        let err = Tensor::new(vec![2, 3], Data::I64(vec![0; 5])).unwrap_err();
        assert_eq!(
            err,
            "tensor shape i64[2, 3] needs 6 elements, but 5 were given"
        );
        assert!(Tensor::new(vec![usize::MAX, 2], Data::Bool(vec![])).is_err());
    }

    #[test]
    fn zeros_and_scalars() {
        let s = Tensor::zeros(DType::Bool, Vec::new());
        assert_eq!(s.shape_string(), "bool[]");
        assert_eq!(s.len(), 1);
        let e = Tensor::zeros(DType::I32, [3, 0]);
        assert!(e.is_empty());
        assert_eq!(e.shape_string(), "i32[3, 0]");
    }
}
