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
    let direct = for_source(source, dtype, shape, |x| {
        let mut file = File::open(path).map_err(|e| NpyError::io("cannot read", path, e))?;
        let meta = (file.metadata()).map_err(|e| NpyError::io("cannot read", path, e))?;
        if !meta.is_file() {
            return Ok(None);
        }
        let h = read_header(&mut file, Some(meta.len()), path, Some(x))?;
        if h.fortran_order {
            return Ok(None);
        }
        runs_into(&mut file, &h, piece, runs, dst, path).map(Some)
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
    let ty = type_string(h.dtype, &h.shape);
    let n = h.dtype.size_bytes();
    let fail = |e: DataError| data_error(e, path, &ty, h.data_bytes);
    let mut read = 0u64;
    for &(first, len) in runs {
        let (first, len) = (first as usize, len as usize);
        r.seek(SeekFrom::Start(h.len + (first * n) as u64))
            .map_err(|e| fail(DataError::Io(e)))?;
        let at = (first - origin) * n;
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
