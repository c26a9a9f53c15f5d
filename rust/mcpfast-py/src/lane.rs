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
//!   it, nothing ran), a result dict, a str (the text of a result of one text content), or
//!   `(code, message, data)` for a JSON-RPC error;
//! - `unencodable(id, exc)`: the reply to a result JSON cannot hold.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use mcpfast_core::envelope::{decode_bytes, Decoded, Envelope, Id, Kind};
use mcpfast_core::http1::Head;
use mcpfast_core::idhash::IdHash;
use mcpfast_core::json::{self, Reader};
use mcpfast_core::meta as core_meta;
use mcpfast_core::write;

use crate::births::{self, Births};
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

/// Around the text of a result of one text content, as the result dict is encoded.
const TEXT_RESULT: (&[u8], &[u8]) = (b"{\"content\":[{\"type\":\"text\",\"text\":", b"}]}");

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
    method: Option<&'a [u8]>,
    name: Option<&'a [u8]>,
    /// An `Mcp-Param-*` header came (the full path judges those).
    params: bool,
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
                10 if name.eq_ignore_ascii_case(b"mcp-method") => &mut seen.method,
                8 if name.eq_ignore_ascii_case(b"mcp-name") => &mut seen.name,
                n if n > 10 && name[..10].eq_ignore_ascii_case(b"mcp-param-") => {
                    seen.params = true;
                    continue;
                }
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
    sessions: HashMap<Vec<u8>, LaneSession, IdHash>,
    run_tool: Py<PyAny>,
    unencodable: Py<PyAny>,
    clock: Py<PyAny>,
    date: Vec<u8>,
    date_second: u64,
    answered: u64,
    /// Sessions the lane opens itself (`allow_births`; `None`: only the table's).
    births: Option<Births>,
    /// 2026-07-28 calls it answers (`allow_stateless`; `None`: none).
    stateless: Option<Stateless>,
}

/// What the lane needs to answer 2026-07-28 `tools/call` requests (see `allow_stateless`).
struct Stateless {
    /// Each version as sent, and as `serve` gets it (made once, not per call).
    versions: Vec<(Vec<u8>, Py<PyString>)>,
    serve: Py<PyAny>,
}

/// The tools/call a body holds, if it is one the lane may serve: a single request whose params
/// are `name` (a string) and maybe `arguments`, and nothing else (`_meta`, `task`: full path).
struct Call<'a> {
    id: Id<'a>,
    name: std::borrow::Cow<'a, str>,
    arguments: Option<&'a str>,
}

/// The single message `body` holds (decoded once for every question the lane asks of it).
pub(crate) fn single(body: &[u8]) -> Option<Envelope<'_>> {
    match decode_bytes(body, mcpfast_core::DEFAULT_MAX_DEPTH) {
        Ok(Decoded::Single(env)) => Some(env),
        _ => None,
    }
}

/// The single request in `body`, with an id and params of few enough members to be listed,
/// calling `method`: its envelope and its text.
pub(crate) fn request_of<'a>(body: &'a [u8], method: &[u8]) -> Option<(Envelope<'a>, &'a str)> {
    let env = single(body)?;
    let text = request_in(&env, body, method)?;
    Some((env, text))
}

/// `request_of` for the envelope `single` made of `body` (not moved: it is large): the text.
fn request_in<'a>(env: &Envelope<'a>, body: &'a [u8], method: &[u8]) -> Option<&'a str> {
    if env.kind != Kind::Request || env.id.is_none() || env.members.overflow {
        return None;
    }
    if env.method.as_ref().map(|m| m.as_bytes()) != Some(method) {
        return None;
    }
    env.params()?;
    // Outside strings valid JSON is ASCII, and the strings were checked by the scan.
    std::str::from_utf8(body).ok()
}

/// The values of params members `names` (each at most once, as written), or `None` when
/// params hold another member.
pub(crate) fn members<const N: usize>(
    env: &Envelope<'_>,
    body: &[u8],
    names: [&[u8]; N],
) -> Option<[Option<std::ops::Range<usize>>; N]> {
    let mut slots: [Option<std::ops::Range<usize>>; N] = std::array::from_fn(|_| None);
    for (key, value) in env.members.iter() {
        let key = &body[key];
        let i = names.iter().position(|n| *n == key)?;
        if slots[i].replace(value).is_some() {
            return None;
        }
    }
    Some(slots)
}

fn tools_call<'a>(env: &Envelope<'a>, body: &'a [u8]) -> Option<Call<'a>> {
    match call_of(env, body)? {
        (call, None) => Some(call),
        _ => None,
    }
}

/// The tools/call a body holds whose params are `name`, maybe `arguments` and maybe `_meta`
/// (its text), nothing else.
fn call_of<'a>(env: &Envelope<'a>, body: &'a [u8]) -> Option<(Call<'a>, Option<&'a str>)> {
    let text = request_in(env, body, TOOLS_CALL)?;
    let [name, arguments, meta] = members(env, body, [b"name", b"arguments", b"_meta"])?;
    let name = Reader::new(text.get(name?)?, 1).string().ok()?;
    let arguments = match arguments {
        Some(span) => Some(text.get(span)?),
        None => None,
    };
    let meta = match meta {
        Some(span) => Some(text.get(span)?),
        None => None,
    };
    let call = Call {
        id: env.id.clone()?,
        name,
        arguments,
    };
    Some((call, meta))
}

/// Whether a 2026-07-28 request's `_meta` is one the session machine admits as it is: exactly
/// `protocolVersion` (`version`), `clientCapabilities` (an object) and maybe `clientInfo` (an
/// object), each once. (A log level, or anything else, is the full path's to judge.)
fn plain_meta(meta: &str, version: &[u8]) -> bool {
    if meta.as_bytes().first() != Some(&b'{') {
        return false;
    }
    let Ok(index) = json::member_index(meta) else {
        return false;
    };
    let mut seen = [false; 3];
    for (key, at) in index {
        let value = &meta[at..];
        let slot = match key.as_ref() {
            core_meta::PROTOCOL_VERSION => {
                if !Reader::new(value, 1)
                    .string()
                    .is_ok_and(|v| v.as_bytes() == version)
                {
                    return false;
                }
                0
            }
            core_meta::CLIENT_CAPABILITIES if value.starts_with('{') => 1,
            core_meta::CLIENT_INFO if value.starts_with('{') => 2,
            _ => return false,
        };
        if std::mem::replace(&mut seen[slot], true) {
            return false;
        }
    }
    seen[0] && seen[1]
}

impl HttpLane {
    /// The whole HTTP reply to one request, or `false`: the full path serves it. The lane is
    /// not borrowed while a tool runs: the tool may reach the transport's table, which tells
    /// the lane of sessions it takes over or ends.
    #[allow(clippy::too_many_arguments)]
    fn answer(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        head: &Head<'_>,
        body: &[u8],
        now: &Bound<'_, PyAny>,
        now_s: f64,
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> PyResult<bool> {
        let plan = slf.borrow_mut().plan(py, head, body, now_s, out, reply)?;
        let (version, owner, run_tool, unencodable, request) = match plan {
            Plan::Call {
                version,
                owner,
                run_tool,
                unencodable,
                call,
            } => (version, owner, run_tool, unencodable, call),
            Plan::Stateless {
                version,
                serve,
                call,
            } => return HttpLane::serve_stateless(slf, py, &serve, call, &version, out),
            Plan::Answered => return Ok(true),
            Plan::Full => return Ok(false),
        };
        if !call(
            py,
            &run_tool,
            &unencodable,
            request,
            version.bind(py),
            reply,
        )? {
            return Ok(false);
        }
        let this = slf.borrow();
        let session = match owner {
            Owner::Held(session) => Some(session),
            // seen when planned; unless the table took it over while the tool ran
            Owner::Born { id, removals } => match this.births.as_ref() {
                Some(b) if b.removals == removals || b.born.contains_key(id) => None,
                _ => this.sessions.get(id).map(|e| e.session.clone_ref(py)),
            },
        };
        this.json(out, reply);
        drop(this);
        if let Some(session) = session {
            session
                .bind(py)
                .setattr(pyo3::intern!(py, "last_seen"), now)?;
        }
        Ok(true)
    }

    /// What to do with one request: answer it here at once (into `out`), run its tool, or
    /// leave it to the full path.
    fn plan<'a>(
        &mut self,
        py: Python<'_>,
        head: &Head<'a>,
        body: &'a [u8],
        now: f64,
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> PyResult<Plan<'a>> {
        let delete = head.method == b"DELETE";
        if !(delete || head.method == b"POST")
            || head.target != self.path.as_slice()
            || !head.keep_alive
        {
            return Ok(Plan::Full);
        }
        let Some(seen) = Seen::of(head) else {
            return Ok(Plan::Full);
        };
        for (i, value) in seen.learned.iter().enumerate() {
            match value {
                Some(v) if self.learned[i].iter().any(|k| k.as_slice() == *v) => {}
                None if i == ORIGIN => {}
                // the full path judges neither for a DELETE: absent is as good as accepted
                None if delete && (i == ACCEPT || i == CONTENT_TYPE) => {}
                _ => return Ok(Plan::Full),
            }
        }
        if let Some(v) = seen.version {
            if !self.versions.iter().any(|known| known.as_slice() == v) {
                return Ok(if delete || seen.session_id.is_some() {
                    Plan::Full
                } else {
                    self.plan_stateless(py, &seen, v, body)
                });
            }
        }
        let Some(id) = seen.session_id else {
            return if delete {
                Ok(Plan::Full)
            } else {
                self.open_session(py, body, now, out, reply)
            };
        };
        if delete {
            return Ok(self.end_born(id, body, now, out));
        }
        let Some(env) = single(body) else {
            return Ok(Plan::Full);
        };
        let (version, owner) = if let Some(entry) = self.sessions.get(id) {
            if !entry.in_flight.bind(py).is_empty() {
                return Ok(Plan::Full);
            }
            (
                entry.version.clone_ref(py),
                Owner::Held(entry.session.clone_ref(py)),
            )
        } else {
            let Some(births) = self.births.as_mut() else {
                return Ok(Plan::Full);
            };
            let removals = births.removals;
            let Some(born) = births.get(id, now) else {
                return Ok(Plan::Full);
            };
            if births::is_initialized_message(&env) {
                Births::mark_initialized(born, now);
                write_empty(out, &births.accepted_head, &self.date);
                return Ok(Plan::Answered);
            }
            if !born.tools {
                return Ok(Plan::Full);
            }
            born.last_seen = now;
            (born.version.clone_ref(py), Owner::Born { id, removals })
        };
        let Some(call) = tools_call(&env, body) else {
            return Ok(Plan::Full);
        };
        Ok(Plan::Call {
            version,
            owner,
            run_tool: self.run_tool.clone_ref(py),
            unencodable: self.unencodable.clone_ref(py),
            call,
        })
    }

    /// `initialize` answered with a learned reply, the session kept here.
    fn open_session(
        &mut self,
        py: Python<'_>,
        body: &[u8],
        now: f64,
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> PyResult<Plan<'static>> {
        let Some(births) = self.births.as_mut() else {
            return Ok(Plan::Full);
        };
        let Some(init) = births::initialize(body) else {
            return Ok(Plan::Full);
        };
        let Some(rid) = init.env.id.as_ref() else {
            return Ok(Plan::Full);
        };
        let Some((session_id, i)) = births.open(py, &init, body, now)? else {
            return Ok(Plan::Full);
        };
        reply.clear();
        reply.extend_from_slice(write::HEAD);
        reply.extend_from_slice(b",\"id\":");
        write::write_id(reply, rid);
        reply.extend_from_slice(b",\"result\":");
        reply.extend_from_slice(births.result(i));
        reply.push(b'}');
        out.extend_from_slice(&births.opened_head.0);
        out.extend_from_slice(&session_id);
        out.extend_from_slice(&births.opened_head.1);
        end_head(out, reply.len(), &self.date);
        out.extend_from_slice(reply);
        Ok(Plan::Answered)
    }

    /// Run a 2026-07-28 call through `serve`: its whole reply into `out`, or false (nothing ran).
    fn serve_stateless(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        serve: &Py<PyAny>,
        call: Call<'_>,
        version: &Py<PyString>,
        out: &mut Vec<u8>,
    ) -> PyResult<bool> {
        let arguments = match call.arguments {
            Some(text) => pyjson::build_value(py, text)?,
            None => py.None().into_bound(py),
        };
        let id = pyjson::id_to_py(py, &call.id)?;
        let outcome = serve.bind(py).call1((
            PyString::new(py, &call.name),
            arguments,
            version.bind(py),
            id,
        ))?;
        if outcome.is_none() {
            return Ok(false);
        }
        let (head, reply) = outcome.extract::<(Bound<'_, PyBytes>, Bound<'_, PyBytes>)>()?;
        let reply = reply.as_bytes();
        out.extend_from_slice(head.as_bytes());
        end_head(out, reply.len(), &slf.borrow().date);
        out.extend_from_slice(reply);
        Ok(true)
    }

    /// A 2026-07-28 `tools/call` it may answer (in `version`, a header already matched against
    /// the learned values): `Mcp-Method` and `Mcp-Name` as sent agree with the body (a name in
    /// visible ASCII, not in the base64 form), no `Mcp-Param-*` header, params of exactly
    /// `name`, maybe `arguments`, and `_meta` as `plain_meta` says. Anything else goes the full
    /// path, which judges it; `serve` decides the rest (see `allow_stateless`).
    fn plan_stateless<'a>(
        &self,
        py: Python<'_>,
        seen: &Seen<'a>,
        version: &'a [u8],
        body: &'a [u8],
    ) -> Plan<'a> {
        let Some(stateless) = self.stateless.as_ref() else {
            return Plan::Full;
        };
        let Some((_, served)) = stateless
            .versions
            .iter()
            .find(|(v, _)| v.as_slice() == version)
        else {
            return Plan::Full;
        };
        if seen.params || seen.method != Some(TOOLS_CALL) {
            return Plan::Full;
        }
        let Some(named) = seen
            .name
            .filter(|n| !n.starts_with(b"=?") && n.iter().all(|b| (0x20..0x7f).contains(b)))
        else {
            return Plan::Full;
        };
        let Some(env) = single(body) else {
            return Plan::Full;
        };
        let Some((call, Some(meta))) = call_of(&env, body) else {
            return Plan::Full;
        };
        if call.name.as_bytes() != named || !plain_meta(meta, version) {
            return Plan::Full;
        }
        Plan::Stateless {
            version: served.clone_ref(py),
            serve: stateless.serve.clone_ref(py),
            call,
        }
    }

    /// DELETE of a session the lane opened (an empty body only).
    fn end_born(&mut self, id: &[u8], body: &[u8], now: f64, out: &mut Vec<u8>) -> Plan<'static> {
        let Some(births) = self.births.as_mut() else {
            return Plan::Full;
        };
        if !body.is_empty() || births.get(id, now).is_none() {
            return Plan::Full;
        }
        births.end(id);
        write_empty(out, &births.ended_head, &self.date);
        Plan::Answered
    }

    /// A 200 JSON reply.
    fn json(&self, out: &mut Vec<u8>, reply: &[u8]) {
        out.extend_from_slice(&self.json_head);
        end_head(out, reply.len(), &self.date);
        out.extend_from_slice(reply);
    }
}

/// A reply without a body: `head`, then its end.
fn write_empty(out: &mut Vec<u8>, head: &[u8], date: &[u8]) {
    out.extend_from_slice(head);
    end_head(out, 0, date);
}

/// `content-length`, the `date` line and the end of the head.
fn end_head(out: &mut Vec<u8>, length: usize, date: &[u8]) {
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
}

/// What `plan` decided for a request.
enum Plan<'a> {
    /// The full path serves it.
    Full,
    /// Answered: the reply is written.
    Answered,
    /// A tools/call to run (with no borrow of the lane held), for a session of `version`.
    Call {
        version: Py<PyString>,
        owner: Owner<'a>,
        run_tool: Py<PyAny>,
        unencodable: Py<PyAny>,
        call: Call<'a>,
    },
    /// A 2026-07-28 tools/call to run (with no borrow of the lane held) in `version`.
    Stateless {
        version: Py<PyString>,
        serve: Py<PyAny>,
        call: Call<'a>,
    },
}

/// Whose call it is: a session of the table's, or one the lane opened (by id; `removals`: the
/// births' count when it was planned).
enum Owner<'a> {
    Held(Py<PyAny>),
    Born { id: &'a [u8], removals: u64 },
}

/// Run the tools/call in `body` for a session of `version` (its JSON-RPC reply into `reply`);
/// false when it is not one the lane serves (nothing ran).
fn call(
    py: Python<'_>,
    run_tool: &Py<PyAny>,
    unencodable: &Py<PyAny>,
    call: Call<'_>,
    version: &Bound<'_, PyString>,
    reply: &mut Vec<u8>,
) -> PyResult<bool> {
    let arguments = match call.arguments {
        Some(text) => pyjson::build_value(py, text)?,
        None => py.None().into_bound(py),
    };
    let name = PyString::new(py, &call.name);
    let outcome = run_tool.bind(py).call1((name, arguments, version))?;
    if outcome.is_none() {
        return Ok(false);
    }
    let id = &call.id;
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
        // A str is the text of a result of one text content: no dict built to be read here.
        let text = outcome.is_exact_instance_of::<PyString>();
        if text {
            reply.extend_from_slice(TEXT_RESULT.0);
        }
        let written = if text {
            pyjson::write_obj(reply, &outcome, 3)
        } else {
            pyjson::write_body(reply, &outcome)
        };
        if text && written.is_ok() {
            reply.extend_from_slice(TEXT_RESULT.1);
        }
        if let Err(exc) = written {
            let id = pyjson::id_to_py(py, id)?;
            let written = unencodable.bind(py).call1((id, exc.value(py)))?;
            reply.clear();
            reply.extend_from_slice(written.cast::<PyBytes>()?.as_bytes());
        } else {
            reply.push(b'}');
        }
    }
    Ok(true)
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
            births: None,
            stateless: None,
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

    /// Open sessions here too (see `births`): `defaults()` returns the server's current session
    /// defaults, `held` is the table's dict of sessions (with the lane's, at most
    /// `max_sessions`), `idle_timeout` the seconds after which an unused session ends, `id_bytes`
    /// the random bytes of a session id; `opened_head` is the head of an `initialize` reply
    /// with `id_mark` where the session id goes, `accepted_head` and `ended_head` those of a
    /// 202 and of a DELETE's 200 (each up to its length).
    #[pyo3(signature = (defaults, held, max_sessions, idle_timeout, id_bytes, opened_head, id_mark, accepted_head, ended_head))]
    #[allow(clippy::too_many_arguments)]
    fn allow_births(
        &mut self,
        defaults: Py<PyAny>,
        held: Py<PyDict>,
        max_sessions: usize,
        idle_timeout: f64,
        id_bytes: usize,
        opened_head: &[u8],
        id_mark: &[u8],
        accepted_head: &[u8],
        ended_head: &[u8],
    ) -> PyResult<()> {
        let Some(at) = memchr::memmem::find(opened_head, id_mark).filter(|_| !id_mark.is_empty())
        else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "opened_head lacks id_mark",
            ));
        };
        if id_bytes == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "id_bytes must be positive",
            ));
        }
        self.births = Some(Births::new(
            defaults,
            held,
            max_sessions,
            idle_timeout,
            id_bytes,
            (
                opened_head[..at].to_vec(),
                opened_head[at + id_mark.len()..].to_vec(),
            ),
            accepted_head.to_vec(),
            ended_head.to_vec(),
        ));
        Ok(())
    }

    /// Answer 2026-07-28 `tools/call` requests in `versions` (as `plan_stateless` says):
    /// `serve(name, arguments, version, id)` returns `None` (nothing ran: the full path serves
    /// it) or `(head, body)`, the reply's head up to its length and its JSON body.
    fn allow_stateless(&mut self, py: Python<'_>, versions: Vec<String>, serve: Py<PyAny>) {
        let versions = versions
            .into_iter()
            .map(|v| (v.as_bytes().to_vec(), PyString::new(py, &v).unbind()))
            .collect();
        self.stateless = Some(Stateless { versions, serve });
    }

    /// The full path answered an `initialize` asking for `requested` with `result` (the
    /// encoded result object), under the server's session `defaults`: a session of `version`,
    /// admitting `tools/call` directly if `tools`. Ignored unless births are allowed.
    fn learn_initialize(
        &mut self,
        py: Python<'_>,
        requested: &str,
        version: Py<PyString>,
        result: &[u8],
        tools: bool,
        defaults: Py<PyAny>,
    ) {
        if let Some(births) = self.births.as_mut() {
            births.learn(py, requested, version, result, tools, defaults);
        }
    }

    /// Hand over session `session_id` if the lane opened it and it is live at `now`:
    /// `(initialize body, initialized, last_seen)`; the lane forgets it.
    fn take<'py>(
        &mut self,
        py: Python<'py>,
        session_id: &str,
        now: f64,
    ) -> Option<(Bound<'py, PyBytes>, bool, f64)> {
        let births = self.births.as_mut()?;
        let (body, initialized, last_seen) = births.take(session_id.as_bytes(), now)?;
        Some((PyBytes::new(py, &body), initialized, last_seen))
    }

    /// The ids of the live sessions the lane opened (at `now`).
    fn born_ids(&mut self, now: f64) -> Vec<String> {
        let Some(births) = self.births.as_mut() else {
            return Vec::new();
        };
        births.forget_idle(now);
        births
            .born
            .keys()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect()
    }

    /// Sessions the lane opened and holds.
    #[getter]
    fn born(&self) -> usize {
        self.births.as_ref().map_or(0, |b| b.born.len())
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
        slf: &Bound<'py, Self>,
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
            let now_s: f64 = now.extract()?;
            let (max_head, max_body) = {
                let mut this = slf.borrow_mut();
                if answering {
                    this.refresh_date(py)?;
                    if let Some(births) = this.births.as_mut() {
                        births.sweep(now_s);
                    }
                }
                (this.max_head, this.max_body)
            };
            let (at, status, need, reason) = frame(buf, max_head, max_body, |head, body| {
                if answering {
                    if HttpLane::answer(slf, py, head, body, now, now_s, &mut replies, &mut reply)?
                    {
                        answered += 1;
                        return Ok(());
                    }
                    answering = false;
                }
                requests
                    .get_or_insert_with(|| PyList::empty(py))
                    .append(request_tuple(py, head, body)?)
            })?;
            slf.borrow_mut().answered += answered;
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
