//! `HttpLane`: the native HTTP server's short way for the request it serves most, a sync tool
//! called on a session this process holds.
//!
//! The server hands a connection's bytes to `feed` instead of `parse_http`. Each complete
//! request is framed by the same parser; one that is a `tools/call` of a session the lane
//! knows, with header values the transport has already accepted once, is answered here: the
//! tool runs through the application's `run_tool` (its only crossing into Python), and the reply
//! is encoded and framed here, so the request makes no header dict, no message object, no
//! session-machine step and no reply tuple. Every other request comes back in `parse_http`'s
//! form for the transport's full path, which holds every rule: the lane only answers requests
//! whose every check the full path would pass, and says nothing it has not been told.
//!
//! What it is told, by the transport (`mcpfast.transports.http`):
//! - `learn(headers)`: after the full path accepted a session POST, its `Host`, `Accept`,
//!   `Content-Type` and `Origin` values (a few of each kept; others go the full path);
//! - `add_session`/`drop_session`: the sessions of the table, with their in-flight table and
//!   version (a request id in flight, or a session busy with one, goes the full path);
//! - `run_tool(name, arguments, version)`: `None` (not a sync tool call: the full path serves
//!   it, nothing ran), a result dict, or `(code, message, data)` for a JSON-RPC error;
//! - `unencodable(id, exc)`: the reply to a result JSON cannot hold.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use mcpfast_core::envelope::{decode_bytes, Decoded, Envelope, Kind};
use mcpfast_core::http1::Head;
use mcpfast_core::json::Reader;
use mcpfast_core::write;

use crate::errors;
use crate::http1::{frame, header_key, request_tuple};
use crate::pyjson;

/// Values kept per learned header: enough for every client of a deployment, bounded against a
/// client that varies them.
const LEARNED_MAX: usize = 64;

const HOST: usize = 0;
const ACCEPT: usize = 1;
const CONTENT_TYPE: usize = 2;
const ORIGIN: usize = 3;
const LEARNED_NAMES: [&[u8]; 4] = [b"host", b"accept", b"content-type", b"origin"];

const TOOLS_CALL: &[u8] = b"tools/call";

/// FNV-1a: the keys are the server's own random session ids, put in by the server only, so a
/// keyed hash buys nothing and SipHash costs more than the rest of a lookup.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type FnvBuild = BuildHasherDefault<Fnv>;

struct LaneSession {
    session: Py<PyAny>,
    in_flight: Py<PyDict>,
    version: Py<PyString>,
}

/// The headers a session POST is judged by, each present at most once.
#[derive(Default)]
struct Seen<'a> {
    learned: [Option<&'a [u8]>; 4],
    session_id: Option<&'a [u8]>,
    version: Option<&'a [u8]>,
}

impl<'a> Seen<'a> {
    /// `None` when one of them is repeated (the full path joins repeats and judges the result).
    fn of(head: &Head<'a>) -> Option<Self> {
        let mut seen = Seen::default();
        for &(name, value) in &head.headers {
            let slot = match name.len() {
                4 if name.eq_ignore_ascii_case(b"host") => &mut seen.learned[HOST],
                6 if name.eq_ignore_ascii_case(b"accept") => &mut seen.learned[ACCEPT],
                6 if name.eq_ignore_ascii_case(b"origin") => &mut seen.learned[ORIGIN],
                12 if name.eq_ignore_ascii_case(b"content-type") => &mut seen.learned[CONTENT_TYPE],
                14 if name.eq_ignore_ascii_case(b"mcp-session-id") => &mut seen.session_id,
                20 if name.eq_ignore_ascii_case(b"mcp-protocol-version") => &mut seen.version,
                _ => continue,
            };
            if slot.replace(value).is_some() {
                return None;
            }
        }
        Some(seen)
    }
}

#[pyclass(module = "mcpfast._core")]
pub struct HttpLane {
    path: Vec<u8>,
    versions: Vec<Vec<u8>>,
    json_head: Vec<u8>,
    max_head: usize,
    max_body: usize,
    /// Few values each (one or two per deployment): a scan beats hashing them.
    learned: [Vec<Vec<u8>>; 4],
    sessions: HashMap<Vec<u8>, LaneSession, FnvBuild>,
    run_tool: Py<PyAny>,
    unencodable: Py<PyAny>,
    clock: Py<PyAny>,
    date: Vec<u8>,
    date_second: u64,
    answered: u64,
}

/// The tools/call a body holds, if it is one the lane may serve: a single request whose params
/// are `name` (a string) and maybe `arguments`, and nothing else (`_meta`, `task`: full path).
struct Call<'a> {
    env: Envelope<'a>,
    name: std::borrow::Cow<'a, str>,
    arguments: Option<&'a str>,
}

fn tools_call(body: &[u8]) -> Option<Call<'_>> {
    let Ok(Decoded::Single(env)) = decode_bytes(body, mcpfast_core::DEFAULT_MAX_DEPTH) else {
        return None;
    };
    if env.kind != Kind::Request || env.id.is_none() || env.members.overflow {
        return None;
    }
    if env.method.as_ref().map(|m| m.as_bytes()) != Some(TOOLS_CALL) {
        return None;
    }
    // Outside strings valid JSON is ASCII, and the strings were checked by the scan.
    let text = std::str::from_utf8(body).ok()?;
    let mut name = None;
    let mut arguments = None;
    for (key, value) in env.members.iter() {
        let slot = match &body[key] {
            b"name" => &mut name,
            b"arguments" => &mut arguments,
            _ => return None,
        };
        if slot.replace(value).is_some() {
            return None;
        }
    }
    env.params()?;
    let name = Reader::new(text.get(name?)?, 1).string().ok()?;
    let arguments = match arguments {
        Some(span) => Some(text.get(span)?),
        None => None,
    };
    Some(Call {
        env,
        name,
        arguments,
    })
}

impl HttpLane {
    /// The whole HTTP reply to one request, or `None`: the full path serves it.
    fn answer(
        &self,
        py: Python<'_>,
        head: &Head<'_>,
        body: &[u8],
        now: &Bound<'_, PyAny>,
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> PyResult<bool> {
        if head.method != b"POST" || head.target != self.path.as_slice() || !head.keep_alive {
            return Ok(false);
        }
        let Some(seen) = Seen::of(head) else {
            return Ok(false);
        };
        for (i, value) in seen.learned.iter().enumerate() {
            match value {
                Some(v) if self.learned[i].iter().any(|k| k.as_slice() == *v) => {}
                None if i == ORIGIN => {}
                _ => return Ok(false),
            }
        }
        if let Some(v) = seen.version {
            if !self.versions.iter().any(|known| known.as_slice() == v) {
                return Ok(false);
            }
        }
        let Some(entry) = seen.session_id.and_then(|id| self.sessions.get(id)) else {
            return Ok(false);
        };
        if !entry.in_flight.bind(py).is_empty() {
            return Ok(false);
        }
        let Some(call) = tools_call(body) else {
            return Ok(false);
        };
        let arguments = match call.arguments {
            Some(text) => pyjson::build_value(py, text)?,
            None => py.None().into_bound(py),
        };
        let name = PyString::new(py, &call.name);
        let outcome = self
            .run_tool
            .bind(py)
            .call1((name, arguments, entry.version.bind(py)))?;
        if outcome.is_none() {
            return Ok(false);
        }
        let Some(id) = call.env.id.as_ref() else {
            return Ok(false);
        };
        reply.clear();
        reply.extend_from_slice(write::HEAD);
        reply.extend_from_slice(b",\"id\":");
        write::write_id(reply, id);
        if let Ok(error) = outcome.cast::<PyTuple>() {
            // A refusal before the tool ran: if it cannot be written here, the full path says it.
            if !write_error(reply, error) {
                return Ok(false);
            }
        } else {
            reply.extend_from_slice(b",\"result\":");
            if let Err(exc) = pyjson::write_body(reply, &outcome) {
                let id = pyjson::id_to_py(py, id)?;
                let written = self.unencodable.bind(py).call1((id, exc.value(py)))?;
                reply.clear();
                reply.extend_from_slice(written.cast::<PyBytes>()?.as_bytes());
            } else {
                reply.push(b'}');
            }
        }
        entry
            .session
            .bind(py)
            .setattr(pyo3::intern!(py, "last_seen"), now)?;
        out.extend_from_slice(&self.json_head);
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(reply.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.date);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(reply);
        Ok(true)
    }
}

/// `,"error":{...}}` as `encode_error` writes it; false when `(code, message, data)` is not
/// an int code, a str message and data JSON can hold.
fn write_error(out: &mut Vec<u8>, error: &Bound<'_, PyTuple>) -> bool {
    let Ok((code, message, data)) =
        error.extract::<(Bound<'_, PyAny>, Bound<'_, PyString>, Bound<'_, PyAny>)>()
    else {
        return false;
    };
    if !code.is_exact_instance_of::<PyInt>() {
        return false;
    }
    let Ok(message) = message.to_str() else {
        return false;
    };
    out.extend_from_slice(b",\"error\":{\"code\":");
    if pyjson::write_obj(out, &code, 0).is_err() {
        return false;
    }
    out.extend_from_slice(b",\"message\":");
    write::write_str(out, message);
    if !data.is_none() {
        out.extend_from_slice(b",\"data\":");
        if pyjson::write_obj(out, &data, 0).is_err() {
            return false;
        }
    }
    out.extend_from_slice(b"}}");
    true
}

#[pymethods]
impl HttpLane {
    /// `HttpLane(path, versions, json_head, run_tool, unencodable, clock, max_head, max_body)`:
    /// `versions` are the `MCP-Protocol-Version` values a session request may carry;
    /// `json_head` the status line and headers of a JSON reply before its length; `clock()`
    /// the current `date` header line (asked once a second).
    #[new]
    #[pyo3(signature = (path, versions, json_head, run_tool, unencodable, clock, max_head, max_body))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: &str,
        versions: Vec<String>,
        json_head: &[u8],
        run_tool: Py<PyAny>,
        unencodable: Py<PyAny>,
        clock: Py<PyAny>,
        max_head: usize,
        max_body: usize,
    ) -> Self {
        HttpLane {
            path: path.as_bytes().to_vec(),
            versions: versions.into_iter().map(String::into_bytes).collect(),
            json_head: json_head.to_vec(),
            max_head,
            max_body,
            learned: Default::default(),
            sessions: HashMap::default(),
            run_tool,
            unencodable,
            clock,
            date: Vec::new(),
            date_second: 0,
            answered: 0,
        }
    }

    /// Remember the `Host`, `Accept`, `Content-Type` and `Origin` values of a request the
    /// full path accepted (lower-case names, as `parse_http` gives them).
    fn learn(&mut self, headers: &Bound<'_, PyDict>) -> PyResult<()> {
        for (i, name) in LEARNED_NAMES.iter().enumerate() {
            let known = &mut self.learned[i];
            if known.len() >= LEARNED_MAX {
                continue;
            }
            if let Some(value) = headers.get_item(header_key(headers.py(), name))? {
                if let Ok(value) = value.cast::<PyBytes>() {
                    if !known.iter().any(|k| k.as_slice() == value.as_bytes()) {
                        known.push(value.as_bytes().to_vec());
                    }
                }
            }
        }
        Ok(())
    }

    /// Serve `tools/call` for session `session_id`: `session` gets `last_seen` on each call;
    /// `in_flight` is its session machine's table of requests in flight.
    fn add_session(
        &mut self,
        session_id: &str,
        session: Py<PyAny>,
        in_flight: Py<PyDict>,
        version: Py<PyString>,
    ) {
        self.sessions.insert(
            session_id.as_bytes().to_vec(),
            LaneSession {
                session,
                in_flight,
                version,
            },
        );
    }

    /// Forget a session (ended, or no longer one the lane may serve).
    fn drop_session(&mut self, session_id: &str) {
        self.sessions.remove(session_id.as_bytes());
    }

    /// Sessions the lane serves.
    #[getter]
    fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Requests answered by the lane since it was made.
    #[getter]
    fn answered(&self) -> u64 {
        self.answered
    }

    /// `parse_http` that answers what it can. When it answered every request in `data` and
    /// nothing is left over (the usual case), the replies' bytes alone; else `(replies,
    /// requests, consumed, status, need, reason)`: `replies` the bytes to write first (or
    /// `None`) for the requests it answered, `requests` the rest in `parse_http`'s form, in
    /// order. Only the requests before the first one left to the full path are answered, and
    /// none when `idle` is false (an earlier answer still owns the connection), so replies stay
    /// in request order and a request never runs before those sent ahead of it. `now` is the
    /// time put in a served session's `last_seen`.
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        data: &Bound<'py, PyBytes>,
        now: &Bound<'py, PyAny>,
        idle: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guarded(|| {
            let buf = data.as_bytes();
            let mut requests: Option<Bound<'py, PyList>> = None;
            let mut replies: Vec<u8> = Vec::with_capacity(512);
            let mut reply: Vec<u8> = Vec::with_capacity(256);
            let mut answering = idle;
            let mut answered = 0u64;
            if answering {
                self.refresh_date(py)?;
            }
            let this = &*self;
            let (at, status, need, reason) =
                frame(buf, this.max_head, this.max_body, |head, body| {
                    if answering {
                        if this.answer(py, head, body, now, &mut replies, &mut reply)? {
                            answered += 1;
                            return Ok(());
                        }
                        answering = false;
                    }
                    requests
                        .get_or_insert_with(|| PyList::empty(py))
                        .append(request_tuple(py, head, body)?)
                })?;
            self.answered += answered;
            if requests.is_none() && at == buf.len() && status == 0 && !replies.is_empty() {
                return Ok(PyBytes::new(py, &replies).into_any());
            }
            let replies = (!replies.is_empty()).then(|| PyBytes::new(py, &replies));
            let requests = requests.unwrap_or_else(|| PyList::empty(py));
            (replies, requests, at, status, need, reason)
                .into_pyobject(py)
                .map(Bound::into_any)
        })
    }
}

impl HttpLane {
    /// The `date` line, asked of `clock` again when the second has changed (it formats it).
    fn refresh_date(&mut self, py: Python<'_>) -> PyResult<()> {
        let second = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if second != self.date_second || self.date.is_empty() {
            let line = self.clock.bind(py).call0()?;
            self.date = line.cast::<PyBytes>()?.as_bytes().to_vec();
            self.date_second = second;
        }
        Ok(())
    }
}
