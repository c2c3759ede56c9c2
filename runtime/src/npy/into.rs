//! Reading a piece of a source straight into the buffer that holds it during the run (issue
//! 17): a rank of a distributed program reads its windows of each input into its piece buffer
//! (an [`crate::exec::SourceBuf`] the executor then takes over), so it never holds an input
//! twice (as read, and copied into the run's buffer).

use super::{
    check_runs, data_error, for_source, read_header, read_piece_expecting, read_up_to, DataError,
    Header, NpyError,
};
use crate::tensor::{checked_numel, type_string, DType};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// [`read_piece_expecting`] into `dst`, the piece's bytes (zeroed by the caller: what is not
/// read stays zero), stored as the executor stores elements (a bool one byte 0 or 1, every
/// other element its own bytes). Returns the number of data bytes read. A stream or a
/// Fortran-order file is read whole and its piece copied (the one case that holds the input
/// twice, for the time of the copy).
pub fn read_piece_into(
    path: &Path,
    source: &str,
    (dtype, shape): (DType, &[usize]),
    piece: (usize, usize),
    runs: &[(i64, i64)],
    dst: &mut [u8],
) -> Result<u64, NpyError> {
    let size = dtype.size_bytes();
    if dst.len() < piece.1.saturating_mul(size) {
        return Err(NpyError::new(
            path,
            super::NpyErrorKind::InvalidArgument,
            format!(
                "a piece of {} elements does not fit in {} bytes",
                piece.1,
                dst.len()
            ),
        ));
    }
    let direct = seekable(path, source, (dtype, shape), |file, h| {
        runs_into(file, h, piece, runs, dst, path)
    })?;
    if let Some(n) = direct {
        return Ok(n);
    }
    let (t, n) = read_piece_expecting(path, source, dtype, shape, piece, runs)?;
    let bytes = checked_numel(&t.shape).unwrap_or(0) * size;
    if bytes > dst.len() {
        return Err(NpyError::new(
            path,
            super::NpyErrorKind::InvalidArgument,
            format!("a piece of {bytes} bytes does not fit in {}", dst.len()),
        ));
    }
    crate::exec::copy_in(&t.data, dst.as_mut_ptr());
    Ok(n)
}

/// `read` of the C-order file at `path` (checked against the source's declared type) after its
/// header; `None` for a stream or a Fortran-order file, which are read otherwise.
fn seekable(
    path: &Path,
    source: &str,
    (dtype, shape): (DType, &[usize]),
    read: impl FnOnce(&mut File, &Header) -> Result<u64, NpyError>,
) -> Result<Option<u64>, NpyError> {
    for_source(source, dtype, shape, |x| {
        let mut file = File::open(path).map_err(|e| NpyError::io("cannot read", path, e))?;
        let meta = (file.metadata()).map_err(|e| NpyError::io("cannot read", path, e))?;
        if !meta.is_file() {
            return Ok(None);
        }
        let h = read_header(&mut file, Some(meta.len()), path, Some(x))?;
        if h.fortran_order {
            return Ok(None);
        }
        read(&mut file, &h).map(Some)
    })
}

/// The window of a source window ([`crate::plan::SourceWindow`]): the box at `origin`, of
/// shape `bx`, of the file's tensor, held dense in C order.
pub struct WindowBox<'a> {
    pub origin: &'a [usize],
    pub bx: &'a [usize],
}

/// [`read_piece_into`] for a source window: `runs` (elements of the window, inside `piece`)
/// read from the box of the file (of declared type `(dtype, shape)`) that `w` says, one seek
/// and one read per row of the box a run covers, into `dst`, the piece's bytes (zeroed).
/// Returns the number of data bytes read. A stream or a Fortran-order file is read through
/// [`read_piece_expecting`] (the hull of the rows, for the time of the copy).
pub fn read_window_into(
    path: &Path,
    source: &str,
    (dtype, shape): (DType, &[usize]),
    w: &WindowBox,
    piece: (usize, usize),
    runs: &[(i64, i64)],
    dst: &mut [u8],
) -> Result<u64, NpyError> {
    let segs = window_segments(shape, w, piece.0, runs);
    let file_runs: Vec<(i64, i64)> = segs.iter().map(|&(a, n, _)| (a, n)).collect();
    let direct = seekable(path, source, (dtype, shape), |file, h| {
        check_runs(h, (0, h.numel), &file_runs, path)?;
        segments_into(file, h, &segs, dst, path)
    })?;
    if let Some(n) = direct {
        return Ok(n);
    }
    let first = file_runs.iter().map(|r| r.0).min().unwrap_or(0);
    let end = file_runs.iter().map(|r| r.0 + r.1).max().unwrap_or(0);
    let hull = (first as usize, (end - first).max(0) as usize);
    let (t, n) = read_piece_expecting(path, source, dtype, shape, hull, &file_runs)?;
    let size = dtype.size_bytes();
    let mut all = vec![0u8; hull.1 * size];
    crate::exec::copy_in(&t.data, all.as_mut_ptr());
    for &(a, len, at) in &segs {
        let from = (a as usize - hull.0) * size;
        let len = len as usize * size;
        dst[at * size..at * size + len].copy_from_slice(&all[from..from + len]);
    }
    Ok(n)
}

/// The file runs of window runs `runs` (elements of the window, `piece_start` its piece's
/// first): `(first file element, length, element of the piece)` per row of the box a run
/// covers, rows that continue each other in both the file and the piece merged.
fn window_segments(
    shape: &[usize],
    w: &WindowBox,
    piece_start: usize,
    runs: &[(i64, i64)],
) -> Vec<(i64, i64, usize)> {
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let row = w.bx.last().copied().unwrap_or(1).max(1);
    let mut out: Vec<(i64, i64, usize)> = Vec::new();
    for &(a, n) in runs {
        let (mut e, end) = (a.max(0) as usize, (a + n).max(0) as usize);
        while e < end {
            let (mut rem, mut file) = (e, 0usize);
            for d in (0..w.bx.len()).rev() {
                let n = w.bx[d].max(1);
                file += (w.origin[d] + rem % n) * strides[d];
                rem /= n;
            }
            let len = (row - e % row).min(end - e);
            let at = e - piece_start;
            match out.last_mut() {
                Some(p) if p.0 + p.1 == file as i64 && p.2 + p.1 as usize == at => {
                    p.1 += len as i64
                }
                _ => out.push((file as i64, len as i64, at)),
            }
            e += len;
        }
    }
    out
}

/// Reads each of `runs` (elements, inside `piece`) of the file of `h` into `dst`, one seek and
/// one read per run, then checks bool bytes (0 or 1).
fn runs_into<R: Read + Seek>(
    r: &mut R,
    h: &Header,
    (origin, size): (usize, usize),
    runs: &[(i64, i64)],
    dst: &mut [u8],
    path: &Path,
) -> Result<u64, NpyError> {
    check_runs(h, (origin, size), runs, path)?;
    let segs: Vec<(i64, i64, usize)> = (runs.iter())
        .map(|&(a, n)| (a, n, a as usize - origin))
        .collect();
    segments_into(r, h, &segs, dst, path)
}

/// Reads each segment `(first, len, at)` (elements: `len` of the file's from `first`, into
/// `dst` from element `at`; checked inside the file) of the file of `h`, one seek and one
/// read each, then checks bool bytes (0 or 1).
fn segments_into<R: Read + Seek>(
    r: &mut R,
    h: &Header,
    segs: &[(i64, i64, usize)],
    dst: &mut [u8],
    path: &Path,
) -> Result<u64, NpyError> {
    let ty = type_string(h.dtype, &h.shape);
    let n = h.dtype.size_bytes();
    let fail = |e: DataError| data_error(e, path, &ty, h.data_bytes);
    let mut read = 0u64;
    for &(first, len, at) in segs {
        let (first, len) = (first as usize, len as usize);
        r.seek(SeekFrom::Start(h.len + (first * n) as u64))
            .map_err(|e| fail(DataError::Io(e)))?;
        let at = at * n;
        let want = &mut dst[at..at + len * n];
        let got = read_up_to(r, want).map_err(|e| fail(DataError::Io(e)))?;
        read += got as u64;
        if got < want.len() {
            return Err(fail(DataError::Eof(got as u64)));
        }
        if h.dtype == DType::Bool {
            if let Some(k) = want.iter().position(|&b| b > 1) {
                return Err(fail(DataError::Bool(first + k, want[k])));
            }
        }
        // The file is little-endian; the buffer holds the host's order.
        if cfg!(target_endian = "big") && n > 1 {
            want.chunks_exact_mut(n).for_each(|c| c.reverse());
        }
    }
    Ok(read)
}
