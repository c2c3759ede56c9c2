//! Runtime support for `tapc`, the Tapestry Expression Graph compiler: the dense
//! [`Tensor`] type programs compute on, `.npy` file I/O ([`npy`]) for their source inputs
//! and sink outputs, the compiled schedule ([`plan`]), the multithreaded executor that runs
//! it ([`exec`]), failure reports that name the task ([`fault`]), outputs written all or
//! nothing ([`output`], under the path policy of [`paths`], with [`signals`] cleaning up on
//! SIGINT/SIGTERM), and compiled programs
//! themselves: their command line and source binding ([`cli`]), the steps of one run
//! ([`program`]), their C entry point ([`entry`]) and the distributed run ([`mpi`]).
//!
//! Built as an rlib (linked into `tapc` for `tapc run`) and as a staticlib (linked into the
//! programs `tapc FILE -o OUT` produces).

pub mod cli;
pub mod entry;
pub mod exec;
pub mod fault;
pub mod memory;
pub mod mpi;
pub mod npy;
pub mod output;
pub mod paths;
pub mod plan;
pub mod program;
pub mod signals;
pub mod steps;
pub mod tensor;

/// Which build of the runtime this is (`tapc` links programs with the staticlib of its own build).
pub mod build {
    include!(concat!(env!("OUT_DIR"), "/build_id.rs"));
}

pub use half::{bf16, f16};
pub use npy::{NpyError, NpyErrorKind};
pub use tensor::{checked_numel, type_string, DType, Data, Tensor};
