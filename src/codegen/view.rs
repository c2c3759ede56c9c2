//! How a kernel sees a tensor: a strided view of a buffer (dtype, shape, element strides)
//! with an optional constant pad folded into its loads. Shared by the scheduler, which
//! computes views, and the kernel and copy generators, which read and write through them.

use crate::ir::instance::Scalar;
use crate::ir::DType;

/// The layout of a tensor a kernel reads or writes (its base pointer is the task's argument).
#[derive(Clone, Debug, PartialEq)]
pub struct SView {
    pub dtype: DType,
    pub shape: Vec<i64>,
    /// In elements.
    pub strides: Vec<i64>,
    /// A constant `pad` folded into the reader's loads: `strides` are the unpadded tensor's.
    pub pad: Option<Padding>,
}

/// A constant pad seen by a kernel: padded coordinate `c` reads element `c - lo` of the
/// unpadded tensor (shape `inner`) when in bounds, `fill` otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Padding {
    pub lo: Vec<i64>,
    pub inner: Vec<i64>,
    pub fill: Scalar,
}

impl Padding {
    /// The box of the inner tensor that the padded box `bx` reads: padded index `i` is inner
    /// index `i - lo`, and the fill outside the inner tensor reads nothing.
    pub fn inner_box(&self, bx: &[(i64, i64)]) -> Vec<(i64, i64)> {
        bx.iter()
            .zip(self.lo.iter().zip(&self.inner))
            .map(|(&(l, h), (&lo, &n))| ((l - lo).clamp(0, n), (h - lo).clamp(0, n)))
            .collect()
    }

    /// The box of the inner tensor that a padded view of `shape` can read at all (a slice of
    /// a pad reads only part of it: its shard's rows and halos).
    pub fn readable(&self, shape: &[i64]) -> Vec<(i64, i64)> {
        let whole: Vec<(i64, i64)> = shape.iter().map(|&n| (0, n)).collect();
        self.inner_box(&whole)
    }
}

/// Row-major strides of `shape`.
pub fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1].max(1);
    }
    s
}
