//! `HttpLane`: the native HTTP server's short way for the request it serves most, a sync tool
//! called on a session this process holds.
//!
//! The server hands a connection's bytes to `feed` instead of `parse_http`. Each complete
//! request is framed by the same parser and judged by the lane's rules (`mcpfast_core::lane`):
//! one that is a `tools/call` of a session the lane knows, with header values the transport
//! has already accepted once, is answered here: the tool runs through the application's
//! `run_tool` (its only crossing into Python), and the reply is encoded and framed here, so
//! the request makes no header dict, no message object, no session-machine step and no reply
//! tuple. Every other request comes back in `parse_http`'s form for the transport's full path,
//! which holds every rule. This module holds the Python objects and calls: the rules are the
//! core's.
//!
//! What it is told, by the transport (`mcpfast.transports.http`):
//! - `learn(headers)`: after the full path accepted a session POST, its `Host`, `Accept`,
//!   `Content-Type` and `Origin` values;
//! - `add_session`/`drop_session`: the sessions of the table, with their in-flight table,
//!   version and principal (a request id in flight, or a session busy with one, goes the full
//!   path; a session bound to a subject is served to that subject's tokens only);
//! - `require_tokens`, then `learn_token`/`forget_token`/`forget_tokens`: with
//!   authentication, the bearer tokens the full path verified, each until the time it gave
//!   (`mcpfast_core::bearer`);
//! - `count_into`: count what it answers, in a tally a metrics page reads
//!   (`mcpfast_core::tally`);
//! - `run_tool(name, arguments, version)`: `None` (not a plain tool call: the full path serves
//!   it, nothing ran), a result dict, a str (the text of a result of one text content), or
//!   `(code, message, data)` for a JSON-RPC error, whose reply `crate::tool_reply` writes; or,
//!   with `allow_waiting`, a call that waits (an `async def` tool's), which the lane hands to
//!   the transport's `adopt` and back to the server with the answer it waits for (`feed`);
//! - `unencodable_result` and `error_reply`: the session machine's functions for the replies
//!   `crate::tool_reply` does not write itself.

use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use mcpfast_core::admit::{tools_call, Call};
use mcpfast_core::bearer::{self, Subject, Tokens, TOKENS_MAX};
use mcpfast_core::births::{Births, Heads, Step};
use mcpfast_core::envelope::Envelope;
use mcpfast_core::http1::Head;
use mcpfast_core::idhash::IdHash;
use mcpfast_core::lane::{Lane, Learned, Verdict};
use mcpfast_core::tally::{self, Answered, Counts, Layout};

use crate::births::{Consulted, Defaults, PyHost};
use crate::cells::Cells;
use crate::errors;
use crate::http1::{frame, header_key, request_tuple};
use crate::pyjson;
use crate::tool_reply::{self, Encoders};

struct LaneSession {
    session: Py<PyAny>,
    in_flight: Py<PyDict>,
    version: Py<PyString>,
    /// The subject it is bound to (`None`: no authentication).
    principal: Option<Subject>,
}

/// What the lane does with a call that waits (`allow_waiting`).
struct Waiting {
    kind: Py<PyAny>,
    adopt: Py<PyAny>,
}

/// What became of one request.
enum Answer<'py> {
    /// The full path serves it.
    Full,
    /// Answered (written), with what it answered and its status.
    Written(Answered, u16),
    /// A call that waits: the answer the server waits for (the transport's).
    Waits(Bound<'py, PyAny>),
}

/// Where the lane counts what it answers (`count_into`).
struct Tally {
    layout: Layout,
    cells: Cells,
}

#[pyclass(module = "mcpfast._core")]
pub struct HttpLane {
    rules: Lane<Py<PyString>, Defaults>,
    max_head: usize,
    max_body: usize,
    sessions: HashMap<Vec<u8>, LaneSession, IdHash>,
    run_tool: Py<PyAny>,
    encoders: Encoders,
    /// A call that waits: its class, and `adopt` (`allow_waiting`; `None`: none is).
    waiting: Option<Waiting>,
    clock: Py<PyAny>,
    answered: u64,
    /// What the births consult (`allow_births`; `None`: the lane opens no session).
    consulted: Option<Consulted>,
    /// `serve` of 2026-07-28 calls (`allow_stateless`; `None`: none answered).
    serve: Option<Py<PyAny>>,
    /// Where it counts (`count_into`; `None`: it counts nothing but `answered`).
    tally: Option<Tally>,
}

/// What `plan` decided for a request.
enum Plan<'a> {
    /// The full path serves it.
    Full,
    /// Answered: the reply is written, with the status given.
    Answered(Answered, u16),
    /// A tools/call to run (with no borrow of the lane held), for a session of `version`.
    Call {
        version: Py<PyString>,
        owner: Owner<'a>,
        run_tool: Py<PyAny>,
        encoders: Encoders,
        waiting: Option<(Py<PyAny>, Py<PyAny>)>,
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

/// The current Unix time, against which tokens are admitted.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A tally as Python reads it: `(requests, bounds, buckets, nanos)`, `requests` a list of
/// `(label, status, count)`.
type PyCounts = (Vec<(&'static str, u16, u64)>, Vec<u64>, Vec<u64>, u64);

fn py_counts(counts: Counts) -> PyCounts {
    let requests = counts
        .requests
        .into_iter()
        .map(|(answered, status, n)| (answered.label(), status, n))
        .collect();
    (requests, counts.bounds, counts.buckets, counts.nanos)
}

impl HttpLane {
    /// The whole HTTP reply to one request (into `out`), what it answered and its status; or
    /// the full path serves it; or the answer the server waits for, of a call that waits. The
    /// lane is not borrowed while a tool runs: the tool may reach the transport's table, which
    /// tells the lane of sessions it takes over or ends.
    #[allow(clippy::too_many_arguments)]
    fn answer<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        head: &Head<'_>,
        body: &[u8],
        now: &Bound<'py, PyAny>,
        now_s: f64,
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> PyResult<Answer<'py>> {
        let plan = slf.borrow_mut().plan(py, head, body, now_s, out, reply)?;
        let (version, owner, run_tool, encoders, waiting, request) = match plan {
            Plan::Call {
                version,
                owner,
                run_tool,
                encoders,
                waiting,
                call,
            } => (version, owner, run_tool, encoders, waiting, call),
            Plan::Stateless {
                version,
                serve,
                call,
            } => return HttpLane::serve_stateless(slf, py, &serve, call, &version, out),
            Plan::Answered(answered, status) => return Ok(Answer::Written(answered, status)),
            Plan::Full => return Ok(Answer::Full),
        };
        let kind = waiting.as_ref().map(|(kind, _)| kind);
        let pending = match call(
            py,
            &run_tool,
            &encoders,
            kind,
            request,
            version.bind(py),
            reply,
        )? {
            Called::Left => return Ok(Answer::Full),
            Called::Written => None,
            Called::Waits(pending) => Some(pending),
        };
        let this = slf.borrow();
        let (session, born) = match owner {
            Owner::Held(session) => (Some(session), None),
            // seen when planned; unless the table took it over while the tool ran
            Owner::Born { id, removals } => match this.rules.births() {
                Some(b) if b.holds(id, removals) => (None, Some(id)),
                _ => (this.sessions.get(id).map(|e| e.session.clone_ref(py)), None),
            },
        };
        if pending.is_none() {
            this.rules.framing().json(out, reply);
        }
        drop(this);
        if let Some(session) = &session {
            session
                .bind(py)
                .setattr(pyo3::intern!(py, "last_seen"), now)?;
        }
        let (Some(pending), Some((_, adopt))) = (pending, waiting) else {
            return Ok(Answer::Written(Answered::ToolsCall, 200));
        };
        // The session the call belongs to, or the id of one the lane opened (the table takes
        // it over), and the request, which the transport holds in flight from now on.
        let whose = match (session, born) {
            (Some(session), _) => session.into_bound(py),
            (None, Some(id)) => PyString::new(py, &String::from_utf8_lossy(id)).into_any(),
            (None, None) => py.None().into_bound(py),
        };
        let answer = adopt
            .bind(py)
            .call1((pending, whose, PyBytes::new(py, body)))?;
        Ok(Answer::Waits(answer))
    }

    /// Count one request answered as `answered` with `status`, begun at `started`.
    fn count(&self, answered: Answered, status: u16, started: Instant) {
        if let Some(tally) = &self.tally {
            let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            tally
                .layout
                .count(tally.cells.get(), answered, status, nanos);
        }
    }

    /// What to do with one request, as the rules decide it: answer it here at once (into
    /// `out`), run its tool, or leave it to the full path.
    fn plan<'a>(
        &mut self,
        py: Python<'_>,
        head: &Head<'a>,
        body: &'a [u8],
        now: f64,
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> PyResult<Plan<'a>> {
        // the clock is read only for what it judges: a token's time
        let wall = if self.rules.tokens().is_some() {
            unix_now()
        } else {
            0.0
        };
        Ok(match self.rules.decide(head, body, wall) {
            Verdict::Full => Plan::Full,
            Verdict::Open(init) => {
                let Some(consulted) = self.consulted.as_ref() else {
                    return Ok(Plan::Full);
                };
                let mut host = PyHost { py, consulted };
                if self.rules.open(&mut host, &init, body, now, out, reply)? {
                    Plan::Answered(Answered::Initialize, 200)
                } else {
                    Plan::Full
                }
            }
            Verdict::End(id) => {
                if self.rules.end(id, now, out) {
                    Plan::Answered(Answered::Delete, 200)
                } else {
                    Plan::Full
                }
            }
            Verdict::Session {
                id,
                message,
                caller,
            } => self.on_session(py, id, &message, caller.as_deref(), body, now, out),
            Verdict::Stateless { version, call } => {
                match (self.rules.stateless_version(version), self.serve.as_ref()) {
                    (Some(version), Some(serve)) => Plan::Stateless {
                        version: version.clone_ref(py),
                        serve: serve.clone_ref(py),
                        call,
                    },
                    _ => Plan::Full,
                }
            }
        })
    }

    /// A request on session `id` by `caller`: a session of the table's (unless it has a
    /// request in flight, or is bound to another subject), or one the lane opened.
    #[allow(clippy::too_many_arguments)]
    fn on_session<'a>(
        &mut self,
        py: Python<'_>,
        id: &'a [u8],
        message: &Envelope<'a>,
        caller: Option<&str>,
        body: &'a [u8],
        now: f64,
        out: &mut Vec<u8>,
    ) -> Plan<'a> {
        let (version, owner) = if let Some(entry) = self.sessions.get(id) {
            if !bearer::serves(entry.principal.as_deref(), caller)
                || !entry.in_flight.bind(py).is_empty()
            {
                return Plan::Full;
            }
            (
                entry.version.clone_ref(py),
                Owner::Held(entry.session.clone_ref(py)),
            )
        } else if !bearer::serves(None, caller) {
            return Plan::Full; // the births' sessions are bound to no subject
        } else {
            match self.rules.born_request(id, message, now, out) {
                Step::Live { version, removals } => {
                    (version.clone_ref(py), Owner::Born { id, removals })
                }
                Step::Initialized => return Plan::Answered(Answered::Initialized, 202),
                Step::Unknown | Step::Full => return Plan::Full,
            }
        };
        let Some(call) = tools_call(message, body) else {
            return Plan::Full;
        };
        Plan::Call {
            version,
            owner,
            run_tool: self.run_tool.clone_ref(py),
            encoders: self.encoders.clone_ref(py),
            waiting: self
                .waiting
                .as_ref()
                .map(|w| (w.kind.clone_ref(py), w.adopt.clone_ref(py))),
            call,
        }
    }

    /// Run a 2026-07-28 call through `serve`: its whole reply into `out` and its status; or
    /// nothing ran; or, for a call that waits, the answer the server waits for.
    fn serve_stateless<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        serve: &Py<PyAny>,
        call: Call<'_>,
        version: &Py<PyString>,
        out: &mut Vec<u8>,
    ) -> PyResult<Answer<'py>> {
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
            return Ok(Answer::Full);
        }
        if !outcome.is_exact_instance_of::<PyTuple>() {
            return Ok(Answer::Waits(outcome));
        }
        let (status, head, reply) =
            outcome.extract::<(u16, Bound<'_, PyBytes>, Bound<'_, PyBytes>)>()?;
        slf.borrow()
            .rules
            .framing()
            .with_body(out, head.as_bytes(), reply.as_bytes());
        Ok(Answer::Written(Answered::ToolsCall, status))
    }

    /// The `date` line, asked of `clock` again when the second has changed (it formats it).
    fn refresh_date(&mut self, py: Python<'_>) -> PyResult<()> {
        let second = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if self.rules.framing().date_is_stale(second) {
            let line = self.clock.bind(py).call0()?;
            self.rules
                .framing_mut()
                .set_date(second, line.cast::<PyBytes>()?.as_bytes());
        }
        Ok(())
    }
}

/// What running a tools/call came to.
enum Called<'py> {
    /// Not one the lane serves: nothing ran.
    Left,
    /// Its JSON-RPC reply is written.
    Written,
    /// The tool waits: its `PendingCall` (see [`HttpLane::allow_waiting`]).
    Waits(Bound<'py, PyAny>),
}

/// Run the tools/call `call` for a session of `version` (its JSON-RPC reply into `reply`).
fn call<'py>(
    py: Python<'py>,
    run_tool: &Py<PyAny>,
    encoders: &Encoders,
    waiting: Option<&Py<PyAny>>,
    call: Call<'_>,
    version: &Bound<'py, PyString>,
    reply: &mut Vec<u8>,
) -> PyResult<Called<'py>> {
    let arguments = match call.arguments {
        Some(text) => pyjson::build_value(py, text)?,
        None => py.None().into_bound(py),
    };
    let name = PyString::new(py, &call.name);
    let outcome = run_tool.bind(py).call1((&name, arguments, version))?;
    if outcome.is_none() {
        return Ok(Called::Left);
    }
    if let Some(kind) = waiting {
        // (a result is a dict or a str: the usual outcomes are told apart without a look-up)
        if !outcome.is_exact_instance_of::<PyString>()
            && !outcome.is_exact_instance_of::<PyDict>()
            && outcome.is_instance(kind.bind(py))?
        {
            return Ok(Called::Waits(outcome));
        }
    }
    tool_reply::write(reply, &call.id, &name, &outcome, encoders)?;
    Ok(Called::Written)
}

#[pymethods]
impl HttpLane {
    /// `HttpLane(path, versions, json_head, run_tool, unencodable_result, error_reply, clock,
    /// max_head, max_body)`: `versions` are the `MCP-Protocol-Version` values a session
    /// request may carry; `json_head` the status line and headers of a JSON reply before its
    /// length; `unencodable_result` and `error_reply` the session machine's functions (see
    /// `crate::tool_reply`); `clock()` the current `date` header line (asked once a second).
    #[new]
    #[pyo3(signature = (path, versions, json_head, run_tool, unencodable_result, error_reply, clock, max_head, max_body))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: &str,
        versions: Vec<String>,
        json_head: &[u8],
        run_tool: Py<PyAny>,
        unencodable_result: Py<PyAny>,
        error_reply: Py<PyAny>,
        clock: Py<PyAny>,
        max_head: usize,
        max_body: usize,
    ) -> Self {
        HttpLane {
            rules: Lane::new(
                path.as_bytes(),
                versions.into_iter().map(String::into_bytes).collect(),
                json_head.to_vec(),
            ),
            max_head,
            max_body,
            sessions: HashMap::default(),
            run_tool,
            encoders: Encoders::new(unencodable_result, error_reply),
            waiting: None,
            clock,
            answered: 0,
            consulted: None,
            serve: None,
            tally: None,
        }
    }

    /// Remember the `Host`, `Accept`, `Content-Type` and `Origin` values of a request the
    /// full path accepted (lower-case names, as `parse_http` gives them).
    fn learn(&mut self, headers: &Bound<'_, PyDict>) -> PyResult<()> {
        for header in Learned::ALL {
            if !self.rules.learns(header) {
                continue;
            }
            if let Some(value) = headers.get_item(header_key(headers.py(), header.name()))? {
                if let Ok(value) = value.cast::<PyBytes>() {
                    self.rules.learn(header, value.as_bytes());
                }
            }
        }
        Ok(())
    }

    /// Serve `tools/call` for session `session_id`: `session` gets `last_seen` on each call;
    /// `in_flight` is its session machine's table of requests in flight; `principal` the
    /// subject it is bound to (served to that subject's tokens only).
    #[pyo3(signature = (session_id, session, in_flight, version, principal = None))]
    fn add_session(
        &mut self,
        session_id: &str,
        session: Py<PyAny>,
        in_flight: Py<PyDict>,
        version: Py<PyString>,
        principal: Option<&str>,
    ) {
        self.sessions.insert(
            session_id.as_bytes().to_vec(),
            LaneSession {
                session,
                in_flight,
                version,
                principal: principal.map(Subject::from),
            },
        );
    }

    /// Answer only requests whose bearer token the full path verified (`learn_token`), at most
    /// `max` of them held (`mcpfast_core::bearer::TOKENS_MAX` by default; the server
    /// authenticates every request).
    #[pyo3(signature = (max = TOKENS_MAX))]
    fn require_tokens(&mut self, max: usize) {
        self.rules.require_tokens(Tokens::new(max));
    }

    /// The full path verified the bearer token of `authorization` (the header's value) for
    /// `subject`: admit it until `until` (a Unix time no later than its expiry). Whether it is
    /// held (not without `require_tokens`, nor for a value not of the form
    /// `Bearer <token>`).
    fn learn_token(&mut self, authorization: &[u8], subject: &str, until: f64) -> bool {
        match self.rules.tokens_mut() {
            Some(tokens) => tokens.learn(authorization, Subject::from(subject), until, unix_now()),
            None => false,
        }
    }

    /// The full path refused the token of `authorization`: admit it no more.
    fn forget_token(&mut self, authorization: &[u8]) {
        if let Some(tokens) = self.rules.tokens_mut() {
            tokens.forget(authorization);
        }
    }

    /// Admit no token held so far (the keys that signed them changed).
    fn forget_tokens(&mut self) {
        if let Some(tokens) = self.rules.tokens_mut() {
            tokens.clear();
        }
    }

    /// Bearer tokens held.
    #[getter]
    fn tokens(&self) -> usize {
        self.rules.tokens().map_or(0, Tokens::len)
    }

    /// Count every request it answers from now on, by what it answered and its status, and its
    /// time in a histogram of `bounds` (nanoseconds, rising): in `cells` (a writable buffer of
    /// `tally_cells(bounds)` 64-bit items, zeroed, this lane its only writer: a file other
    /// processes read), or in the lane's own memory.
    #[pyo3(signature = (bounds, cells = None))]
    fn count_into(&mut self, bounds: Vec<u64>, cells: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let layout = Layout::new(bounds)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        let cells = match cells {
            Some(buffer) => Cells::shared(buffer)?,
            None => Cells::owned(layout.cells()),
        };
        layout
            .start(cells.get())
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        self.tally = Some(Tally { layout, cells });
        Ok(())
    }

    /// The 64-bit cells a tally of `bounds` takes (`count_into`).
    #[staticmethod]
    fn tally_cells(bounds: Vec<u64>) -> PyResult<usize> {
        Layout::new(bounds)
            .map(|l| l.cells())
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
    }

    /// What it counted (`count_into`): `(requests, bounds, buckets, nanos)`, `requests` a list
    /// of `(label, status, count)`, `buckets` the requests per bucket (not cumulative, the last
    /// past every bound), `nanos` the sum of their times; `None` when it counts nothing.
    fn tally(&self) -> Option<PyCounts> {
        let tally = self.tally.as_ref()?;
        tally::read(tally.cells.get()).map(py_counts)
    }

    /// `tally()` of `cells` (another lane's, in a file it writes): `None` when they hold no
    /// tally yet.
    #[staticmethod]
    fn read_tally(cells: &Bound<'_, PyAny>) -> PyResult<Option<PyCounts>> {
        let cells = Cells::shared(cells)?;
        Ok(tally::read(cells.get()).map(py_counts))
    }

    /// Serve calls that wait too: `run_tool` may return an instance of `kind` (a call of an
    /// `async def` tool still running, `Server.run_tool_inline`'s `PendingCall`), and `serve`
    /// (`allow_stateless`) something other than its reply tuple, the answer the server waits
    /// for. The lane gives such a call to `adopt(call, session, body)`: `session` is the one
    /// the call belongs to (the object of `add_session`), the id of a session the lane opened
    /// (a str: the table takes it over), or `None` when it ended while the tool ran; `body` is
    /// the request's. What `adopt` returns is the answer the server waits for (`feed`).
    fn allow_waiting(&mut self, kind: Py<PyAny>, adopt: Py<PyAny>) {
        self.waiting = Some(Waiting { kind, adopt });
    }

    /// Count a `tools/call` it handed back waiting (`feed`), now that its reply was written:
    /// with `status`, `seconds` after its request came.
    fn count_waited(&self, status: u16, seconds: f64) {
        if let Some(tally) = &self.tally {
            // (a negative or NaN time saturates to 0)
            let nanos = (seconds * 1e9) as u64;
            tally
                .layout
                .count(tally.cells.get(), Answered::ToolsCall, status, nanos);
        }
    }

    /// Forget a session (ended, or no longer one the lane may serve).
    fn drop_session(&mut self, session_id: &str) {
        self.sessions.remove(session_id.as_bytes());
    }

    /// Open sessions here too (see `mcpfast_core::births`): `defaults()` returns the server's
    /// current session defaults, `held` is the table's dict of sessions (with the lane's, at
    /// most `max_sessions`), `idle_timeout` the seconds after which an unused session ends,
    /// `id_bytes` the random bytes of a session id; `opened_head` is the head of an
    /// `initialize` reply with `id_mark` where the session id goes, `accepted_head` and
    /// `ended_head` those of a 202 and of a DELETE's 200 (each up to its length).
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
        let refused = |e: mcpfast_core::births::Refused| {
            pyo3::exceptions::PyValueError::new_err(e.to_string())
        };
        let heads = Heads::new(opened_head, id_mark, accepted_head, ended_head).map_err(refused)?;
        let births = Births::new(max_sessions, idle_timeout, id_bytes, heads).map_err(refused)?;
        self.rules.allow_births(births);
        self.consulted = Some(Consulted { defaults, held });
        Ok(())
    }

    /// Answer 2026-07-28 `tools/call` requests in `versions` (as `mcpfast_core::lane` says):
    /// `serve(name, arguments, version, id)` returns `None` (nothing ran: the full path serves
    /// it) or `(status, head, body)`, the reply's status, its head up to its length and its
    /// JSON body.
    fn allow_stateless(&mut self, py: Python<'_>, versions: Vec<String>, serve: Py<PyAny>) {
        let versions = versions
            .into_iter()
            .map(|v| (v.as_bytes().to_vec(), PyString::new(py, &v).unbind()))
            .collect();
        self.rules.allow_stateless(versions);
        self.serve = Some(serve);
    }

    /// The full path answered an `initialize` asking for `requested` with `result` (the
    /// encoded result object), under the server's session `defaults`: a session of `version`,
    /// admitting `tools/call` directly if `tools`. Ignored unless births are allowed.
    fn learn_initialize(
        &mut self,
        requested: &str,
        version: Py<PyString>,
        result: &[u8],
        tools: bool,
        defaults: Py<PyAny>,
    ) {
        if let Some(births) = self.rules.births_mut() {
            births.learn(requested, version, result, tools, Defaults(defaults));
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
        let births = self.rules.births_mut()?;
        let (body, initialized, last_seen) = births.take(session_id.as_bytes(), now)?;
        Some((PyBytes::new(py, &body), initialized, last_seen))
    }

    /// The ids of the live sessions the lane opened (at `now`).
    fn born_ids(&mut self, now: f64) -> Vec<String> {
        let Some(births) = self.rules.births_mut() else {
            return Vec::new();
        };
        births
            .live_ids(now)
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect()
    }

    /// Sessions the lane opened and holds.
    #[getter]
    fn born(&self) -> usize {
        self.rules.births().map_or(0, Births::len)
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
    /// requests, consumed, status, need, reason, waiting)`: `replies` the bytes to write first
    /// (or `None`) for the requests it answered, `requests` the rest in `parse_http`'s form, in
    /// order; `waiting` (or `None`) `(answer, target)` for a call that waits (`allow_waiting`),
    /// the request after `replies` and before `requests`: `answer` is what the server waits for
    /// (`adopt`'s), `target` the request's. Only the requests before the first one left to the
    /// full path, or the first call that waits, are answered, and none when `idle` is false (an
    /// earlier answer still owns the connection), so replies stay in request order and a
    /// request never runs before those sent ahead of it. `now` is the time put in a served
    /// session's `last_seen`.
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
            let mut waiting: Option<(Bound<'py, PyAny>, Bound<'py, PyBytes>)> = None;
            let mut answering = idle;
            let mut answered = 0u64;
            let now_s: f64 = now.extract()?;
            let (max_head, max_body, counting) = {
                let mut this = slf.borrow_mut();
                if answering {
                    this.refresh_date(py)?;
                    if let Some(births) = this.rules.births_mut() {
                        births.sweep(now_s);
                    }
                }
                (this.max_head, this.max_body, this.tally.is_some())
            };
            let (at, status, need, reason) = frame(buf, max_head, max_body, |head, body| {
                if answering {
                    let started = counting.then(Instant::now);
                    let outcome = HttpLane::answer(
                        slf,
                        py,
                        head,
                        body,
                        now,
                        now_s,
                        &mut replies,
                        &mut reply,
                    )?;
                    match outcome {
                        Answer::Written(what, status) => {
                            if let Some(started) = started {
                                slf.borrow().count(what, status, started);
                            }
                            answered += 1;
                            return Ok(());
                        }
                        Answer::Waits(answer) => {
                            // counted when its reply is written (`count_waited`)
                            waiting = Some((answer, PyBytes::new(py, head.target)));
                            answered += 1;
                            answering = false;
                            return Ok(());
                        }
                        Answer::Full => answering = false,
                    }
                }
                requests
                    .get_or_insert_with(|| PyList::empty(py))
                    .append(request_tuple(py, head, body)?)
            })?;
            slf.borrow_mut().answered += answered;
            if requests.is_none()
                && waiting.is_none()
                && at == buf.len()
                && status == 0
                && !replies.is_empty()
            {
                return Ok(PyBytes::new(py, &replies).into_any());
            }
            let replies = (!replies.is_empty()).then(|| PyBytes::new(py, &replies));
            let requests = requests.unwrap_or_else(|| PyList::empty(py));
            (replies, requests, at, status, need, reason, waiting)
                .into_pyobject(py)
                .map(Bound::into_any)
        })
    }
}
