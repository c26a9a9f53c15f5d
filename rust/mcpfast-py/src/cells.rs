//! The cells a tally (`mcpfast_core::tally`) lives in: the lane's own memory, or a buffer
//! Python hands over, such as a file every process of a server maps, so that each reads the
//! others' counts.
#![allow(unsafe_code)]

use std::sync::atomic::AtomicU64;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// 64-bit cells, owned or in a Python buffer.
pub(crate) enum Cells {
    Owned(Box<[AtomicU64]>),
    Shared(PyBuffer<u64>),
}

impl Cells {
    /// `n` zeroed cells of the lane's own.
    pub(crate) fn owned(n: usize) -> Cells {
        Cells::Owned((0..n).map(|_| AtomicU64::new(0)).collect())
    }

    /// The cells of `buffer`: writable, C-contiguous, of 64-bit items (a `memoryview` cast to
    /// `'Q'` over a `mmap` or a `bytearray`), aligned for atomics.
    pub(crate) fn shared(buffer: &Bound<'_, PyAny>) -> PyResult<Cells> {
        let buffer = PyBuffer::<u64>::get(buffer)?;
        if buffer.readonly() || !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "tally cells must be a writable, contiguous buffer",
            ));
        }
        if (buffer.buf_ptr() as usize) % std::mem::align_of::<AtomicU64>() != 0 {
            return Err(PyValueError::new_err(
                "tally cells must be aligned to 8 bytes",
            ));
        }
        Ok(Cells::Shared(buffer))
    }

    /// The cells, as atomics.
    pub(crate) fn get(&self) -> &[AtomicU64] {
        match self {
            Cells::Owned(cells) => cells,
            // SAFETY: `shared` checked that the buffer is writable, C-contiguous, of
            // `item_count` 8-byte items and aligned for `AtomicU64`, which has the size and
            // layout of `u64`. The `PyBuffer` held in `self` keeps the export open for as long
            // as the slice borrows `self`: while it is open the exporter (a `bytearray`, a
            // `mmap`) may neither resize nor free the memory. Other processes (or Python code)
            // may read or write the same memory meanwhile, which atomics allow; no `&mut` to
            // it is ever made.
            Cells::Shared(buffer) => unsafe {
                std::slice::from_raw_parts(
                    buffer.buf_ptr().cast::<AtomicU64>().cast_const(),
                    buffer.item_count(),
                )
            },
        }
    }
}
