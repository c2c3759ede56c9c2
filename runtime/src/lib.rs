//! Runtime support for `tapc`, the Tapestry Expression Graph compiler: the dense
//! [`Tensor`] type programs compute on, and `.npy` file I/O ([`npy`]) for their
//! source inputs and sink outputs.

pub mod npy;
pub mod tensor;

pub use npy::{NpyError, NpyErrorKind};
pub use tensor::{checked_numel, type_string, DType, Data, Tensor};
