//! `decode`, `scan_reply` and the `Message` class.

use mcpfast_core::envelope::{self, Decoded, Envelope, Kind, RpcError};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString};

use crate::errors;
use crate::pyjson::{build_value, id_to_py};

macro_rules! known_methods {
    ($($name:literal),* $(,)?) => {
        const KNOWN_METHODS: &[&str] = &[$($name),*];
        /// The index of a known method name (as UTF-8 bytes) in `KNOWN_METHODS`.
        fn known_method(s: &[u8]) -> Option<usize> {
            let mut i = 0usize;
            $(
                if s == $name.as_bytes() {
                    return Some(i);
                }
                i += 1;
            )*
            let _ = i;
            None
        }
    };
}

// Method names of every MCP revision: decoding one of these reuses an interned str.
known_methods!(
    "tools/call",
    "notifications/progress",
    "ping",
    "initialize",
    "notifications/initialized",
    "tools/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "notifications/cancelled",
    "notifications/message",
    "notifications/resources/updated",
    "notifications/resources/list_changed",
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/roots/list_changed",
    "notifications/elicitation/complete",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "notifications/tasks/status",
);

static METHOD_STRS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static KIND_STRS: PyOnceLock<[Py<PyString>; 4]> = PyOnceLock::new();

fn method_str<'py>(py: Python<'py>, name: &envelope::Text<'_>) -> Bound<'py, PyString> {
    match known_method(name.as_bytes()) {
        Some(i) => {
            let table = METHOD_STRS.get_or_init(py, || {
                KNOWN_METHODS
                    .iter()
                    .map(|m| PyString::intern(py, m).unbind())
                    .collect()
            });
            table[i].bind(py).clone()
        }
        None => PyString::new(py, name.as_str()),
    }
}

fn kind_str(py: Python<'_>, kind: Kind) -> Py<PyString> {
    let table = KIND_STRS.get_or_init(py, || {
        [Kind::Request, Kind::Notification, Kind::Result, Kind::Error]
            .map(|k| PyString::intern(py, k.as_str()).unbind())
    });
    let i = match kind {
        Kind::Request => 0,
        Kind::Notification => 1,
        Kind::Result => 2,
        Kind::Error => 3,
    };
    table[i].clone_ref(py)
}

/// One decoded JSON-RPC message; its parts stay bytes until asked for.
///
/// `kind`, `id` and `method`, read on every message, are plain object fields exposed as
/// member descriptors (a frozen class's `#[pyo3(get)]` on a `Py<T>` field): CPython reads them
/// straight from the struct (its specialised `LOAD_ATTR_SLOT`), with no call into Rust.
#[pyclass(frozen, freelist = 256, module = "mcpfast._core", name = "Message")]
pub struct Message {
    #[pyo3(get)]
    kind: Py<PyString>,
    /// None for notifications and null ids.
    #[pyo3(get)]
    id: Py<PyAny>,
    /// None for replies.
    #[pyo3(get)]
    method: Py<PyAny>,
    tag: Kind,
    src: Py<PyBytes>,
    span: (usize, usize),
    /// The span of params, result or error, whichever the kind carries.
    part: Option<(usize, usize)>,
    /// Set once, on first access. A std OnceLock, not PyOnceLock: building never runs Python
    /// code that could wait on another thread, and PyOnceLock's GIL hand-off costs more than
    /// the build itself.
    parsed: std::sync::OnceLock<Py<PyAny>>,
    /// Members of params recorded by the decoding pass (absolute offsets in `src`).
    recorded: envelope::Members,
    /// When params has more members than were recorded: all of them (key, offset of the value
    /// within params), listed by the first `param`.
    members: std::sync::OnceLock<Vec<(Box<str>, usize)>>,
}

impl Message {
    fn new(py: Python<'_>, src: &Bound<'_, PyBytes>, env: &Envelope<'_>) -> PyResult<Self> {
        let part = env.part.clone();
        Ok(Message {
            kind: kind_str(py, env.kind),
            id: match &env.id {
                Some(id) => id_to_py(py, id)?.unbind(),
                None => py.None(),
            },
            method: match &env.method {
                Some(m) => method_str(py, m).into_any().unbind(),
                None => py.None(),
            },
            tag: env.kind,
            src: src.clone().unbind(),
            span: (env.span.start, env.span.end),
            part: part.map(|r| (r.start, r.end)),
            parsed: std::sync::OnceLock::new(),
            recorded: env.members,
            members: std::sync::OnceLock::new(),
        })
    }

    fn part_bytes<'py>(&self, py: Python<'py>, kinds: &[Kind]) -> Option<Bound<'py, PyBytes>> {
        let (a, b) = self.part?;
        if !kinds.contains(&self.tag) {
            return None;
        }
        Some(PyBytes::new(py, &self.src.bind(py).as_bytes()[a..b]))
    }

    fn part_value(&self, py: Python<'_>, kinds: &[Kind]) -> PyResult<Py<PyAny>> {
        errors::guarded(|| self.part_value_inner(py, kinds))
    }

    fn part_value_inner(&self, py: Python<'_>, kinds: &[Kind]) -> PyResult<Py<PyAny>> {
        let Some((start, end)) = self.part else {
            return Ok(py.None());
        };
        if !kinds.contains(&self.tag) {
            return Ok(py.None());
        }
        if let Some(v) = self.parsed.get() {
            return Ok(v.clone_ref(py));
        }
        let bytes = &self.src.bind(py).as_bytes()[start..end];
        let text = std::str::from_utf8(bytes).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let built = build_value(py, text)?.unbind();
        // Another thread may have won the race: everyone then returns the first value stored.
        let _ = self.parsed.set(built);
        Ok(self
            .parsed
            .get()
            .map_or_else(|| py.None(), |v| v.clone_ref(py)))
    }
}

const CALLS: &[Kind] = &[Kind::Request, Kind::Notification];

impl Message {
    fn param_inner(
        &self,
        py: Python<'_>,
        key: &str,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let default = || {
            default
                .as_ref()
                .map_or_else(|| py.None(), |d| d.clone_ref(py))
        };
        if !CALLS.contains(&self.tag) {
            return Ok(default());
        }
        if let Some(v) = self.parsed.get() {
            return match v.bind(py).cast::<pyo3::types::PyDict>() {
                Ok(d) => Ok(d.get_item(key)?.map_or_else(default, Bound::unbind)),
                Err(_) => Ok(default()),
            };
        }
        let Some((start, end)) = self.part.filter(|_| CALLS.contains(&self.tag)) else {
            return Ok(default());
        };
        let src = self.src.bind(py).as_bytes();
        if !self.recorded.overflow {
            // Duplicate keys resolve to the last one.
            let found = self
                .recorded
                .iter()
                .rev()
                .find(|(k, _)| key_matches(&src[k.clone()], key));
            return match found {
                Some((_, value)) => {
                    let text = std::str::from_utf8(&src[value])
                        .map_err(|e| PyValueError::new_err(e.to_string()))?;
                    Ok(build_value(py, text)?.unbind())
                }
                None => Ok(default()),
            };
        }
        let text = std::str::from_utf8(&src[start..end])
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        if self.members.get().is_none() {
            // One pass over params lists every member; later param() calls reuse it.
            let index = mcpfast_core::json::member_index(text)
                .map_err(|e| PyValueError::new_err(e.to_string()))?
                .into_iter()
                .map(|(k, at)| (k.into_owned().into_boxed_str(), at))
                .collect();
            let _ = self.members.set(index);
        }
        let at = self.members.get().and_then(|idx| {
            idx.iter()
                .rev()
                .find(|(k, _)| **k == *key)
                .map(|(_, at)| *at)
        });
        match at {
            Some(at) => Ok(build_value(py, text.get(at..).unwrap_or_default())?.unbind()),
            None => Ok(default()),
        }
    }
}

/// Whether a key as written in the document (without quotes, maybe with escapes) is `key`.
fn key_matches(raw: &[u8], key: &str) -> bool {
    if memchr::memchr(b'\\', raw).is_none() {
        return raw == key.as_bytes();
    }
    let quoted = [b"\"".as_slice(), raw, b"\""].concat();
    std::str::from_utf8(&quoted)
        .ok()
        .and_then(|q| {
            mcpfast_core::json::Reader::new(q, 1)
                .string()
                .ok()
                .map(|k| k == key)
        })
        .unwrap_or(false)
}

#[pymethods]
impl Message {
    #[getter]
    fn params(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.part_value(py, CALLS)
    }

    /// One member of an object `params`, built alone (the rest stays bytes).
    #[pyo3(signature = (key, default = None))]
    fn param(&self, py: Python<'_>, key: &str, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        errors::guarded(|| self.param_inner(py, key, default))
    }
    #[getter]
    fn raw_params<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.part_bytes(py, CALLS)
    }

    #[getter]
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.part_value(py, &[Kind::Result])
    }

    #[getter]
    fn raw_result<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.part_bytes(py, &[Kind::Result])
    }

    #[getter]
    fn error(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.part_value(py, &[Kind::Error])
    }

    #[getter]
    fn raw<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let src = self.src.bind(py).as_bytes();
        if self.span == (0, src.len()) {
            return self.src.bind(py).clone();
        }
        PyBytes::new(py, &src[self.span.0..self.span.1])
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Message(kind='{}', id={}, method={})",
            self.tag.as_str(),
            self.id.bind(py).repr()?,
            self.method.bind(py).repr()?
        ))
    }
}

/// The input as a bytes object (str is UTF-8 encoded; bytearray and memoryview copied).
pub fn as_bytes<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let py = data.py();
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(b.clone());
    }
    if let Ok(s) = data.cast::<PyString>() {
        let text = s.to_str().map_err(|_| {
            errors::json_rpc_error(
                py,
                envelope::PARSE_ERROR,
                "invalid JSON: str is not valid UTF-8: surrogates not allowed",
                None,
            )
        })?;
        return Ok(PyBytes::new(py, text.as_bytes()));
    }
    if let Ok(b) = data.cast::<PyByteArray>() {
        return Ok(PyBytes::new(py, &b.to_vec()));
    }
    if data.cast::<PyMemoryView>().is_ok() {
        return Ok(py
            .get_type::<PyBytes>()
            .call1((data,))?
            .cast_into::<PyBytes>()?);
    }
    Err(PyTypeError::new_err(format!(
        "expected bytes, bytearray, memoryview or str, not {}",
        data.get_type().name()?
    )))
}

fn check_depth(max_depth: i64) -> PyResult<usize> {
    if max_depth < 1 {
        return Err(PyValueError::new_err("max_depth must be at least 1"));
    }
    Ok(usize::try_from(max_depth)
        .unwrap_or(usize::MAX)
        .min(mcpfast_core::MAX_DEPTH_CAP))
}

#[pyfunction]
#[pyo3(signature = (data, max_depth = mcpfast_core::DEFAULT_MAX_DEPTH as i64))]
pub fn decode<'py>(data: &Bound<'py, PyAny>, max_depth: i64) -> PyResult<Bound<'py, PyAny>> {
    errors::guarded(|| decode_inner(data, max_depth))
}

fn decode_inner<'py>(data: &Bound<'py, PyAny>, max_depth: i64) -> PyResult<Bound<'py, PyAny>> {
    let py = data.py();
    let max_depth = check_depth(max_depth)?;
    let src = as_bytes(data)?;
    let decoded =
        envelope::decode_bytes(src.as_bytes(), max_depth).map_err(|e| from_rpc(py, &e))?;
    match decoded {
        Decoded::Single(env) => Ok(Bound::new(py, Message::new(py, &src, &env)?)?.into_any()),
        Decoded::Batch(items) => {
            let list = PyList::empty(py);
            for item in &items {
                match item {
                    Ok(env) => list.append(Bound::new(py, Message::new(py, &src, env)?)?)?,
                    Err(e) => list.append(from_rpc(py, e).into_value(py))?,
                }
            }
            Ok(list.into_any())
        }
    }
}

#[pyfunction]
#[pyo3(signature = (data, max_depth = mcpfast_core::DEFAULT_MAX_DEPTH as i64))]
pub fn scan_reply<'py>(
    data: &Bound<'py, PyAny>,
    max_depth: i64,
) -> PyResult<(Py<PyAny>, bool, Option<i128>)> {
    errors::guarded(|| scan_reply_inner(data, max_depth))
}

fn scan_reply_inner<'py>(
    data: &Bound<'py, PyAny>,
    max_depth: i64,
) -> PyResult<(Py<PyAny>, bool, Option<i128>)> {
    let py = data.py();
    let max_depth = check_depth(max_depth)?;
    let src = as_bytes(data)?;
    let (id, is_error, code) =
        envelope::scan_reply(src.as_bytes(), max_depth).map_err(|e| from_rpc(py, &e))?;
    let id = match id {
        Some(id) => id_to_py(py, &id)?.unbind(),
        None => py.None(),
    };
    Ok((id, is_error, code))
}

/// The Python `JsonRpcError` for a core verdict.
fn from_rpc(py: Python<'_>, e: &RpcError<'_>) -> PyErr {
    let id = match e.id.as_ref().map(|id| id_to_py(py, id)) {
        Some(Ok(id)) => Some(id),
        Some(Err(err)) => return err,
        None => None,
    };
    errors::json_rpc_error(py, e.code, &e.message, id)
}
