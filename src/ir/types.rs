//! Concrete tensor types and scalar literals.

use std::fmt;
pub use tapc_runtime::DType;

/// A dtype and a concrete shape, e.g. `f32[64, 784]`; `f32[]` is a scalar.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Vec<i64>,
}

impl TensorType {
    pub fn new(dtype: DType, shape: Vec<i64>) -> TensorType {
        TensorType { dtype, shape }
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    pub fn elements(&self) -> i64 {
        self.shape.iter().product()
    }
    pub fn bytes(&self) -> i64 {
        self.elements() * self.dtype.size_bytes() as i64
    }
    pub fn with_shape(&self, shape: Vec<i64>) -> TensorType {
        TensorType {
            dtype: self.dtype,
            shape,
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// The element count of `shape`, if it fits in i64 (lowering checks written shapes with it,
/// the verifier inferred ones).
pub fn checked_elements(shape: &[i64]) -> Option<i64> {
    shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d))
}

/// A scalar constant in a graph attribute (`full 2.5`, `pad ... constant 0`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Int(v) => write!(f, "{v}"),
            Literal::Float(v) => f.write_str(&float_text(*v)),
            Literal::Bool(v) => write!(f, "{v}"),
        }
    }
}

/// Shortest text that reads back as the same f64 and still lexes as a float (`1.0`, `2.5e-7`).
pub fn float_text(v: f64) -> String {
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') || !v.is_finite() {
        s
    } else {
        format!("{s}.0")
    }
}
