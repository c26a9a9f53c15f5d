//! Sessions the lane opens itself: `initialize`, `notifications/initialized`, `tools/call` and
//! `DELETE` of a session that never needed its Python side.
//!
//! A session's creation is the most expensive request a handshake-era server answers in Python
//! (a connection, a session machine, a standing stream, a routing hook), and a client that only
//! calls sync tools and leaves never uses any of it. So the lane may answer `initialize` itself
//! with the reply the full path gave before for the same requested version and the same server
//! configuration, and keep the session as a few bytes: the `initialize` body it was opened with,
//! whether `notifications/initialized` came, and when it was last seen. The first request such a
//! session sends that the lane does not answer makes the transport's table take it over (`take`):
//! it replays the `initialize` (and the notification) into a new session machine, whose reply it
//! drops, and serves the request as for any session it holds.
//!
//! The lane judges nothing it was not shown: it answers `initialize` only for a requested version
//! whose reply it learned from the full path (`learn_initialize`) while the server's session
//! defaults are still the ones that reply came from (asked of `defaults()` per `initialize`), and
//! only for params of exactly the members and types the session machine accepts; every other
//! `initialize` goes the full path, which answers and teaches it.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use mcpfast_core::envelope::{Envelope, Kind};
use mcpfast_core::json::Reader;

use mcpfast_core::idhash::IdHash;

use crate::lane::{members, request_of};

const INITIALIZE: &[u8] = b"initialize";
const INITIALIZED: &[u8] = b"notifications/initialized";

/// Replies learned at most (one per requested version a client sends).
const REPLIES_MAX: usize = 16;

/// Random bytes fetched at once for session ids.
const POOL: usize = 4096;

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// One learned `initialize` reply.
struct Reply {
    /// The `protocolVersion` the client asked for (decoded).
    requested: String,
    /// The negotiated version, as the table's sessions hold it.
    version: Py<PyString>,
    /// The encoded `result` object.
    result: Vec<u8>,
    /// A session of this version admits `tools/call` directly (so the lane may serve it).
    tools: bool,
}

/// A session opened by the lane and not yet taken over by the table.
pub(crate) struct Born {
    body: Vec<u8>,
    pub(crate) version: Py<PyString>,
    pub(crate) tools: bool,
    initialized: bool,
    pub(crate) last_seen: f64,
}

/// The `initialize` a body holds, if the lane may answer it: a single request whose params are
/// exactly `protocolVersion` (a string), `capabilities` and `clientInfo` (objects).
pub(crate) struct Initialize<'a> {
    pub(crate) env: Envelope<'a>,
    requested: std::borrow::Cow<'a, str>,
}

pub(crate) fn initialize(body: &[u8]) -> Option<Initialize<'_>> {
    let (env, text) = request_of(body, INITIALIZE)?;
    let [Some(requested), Some(caps), Some(info)] = members(
        &env,
        body,
        [b"protocolVersion", b"capabilities", b"clientInfo"],
    )?
    else {
        return None;
    };
    if body.get(caps.start) != Some(&b'{') || body.get(info.start) != Some(&b'{') {
        return None;
    }
    let requested = Reader::new(text.get(requested)?, 1).string().ok()?;
    Some(Initialize { env, requested })
}

/// Whether `body` is exactly a `notifications/initialized` without params.
#[cfg(test)]
fn is_initialized(body: &[u8]) -> bool {
    crate::lane::single(body).is_some_and(|env| is_initialized_message(&env))
}

/// Whether the single message `env` is exactly a `notifications/initialized` without params.
pub(crate) fn is_initialized_message(env: &Envelope<'_>) -> bool {
    env.kind == Kind::Notification
        && env.part.is_none()
        && env.method.as_ref().map(|m| m.as_bytes()) == Some(INITIALIZED)
}

/// What the lane needs to open sessions (see the module doc).
pub(crate) struct Births {
    /// `defaults()`: the server's current session defaults (an object that changes identity
    /// when anything an `initialize` reply holds changes).
    defaults: Py<PyAny>,
    /// The defaults the replies were learned under.
    learned_under: Option<Py<PyAny>>,
    replies: Vec<Reply>,
    pub(crate) born: HashMap<Vec<u8>, Born, IdHash>,
    /// Counts every removal from `born`: unchanged across a tool call, the caller's session is
    /// still there, unlooked-up.
    pub(crate) removals: u64,
    /// The table's own sessions (counted against `max`).
    held: Py<PyDict>,
    max: usize,
    idle: f64,
    sweep_every: f64,
    swept: f64,
    id_bytes: usize,
    pool: Vec<u8>,
    pool_pid: u32,
    /// The head of an `initialize` reply around the session id, up to its length.
    pub(crate) opened_head: (Vec<u8>, Vec<u8>),
    /// The heads of 202 (a notification) and of an ended session's 200, up to their length.
    pub(crate) accepted_head: Vec<u8>,
    pub(crate) ended_head: Vec<u8>,
}

impl Births {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        defaults: Py<PyAny>,
        held: Py<PyDict>,
        max: usize,
        idle: f64,
        id_bytes: usize,
        opened_head: (Vec<u8>, Vec<u8>),
        accepted_head: Vec<u8>,
        ended_head: Vec<u8>,
    ) -> Self {
        Births {
            defaults,
            learned_under: None,
            replies: Vec::new(),
            born: HashMap::default(),
            removals: 0,
            held,
            max,
            idle,
            sweep_every: (idle / 4.0).clamp(0.05, 30.0),
            swept: 0.0,
            id_bytes,
            pool: Vec::new(),
            pool_pid: 0,
            opened_head,
            accepted_head,
            ended_head,
        }
    }

    pub(crate) fn learn(
        &mut self,
        py: Python<'_>,
        requested: &str,
        version: Py<PyString>,
        result: &[u8],
        tools: bool,
        defaults: Py<PyAny>,
    ) {
        let same = self
            .learned_under
            .as_ref()
            .is_some_and(|d| d.bind(py).is(defaults.bind(py)));
        if !same {
            self.replies.clear();
            self.learned_under = Some(defaults);
        }
        self.replies.retain(|r| r.requested != requested);
        if self.replies.len() >= REPLIES_MAX {
            return;
        }
        self.replies.push(Reply {
            requested: requested.to_owned(),
            version,
            result: result.to_vec(),
            tools,
        });
    }

    /// The learned reply for `requested`, if the server's defaults are still those it was
    /// learned under (else every learned reply is forgotten).
    fn reply_for(&mut self, py: Python<'_>, requested: &str) -> PyResult<Option<usize>> {
        let Some(i) = self.replies.iter().position(|r| r.requested == requested) else {
            return Ok(None);
        };
        let current = self.defaults.bind(py).call0()?;
        let same = self
            .learned_under
            .as_ref()
            .is_some_and(|d| d.bind(py).is(&current));
        if !same {
            self.replies.clear();
            self.learned_under = None;
            return Ok(None);
        }
        Ok(Some(i))
    }

    fn has_room(&self, py: Python<'_>) -> bool {
        self.born.len() + self.held.bind(py).len() < self.max
    }

    /// A new session id: `id_bytes` random bytes, base64url without padding (as
    /// `secrets.token_urlsafe` makes them).
    fn new_id(&mut self) -> PyResult<Vec<u8>> {
        let pid = std::process::id();
        if self.pool.len() < self.id_bytes || pid != self.pool_pid {
            // after a fork the pool is the parent's: never hand out the same ids
            self.pool.resize(POOL.max(self.id_bytes), 0);
            getrandom::getrandom(&mut self.pool).map_err(|e| {
                pyo3::exceptions::PyOSError::new_err(format!(
                    "no random bytes for a session id: {e}"
                ))
            })?;
            self.pool_pid = pid;
        }
        let raw = self.pool.split_off(self.pool.len() - self.id_bytes);
        Ok(base64url(&raw))
    }

    /// Open a session for `init` if a reply is learned and there is room: `(id, result)`.
    pub(crate) fn open(
        &mut self,
        py: Python<'_>,
        init: &Initialize<'_>,
        body: &[u8],
        now: f64,
    ) -> PyResult<Option<(Vec<u8>, usize)>> {
        if !self.has_room(py) {
            return Ok(None);
        }
        let Some(i) = self.reply_for(py, &init.requested)? else {
            return Ok(None);
        };
        let id = self.new_id()?;
        let reply = &self.replies[i];
        self.born.insert(
            id.clone(),
            Born {
                body: body.to_vec(),
                version: reply.version.clone_ref(py),
                tools: reply.tools,
                initialized: false,
                last_seen: now,
            },
        );
        Ok(Some((id, i)))
    }

    pub(crate) fn result(&self, i: usize) -> &[u8] {
        &self.replies[i].result
    }

    /// The live session `id` (one idle past the timeout is forgotten here).
    pub(crate) fn get(&mut self, id: &[u8], now: f64) -> Option<&mut Born> {
        let idle = self.idle;
        let expired = self.born.get(id).is_some_and(|b| now - b.last_seen >= idle);
        if expired {
            self.born.remove(id);
            self.removals += 1;
            return None;
        }
        self.born.get_mut(id)
    }

    pub(crate) fn mark_initialized(born: &mut Born, now: f64) {
        born.initialized = true;
        born.last_seen = now;
    }

    pub(crate) fn end(&mut self, id: &[u8]) {
        self.born.remove(id);
        self.removals += 1;
    }

    /// Forget the sessions idle past the timeout, at most once per sweep period.
    pub(crate) fn sweep(&mut self, now: f64) {
        if now - self.swept >= self.sweep_every {
            self.forget_idle(now);
        }
    }

    /// Forget the sessions idle past the timeout.
    pub(crate) fn forget_idle(&mut self, now: f64) {
        self.swept = now;
        let idle = self.idle;
        self.born.retain(|_, b| now - b.last_seen < idle);
        self.removals += 1;
    }

    /// Hand session `id` over: `(initialize body, initialized, last_seen)`.
    pub(crate) fn take(&mut self, id: &[u8], now: f64) -> Option<(Vec<u8>, bool, f64)> {
        self.get(id, now)?;
        let born = self.born.remove(id)?;
        self.removals += 1;
        Some((born.body, born.initialized, born.last_seen))
    }
}

fn base64url(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len().div_ceil(3) * 4);
    for chunk in raw.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for k in 0..chars {
            out.push(BASE64URL[((n >> (18 - 6 * k)) & 63) as usize]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_is_the_unpadded_url_alphabet() {
        assert_eq!(base64url(b""), b"");
        assert_eq!(base64url(b"f"), b"Zg");
        assert_eq!(base64url(b"fo"), b"Zm8");
        assert_eq!(base64url(b"foo"), b"Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff, 0xfe]), b"-__-");
        assert_eq!(base64url(&[0u8; 24]).len(), 32);
    }

    #[test]
    fn only_a_plain_initialize_is_recognised() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
        assert_eq!(
            initialize(ok).map(|i| i.requested.into_owned()),
            Some("2025-11-25".into())
        );
        for bad in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":{},"clientInfo":{}}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":[],"clientInfo":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":{},"clientInfo":{},"_meta":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","protocolVersion":"v","clientInfo":{}}}"#,
            br#"{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"v","capabilities":{},"clientInfo":{}}}"#,
            br#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":{},"clientInfo":{}}}]"#,
        ] {
            assert!(initialize(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(is_initialized(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        ));
        assert!(!is_initialized(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#
        ));
        assert!(!is_initialized(
            br#"{"jsonrpc":"2.0","id":1,"method":"notifications/initialized"}"#
        ));
    }
}
