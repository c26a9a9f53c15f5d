//! JSON to Python objects and Python objects to JSON, the two directions the binding needs
//! beyond the envelope scan: its entry points over `fastjson`, with ids and the reusable
//! output buffer.

use mcpfast_core::envelope::Id;
use mcpfast_core::json::Reader;
use mcpfast_core::write;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

use crate::errors::{self, type_error};
use crate::fastjson::{str_of, BuildError, KeyCache, RawBuilder};

/// Appends `obj` as JSON, with the types and limits orjson has.
pub use crate::fastjson::write_obj;

/// Builds the Python value of the JSON text at the start of `text` (already validated; what
/// follows the value is not read).
pub fn build_value<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let run = |keys: Option<&mut KeyCache>| {
        let mut reader = Reader::new(text, usize::MAX);
        reader.build(&mut RawBuilder { py, keys }, 1)
    };
    let built = KeyCache::with(run);
    match built {
        Ok(v) => Ok(v.into_bound(py)),
        Err(BuildError::Py(e)) => Err(e),
        Err(BuildError::Json(e)) => Err(errors::json_rpc_error(py, -32700, &e.to_string(), None)),
    }
}

/// A Python object for a JSON-RPC id.
pub fn id_to_py<'py>(py: Python<'py>, id: &Id<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match id {
        Id::Int(v) => {
            let Ok(v) = v.into_pyobject(py);
            v.into_any()
        }
        Id::BigInt(text) => py.get_type::<PyInt>().call1((*text,))?,
        Id::Str(s) => PyString::new(py, s).into_any(),
    })
}

thread_local! {
    /// The encoders' output buffer, reused from call to call (an allocation and a free less
    /// per message). Taken out while in use, so a nested encode (Python code run by the slow
    /// path) simply gets a fresh one.
    static OUT: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A buffer kept for reuse is dropped instead when it grew beyond this.
const OUT_KEEP: usize = 1 << 20;

/// Runs an encoder body on the reusable buffer and returns what it wrote as bytes.
#[inline]
pub fn encode_with<'py>(
    py: Python<'py>,
    body: impl FnOnce(&mut Vec<u8>) -> PyResult<()>,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    // `try_with`: while the thread's locals are torn down, a fresh buffer does.
    let mut out = OUT.try_with(std::cell::Cell::take).unwrap_or_default();
    out.clear();
    let result = body(&mut out).map(|()| pyo3::types::PyBytes::new(py, &out));
    if out.capacity() <= OUT_KEEP {
        let _ = OUT.try_with(|cell| cell.set(out));
    }
    result
}

/// Appends a JSON-RPC id given from Python: a str or an int of any size (written exactly).
pub fn write_py_id(out: &mut Vec<u8>, id: &Bound<'_, PyAny>) -> PyResult<()> {
    if id.is_exact_instance_of::<PyInt>() {
        if let Ok(v) = id.extract::<i64>() {
            write::write_i64(out, v);
            return Ok(());
        }
    }
    if let Ok(s) = id.cast::<PyString>() {
        write::write_str(out, str_of(s)?);
    } else if id.cast::<PyInt>().is_ok() && id.cast::<PyBool>().is_err() {
        if let Ok(v) = id.extract::<i64>() {
            write::write_i64(out, v);
        } else {
            // Big integers are written from their exact decimal form.
            out.extend_from_slice(id.str()?.to_str()?.as_bytes());
        }
    } else {
        return Err(type_error(format!(
            "id must be a str or an int, not {}",
            id.get_type().name()?
        )));
    }
    Ok(())
}

/// Appends a params/result value: bytes are spliced as already-encoded JSON.
pub fn write_body(out: &mut Vec<u8>, body: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Ok(b) = body.cast::<pyo3::types::PyBytes>() {
        write::splice_raw(out, b.as_bytes());
        Ok(())
    } else {
        write_obj(out, body, 0)
    }
}
