//! The exceptions are Python classes (`mcpfast._errors`) shared with the pure-Python twin,
//! so `except JsonRpcError` catches both implementations' errors.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static JSON_RPC_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static FRAME_TOO_LARGE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn class<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyType>> {
    cell.import(py, "mcpfast._errors", name)
}

/// A `JsonRpcError` instance (to raise, or to put in a batch's list).
pub fn json_rpc_error(
    py: Python<'_>,
    code: i64,
    message: &str,
    id: Option<Bound<'_, PyAny>>,
) -> PyErr {
    match class(py, &JSON_RPC_ERROR, "JsonRpcError").and_then(|c| c.call1((code, message, id))) {
        Ok(inst) => PyErr::from_value(inst),
        Err(e) => e,
    }
}

/// A `FrameTooLarge` instance, reported in a list rather than raised.
pub fn frame_too_large(py: Python<'_>, size: usize, limit: usize) -> PyResult<Bound<'_, PyAny>> {
    class(py, &FRAME_TOO_LARGE, "FrameTooLarge")?.call1((size, limit))
}

/// Runs a binding's body so that a Rust panic (a bug) reaches Python as an ordinary
/// `RuntimeError` that `except Exception` handles, never as PyO3's `PanicException`
/// (a `BaseException` that would take a server down).
pub fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                "internal error in mcpfast._core (please report it): {what}"
            )))
        }
    }
}

/// orjson's recursion limit when serialising.
pub const MAX_ENCODE_DEPTH: u32 = 254;

/// The encoder's refusals, worded as orjson words them (so both core implementations agree).
pub const NOT_UTF8: &str = "str is not valid UTF-8: surrogates not allowed";
pub const INT_RANGE: &str = "Integer exceeds 64-bit range";
pub const RECURSION: &str = "Recursion limit reached";
pub const KEY_NOT_STR: &str = "Dict key must be str";

/// A `TypeError`: what the encoders raise for a value JSON cannot hold.
#[cold]
#[inline(never)]
pub fn type_error(msg: impl Into<String>) -> PyErr {
    pyo3::exceptions::PyTypeError::new_err(msg.into())
}

/// The depth guard of both encoders: one more container level, or the recursion error.
#[inline]
pub fn enter(depth: u32) -> PyResult<u32> {
    if depth >= MAX_ENCODE_DEPTH {
        return Err(type_error(RECURSION));
    }
    Ok(depth + 1)
}
