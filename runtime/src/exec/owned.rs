//! Sinks handed over with their buffers: a run's result that is the whole of a C-order
//! buffer of its own leaves the executor as that buffer ([`OwnedBuffer`]), with no copy, for an
//! embedder to wrap (the Python package makes it a numpy array's memory). Any other sink (a
//! strided view, several sinks in one buffer, a view of a source) is copied out in C order.

use super::{execute_core, sink_views, AlignedBuf, Input, KernelFn, Options, Report};
use crate::plan::{Init, Plan, Sink};
use crate::tensor::{checked_numel, Tensor};

/// A buffer of a finished run, now the caller's: freed (or kept for reuse, as the executor
/// would) when dropped, on any thread.
pub struct OwnedBuffer {
    buf: AlignedBuf,
    /// Where the sink's element 0 is, in bytes from the start.
    offset: usize,
    /// The sink's bytes.
    len: usize,
}

impl OwnedBuffer {
    /// The sink's first byte (64-byte aligned buffer plus the sink's offset).
    pub fn as_ptr(&self) -> *mut u8 {
        // SAFETY: the offset is inside the allocation (validated against the plan).
        unsafe { self.buf.ptr.add(self.offset) }
    }

    /// The sink's size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the sink has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

// SAFETY: the run is over: nothing else refers to the buffer.
unsafe impl Sync for OwnedBuffer {}

/// One sink of [`execute_owned`], in C order.
pub enum SinkData {
    /// The buffer the program wrote it into.
    Buffer(OwnedBuffer),
    /// A copy (a strided view, a shared or source buffer, or no elements).
    Copy(Tensor),
}

/// Whether sink `s` is a C-order block of its buffer (strides of dims longer than 1 are
/// row-major).
fn c_order(s: &Sink) -> bool {
    let mut step = 1i64;
    for (&d, &stride) in s.dims().iter().zip(&s.view.strides).rev() {
        if d > 1 && stride != step {
            return false;
        }
        step *= d as i64;
    }
    s.view.offset >= 0
}

/// The sinks whose buffers can be handed over: C-order, not empty, the only sink of a buffer
/// the run allocated (not a source's, which may be the caller's memory).
fn takeable(plan: &Plan) -> Vec<bool> {
    let uses = |b: u32| plan.sinks.iter().filter(|s| s.view.buffer == b).count();
    (plan.sinks.iter())
        .map(|s| {
            let buffer = &plan.buffers[s.view.buffer as usize];
            c_order(s)
                && checked_numel(&s.shape).is_some_and(|n| n > 0)
                && !matches!(buffer.init, Init::Source(_))
                && uses(s.view.buffer) == 1
        })
        .collect()
}

/// Runs `plan` like [`super::execute`], handing each sink over with its buffer where it
/// can ([`SinkData::Buffer`]) and copying the others.
pub fn execute_owned(
    plan: &Plan,
    kernels: &[KernelFn],
    inputs: &[Input],
    opts: &Options,
) -> Result<(Vec<SinkData>, Report), String> {
    let take = takeable(plan);
    execute_core(plan, kernels, inputs, opts, |bufs| {
        // Copies first, while every buffer is still in place.
        let views = sink_views(plan, bufs)?;
        let mut out: Vec<Option<SinkData>> = (views.iter().zip(&take))
            .map(|(v, &t)| (!t).then(|| v.to_tensor().map(SinkData::Copy)).transpose())
            .collect::<Result<_, String>>()?;
        drop(views);
        for (k, s) in plan.sinks.iter().enumerate() {
            if out[k].is_some() {
                continue;
            }
            let size = s.dtype.size_bytes();
            let buf = (bufs[s.view.buffer as usize].take())
                .ok_or_else(|| format!("sink @{} was never computed", s.name))?;
            out[k] = Some(SinkData::Buffer(OwnedBuffer {
                buf,
                offset: s.view.offset as usize * size,
                len: checked_numel(&s.shape).unwrap_or(0) * size,
            }));
        }
        Ok(out.into_iter().flatten().collect())
    })
}
