//! Dense, row-major (C-order) tensors: the values `tapc` programs consume and
//! produce at run time, and the element types ([`DType`]) they may hold.

use std::fmt;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    I32,
    I64,
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 5] = [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool];

    /// The name used in TEG source and in messages: `"f32"`, `"f64"`, `"i32"`, `"i64"`, `"bool"`.
    pub fn name(&self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    /// Inverse of [`DType::name`].
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Size of one element in bytes (as stored in a `.npy` file; `bool` is one byte).
    pub fn size_bytes(&self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// `true` for `f32` and `f64`.
    pub fn is_float(&self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// `true` for `i32` and `i64`.
    pub fn is_int(&self) -> bool {
        matches!(self, DType::I32 | DType::I64)
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
}

impl Data {
    /// A buffer of `len` zeros (`false` for `bool`).
    pub fn zeros(dtype: DType, len: usize) -> Data {
        match dtype {
            DType::F32 => Data::F32(vec![0.0; len]),
            DType::F64 => Data::F64(vec![0.0; len]),
            DType::I32 => Data::I32(vec![0; len]),
            DType::I64 => Data::I64(vec![0; len]),
            DType::Bool => Data::Bool(vec![false; len]),
        }
    }

    /// The element type of this buffer.
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
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
        assert_eq!(DType::from_name("f16"), None);
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
