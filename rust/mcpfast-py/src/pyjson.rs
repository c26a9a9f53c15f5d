//! JSON to Python objects (a `json::Builder`) and Python objects to JSON, the two directions
//! the binding needs beyond the envelope scan.

use mcpfast_core::envelope::Id;
use mcpfast_core::json::{self, Reader};
use mcpfast_core::write;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

use crate::errors::{self, enter, type_error, INT_RANGE, KEY_NOT_STR, NOT_UTF8};
use crate::fastjson::KeyCache;

pub enum BuildError {
    Json(json::Error),
    Py(PyErr),
}

impl From<json::Error> for BuildError {
    fn from(e: json::Error) -> Self {
        BuildError::Json(e)
    }
}

impl From<PyErr> for BuildError {
    fn from(e: PyErr) -> Self {
        BuildError::Py(e)
    }
}

/// Builds the Python value of the JSON text at the start of `text` (already validated; what
/// follows the value is not read).
pub fn build_value<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let run = |keys: Option<&mut KeyCache>| {
        let mut reader = Reader::new(text, usize::MAX);
        reader.build(&mut crate::fastjson::RawBuilder { py, keys }, 1)
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

fn str_of<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
    s.to_str().map_err(|_| type_error(NOT_UTF8))
}

fn write_int(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Ok(v) = obj.extract::<i64>() {
        write::write_i64(out, v);
    } else if let Ok(v) = obj.extract::<u64>() {
        write::write_u64(out, v);
    } else {
        return Err(type_error(INT_RANGE));
    }
    Ok(())
}

static ENUM_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static UUID_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Appends `obj` as JSON, with the types and limits orjson has.
pub fn write_obj(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
    // SAFETY: `obj` is a live object borrowed for this call and the GIL is held.
    #[allow(unsafe_code)]
    unsafe {
        crate::fastjson::write(obj.py(), out, obj.as_ptr(), depth)
    }
}

/// The slow path: subclasses of the JSON types, `enum.Enum`, `uuid.UUID`.
pub fn write_other(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
    let py = obj.py();
    if let Ok(s) = obj.cast::<PyString>() {
        write::write_str(out, str_of(s)?);
    } else if let Ok(d) = obj.cast::<PyDict>() {
        write_dict(out, d, depth)?;
    } else if let Ok(l) = obj.cast::<PyList>() {
        write_seq(out, l.iter(), depth)?;
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        write_seq(out, t.iter(), depth)?;
    } else if obj.cast::<PyInt>().is_ok() {
        write_int(out, obj)?;
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        write::write_f64(out, f.value());
    } else if obj.is_instance(ENUM_TYPE.import(py, "enum", "Enum")?)? {
        write_obj(out, &obj.getattr("value")?, depth)?;
    } else if obj.is_instance(UUID_TYPE.import(py, "uuid", "UUID")?)? {
        write::write_str(out, &obj.str()?.to_cow()?);
    } else {
        return Err(type_error(format!(
            "Type is not JSON serializable: {}",
            obj.get_type().name()?
        )));
    }
    Ok(())
}

fn write_dict(out: &mut Vec<u8>, d: &Bound<'_, PyDict>, depth: u32) -> PyResult<()> {
    let depth = enter(depth)?;
    out.push(b'{');
    let mut first = true;
    for (k, v) in d.iter() {
        if !first {
            out.push(b',');
        }
        first = false;
        let key = k.cast::<PyString>().map_err(|_| type_error(KEY_NOT_STR))?;
        write::write_str(out, str_of(key)?);
        out.push(b':');
        write_obj(out, &v, depth)?;
    }
    out.push(b'}');
    Ok(())
}

fn write_seq<'py>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    depth: u32,
) -> PyResult<()> {
    let depth = enter(depth)?;
    out.push(b'[');
    let mut first = true;
    for item in items {
        if !first {
            out.push(b',');
        }
        first = false;
        write_obj(out, &item, depth)?;
    }
    out.push(b']');
    Ok(())
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
