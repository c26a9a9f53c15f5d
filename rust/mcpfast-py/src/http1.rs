//! `parse_http`: frame the HTTP/1.1 requests in a connection's buffer in one call.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use mcpfast_core::http1::{decode_chunked, parse_request, Body, Chunked, Head, Parse};

use crate::errors;

const OK: u16 = 0;
const CONTINUE: u16 = 100;

fn method_str<'py>(py: Python<'py>, method: &[u8]) -> Bound<'py, PyString> {
    match method {
        b"POST" => pyo3::intern!(py, "POST").clone(),
        b"GET" => pyo3::intern!(py, "GET").clone(),
        b"DELETE" => pyo3::intern!(py, "DELETE").clone(),
        // a token: ASCII, checked by the parser
        other => PyString::new(py, std::str::from_utf8(other).unwrap_or("")),
    }
}

/// Header names MCP clients send on every request: one shared key object each, so a request
/// neither allocates nor hashes them again (bytes cache their hash).
const COMMON_NAMES: [&[u8]; 16] = [
    b"host",
    b"content-type",
    b"content-length",
    b"accept",
    b"mcp-session-id",
    b"mcp-protocol-version",
    b"user-agent",
    b"accept-encoding",
    b"connection",
    b"origin",
    b"authorization",
    b"last-event-id",
    b"mcp-method",
    b"mcp-name",
    b"accept-language",
    b"cache-control",
];

static NAME_KEYS: PyOnceLock<Vec<Py<PyBytes>>> = PyOnceLock::new();

pub(crate) fn header_key<'py>(py: Python<'py>, name: &[u8]) -> Bound<'py, PyBytes> {
    let keys = NAME_KEYS.get_or_init(py, || {
        COMMON_NAMES
            .iter()
            .map(|n| PyBytes::new(py, n).unbind())
            .collect()
    });
    match COMMON_NAMES.iter().position(|n| *n == name) {
        Some(i) => keys[i].bind(py).clone(),
        None => PyBytes::new(py, name),
    }
}

/// Where framing stopped: `(consumed, status, need, reason)` as `parse_http` reports them.
pub type Stop = (usize, u16, usize, &'static str);

/// Frames the complete requests at the start of `buf`, handing each head and its body to
/// `on_request` in order; returns where it stopped (see `parse_http`).
pub fn frame<F>(buf: &[u8], max_head: usize, max_body: usize, mut on_request: F) -> PyResult<Stop>
where
    F: FnMut(&Head<'_>, &[u8]) -> PyResult<()>,
{
    let mut at = 0usize;
    while at < buf.len() {
        let head = match parse_request(&buf[at..], max_head, max_body) {
            Parse::Partial => break,
            Parse::Refused(r) => return Ok((at, r.status, 0, r.reason)),
            Parse::Head(head) => head,
        };
        let waiting = if head.expect_continue { CONTINUE } else { OK };
        let body_start = at + head.head_len;
        match head.body {
            Body::Length(length) => {
                let total = head.head_len + length;
                if buf.len() - at < total {
                    return Ok((at, waiting, total, ""));
                }
                on_request(&head, &buf[body_start..body_start + length])?;
                at += total;
            }
            Body::Chunked => match decode_chunked(&buf[body_start..], max_body, max_head) {
                Chunked::Partial => return Ok((at, waiting, 0, "")),
                Chunked::Refused(r) => return Ok((at, r.status, 0, r.reason)),
                Chunked::Complete { body, len } => {
                    on_request(&head, &body)?;
                    at += head.head_len + len;
                }
            },
        }
    }
    Ok((at, OK, 0, ""))
}

/// The Python form of one request: `(method, target, headers, body, keep_alive)`, header names
/// lower-cased and repeats joined with ", ".
pub fn request_tuple<'py>(
    py: Python<'py>,
    head: &Head<'_>,
    body: &[u8],
) -> PyResult<Bound<'py, PyTuple>> {
    let headers = PyDict::new(py);
    let mut name = Vec::with_capacity(32);
    for (n, v) in &head.headers {
        name.clear();
        name.extend(n.iter().map(u8::to_ascii_lowercase));
        let key = header_key(py, &name);
        match headers.get_item(&key)? {
            Some(old) => {
                let old = old.cast::<PyBytes>()?.as_bytes();
                let joined = [old, b", ", v].concat();
                headers.set_item(key, PyBytes::new(py, &joined))?;
            }
            None => headers.set_item(key, PyBytes::new(py, v))?,
        }
    }
    (
        method_str(py, head.method),
        PyBytes::new(py, head.target),
        headers,
        PyBytes::new(py, body),
        head.keep_alive,
    )
        .into_pyobject(py)
}

/// `(requests, consumed, status, need, reason)`; each request is `(method, target, headers,
/// body, keep_alive)` with lower-case header names (repeats joined with ", "). `status`: 0 (the
/// rest is an incomplete request; `need` is its whole length once known, else 0), 100 (the
/// same, and that request expects `100 Continue`), or the HTTP status refusing the request at
/// `consumed` (400, 413, 414, 417, 431, 501) with `reason`: answer it, then close.
#[pyfunction]
#[pyo3(signature = (data, max_head = 65536, max_body = 4 * 1024 * 1024))]
pub fn parse_http<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
    max_head: usize,
    max_body: usize,
) -> PyResult<(Bound<'py, PyList>, usize, u16, usize, &'static str)> {
    errors::guarded(|| {
        let requests = PyList::empty(py);
        let (at, status, need, reason) =
            frame(data.as_bytes(), max_head, max_body, |head, body| {
                requests.append(request_tuple(py, head, body)?)
            })?;
        Ok((requests, at, status, need, reason))
    })
}

/// `refusal(status, www_authenticate, retry_after, now_unix)`: the failure reason of a refused
/// request and the wait its `Retry-After` asks for.
#[pyfunction]
#[pyo3(signature = (status, www_authenticate, retry_after, now_unix))]
pub fn refusal(
    status: u16,
    www_authenticate: Option<&[u8]>,
    retry_after: Option<&[u8]>,
    now_unix: f64,
) -> (String, Option<f64>) {
    mcpfast_core::refused::refusal(status, www_authenticate, retry_after, now_unix)
}

/// `auth_param(www_authenticate, name)`: one parameter of a `WWW-Authenticate` value.
#[pyfunction]
pub fn auth_param(www_authenticate: &[u8], name: &str) -> Option<String> {
    mcpfast_core::refused::auth_param(www_authenticate, name)
}
