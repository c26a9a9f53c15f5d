//! Sessions a server's short path opens itself: `initialize`, `notifications/initialized`,
//! `tools/call` and `DELETE` of a session that never needed the server's full session machine.
//!
//! A session's creation is the most expensive request a handshake-era server answers on its
//! full path (a connection, a session machine, a standing stream, a routing hook), and a
//! client that only calls sync tools and leaves never uses any of it. So the short path may
//! answer `initialize` itself with the reply the full path gave before for the same requested
//! version and the same server configuration, and keep the session as a few bytes: the
//! `initialize` body it was opened with, whether `notifications/initialized` came, and when it
//! was last seen. The first request such a session sends that the short path does not answer
//! makes the server's session table take it over ([`Births::take`]): it replays the
//! `initialize` (and the notification) into a new session machine and serves the request as
//! for any session it holds.
//!
//! Nothing is judged here that the full path did not show: `initialize` is answered only for
//! a requested version whose reply was learned from the full path ([`Births::learn`]) while the
//! server's session defaults are still the ones that reply came from (asked of the
//! [`Host`] per `initialize`), and only for params of exactly the members and types the
//! session machine accepts; every other `initialize` goes the full path, which answers and
//! teaches it.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::admit::{members, request_of};
use crate::envelope::{Envelope, Kind};
use crate::idhash::IdHash;
use crate::json::Reader;
use crate::reply::{self, Framing};

const INITIALIZE: &[u8] = b"initialize";
const INITIALIZED: &[u8] = b"notifications/initialized";

/// Replies learned at most (one per requested version a client sends).
const REPLIES_MAX: usize = 16;

/// Random bytes fetched at once for session ids.
const POOL: usize = 4096;

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The `initialize` a body holds, if the short path may answer it: a single request whose
/// params are exactly `protocolVersion` (a string), `capabilities` and `clientInfo` (objects).
#[derive(Debug)]
pub struct Initialize<'a> {
    pub env: Envelope<'a>,
    /// The `protocolVersion` asked for (decoded).
    pub requested: Cow<'a, str>,
}

/// See [`Initialize`].
pub fn initialize(body: &[u8]) -> Option<Initialize<'_>> {
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

/// Whether the single message `env` is exactly a `notifications/initialized` without params.
pub fn is_initialized(env: &Envelope<'_>) -> bool {
    env.kind == Kind::Notification
        && env.part.is_none()
        && env.method.as_ref().map(|m| m.as_bytes()) == Some(INITIALIZED)
}

/// `raw` in base64url without padding (as Python's `secrets.token_urlsafe` writes it).
pub fn base64url(raw: &[u8]) -> Vec<u8> {
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

/// Session ids: `id_bytes` random bytes each, base64url, taken from a pool filled a few
/// thousand bytes at a time.
#[derive(Debug)]
pub struct IdPool {
    id_bytes: usize,
    pool: Vec<u8>,
    pid: u32,
}

impl IdPool {
    pub fn new(id_bytes: usize) -> Self {
        IdPool {
            id_bytes,
            pool: Vec::new(),
            pid: 0,
        }
    }

    /// A new id, in process `pid`; `fill` gives random bytes when the pool runs dry.
    pub fn next<E>(
        &mut self,
        pid: u32,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Vec<u8>, E> {
        if self.pool.len() < self.id_bytes || pid != self.pid {
            // after a fork the pool is the parent's: never hand out the same ids
            self.pool.resize(POOL.max(self.id_bytes), 0);
            fill(&mut self.pool)?;
            self.pid = pid;
        }
        let raw = self.pool.split_off(self.pool.len() - self.id_bytes);
        Ok(base64url(&raw))
    }
}

/// The heads (up to their length) of the replies the births write: an `initialize` reply
/// around its session id, a 202 (a notification) and an ended session's 200.
#[derive(Debug)]
pub struct Heads {
    opened: (Vec<u8>, Vec<u8>),
    accepted: Vec<u8>,
    ended: Vec<u8>,
}

/// Why the births cannot be set up as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The `initialize` reply's head has no place for the session id.
    NoIdMark,
    /// Session ids of no random bytes.
    NoIdBytes,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refused::NoIdMark => "opened_head lacks id_mark",
            Refused::NoIdBytes => "id_bytes must be positive",
        })
    }
}

impl std::error::Error for Refused {}

impl Heads {
    /// `opened` holds `id_mark` where the session id goes.
    pub fn new(
        opened: &[u8],
        id_mark: &[u8],
        accepted: &[u8],
        ended: &[u8],
    ) -> Result<Self, Refused> {
        let at = memchr::memmem::find(opened, id_mark)
            .filter(|_| !id_mark.is_empty())
            .ok_or(Refused::NoIdMark)?;
        Ok(Heads {
            opened: (opened[..at].to_vec(), opened[at + id_mark.len()..].to_vec()),
            accepted: accepted.to_vec(),
            ended: ended.to_vec(),
        })
    }
}

/// What the births ask of their caller: what holds the server's objects, and the system's
/// random bytes. `V` is a session's negotiated version as the caller holds it, `D` the
/// server's session defaults (equal only when they are the same defaults).
pub trait Host<V, D> {
    type Error;
    /// The sessions the server's table holds itself (counted against the limit).
    fn held(&self) -> usize;
    /// The server's current session defaults.
    fn defaults(&mut self) -> Result<D, Self::Error>;
    /// Fills `buf` with random bytes.
    fn random(&mut self, buf: &mut [u8]) -> Result<(), Self::Error>;
    /// Another handle on `version`.
    fn version(&self, version: &V) -> V;
}

/// One learned `initialize` reply.
#[derive(Debug)]
struct Reply<V> {
    /// The `protocolVersion` the client asked for (decoded).
    requested: String,
    /// The negotiated version.
    version: V,
    /// The encoded `result` object.
    result: Vec<u8>,
    /// A session of this version admits `tools/call` directly.
    tools: bool,
}

/// A session opened here and not yet taken over by the table.
#[derive(Debug)]
pub struct Born<V> {
    body: Vec<u8>,
    version: V,
    tools: bool,
    initialized: bool,
    last_seen: f64,
}

/// What a request on session `id` is to the births (see [`Births::request`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Step<'b, V> {
    /// Not a live session of theirs: the full path's.
    Unknown,
    /// `notifications/initialized`: answered (202).
    Initialized,
    /// Anything else on a session whose version does not admit `tools/call` directly.
    Full,
    /// A request on a live session of `version`, seen now: if it is a `tools/call` the short
    /// path may run it; `removals` tells afterwards whether the session may have gone
    /// ([`Births::holds`]).
    Live { version: &'b V, removals: u64 },
}

/// The sessions opened here and the replies they are opened with (see the module doc).
#[derive(Debug)]
pub struct Births<V, D> {
    /// The defaults the replies were learned under.
    learned_under: Option<D>,
    replies: Vec<Reply<V>>,
    born: HashMap<Vec<u8>, Born<V>, IdHash>,
    /// Counts every removal from `born`: unchanged across a tool call, the caller's session is
    /// still there, unlooked-up.
    removals: u64,
    max: usize,
    idle: f64,
    sweep_every: f64,
    swept: f64,
    ids: IdPool,
    heads: Heads,
}

impl<V, D: PartialEq> Births<V, D> {
    /// At most `max` sessions with the table's own; one unused for `idle` seconds ends; ids of
    /// `id_bytes` random bytes.
    pub fn new(max: usize, idle: f64, id_bytes: usize, heads: Heads) -> Result<Self, Refused> {
        if id_bytes == 0 {
            return Err(Refused::NoIdBytes);
        }
        Ok(Births {
            learned_under: None,
            replies: Vec::new(),
            born: HashMap::default(),
            removals: 0,
            max,
            idle,
            sweep_every: (idle / 4.0).clamp(0.05, 30.0),
            swept: 0.0,
            ids: IdPool::new(id_bytes),
            heads,
        })
    }

    /// The full path answered an `initialize` asking for `requested` with `result` (the
    /// encoded result object) under the server's session `defaults`: a session of `version`,
    /// admitting `tools/call` directly if `tools`. Replies learned under other defaults are
    /// forgotten.
    pub fn learn(&mut self, requested: &str, version: V, result: &[u8], tools: bool, defaults: D) {
        let same = self.learned_under.as_ref() == Some(&defaults);
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

    /// Open a session for `init` (the `initialize` that `body` holds) if a reply is learned
    /// for it under the server's current defaults and there is room, writing the whole HTTP
    /// reply into `out` (its JSON-RPC body made in `reply`): whether it did. The defaults are
    /// asked only when a reply is learned; when they changed, every learned reply is
    /// forgotten.
    #[allow(clippy::too_many_arguments)]
    pub fn open<H: Host<V, D>>(
        &mut self,
        host: &mut H,
        init: &Initialize<'_>,
        body: &[u8],
        now: f64,
        framing: &Framing,
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> Result<bool, H::Error> {
        let Some(rid) = init.env.id.as_ref() else {
            return Ok(false);
        };
        if self.born.len() + host.held() >= self.max {
            return Ok(false);
        }
        let Some(i) = self
            .replies
            .iter()
            .position(|r| r.requested == init.requested)
        else {
            return Ok(false);
        };
        let current = host.defaults()?;
        if self.learned_under.as_ref() != Some(&current) {
            self.replies.clear();
            self.learned_under = None;
            return Ok(false);
        }
        let id = self.ids.next(std::process::id(), |buf| host.random(buf))?;
        let learned = &self.replies[i];
        self.born.insert(
            id.clone(),
            Born {
                body: body.to_vec(),
                version: host.version(&learned.version),
                tools: learned.tools,
                initialized: false,
                last_seen: now,
            },
        );
        reply::begin(reply, rid);
        reply.extend_from_slice(reply::RESULT);
        reply.extend_from_slice(&learned.result);
        reply.push(b'}');
        framing.with_value(out, &self.heads.opened, &id, reply);
        Ok(true)
    }

    /// The live session `id` (one idle past the timeout is forgotten here).
    fn get(&mut self, id: &[u8], now: f64) -> Option<&mut Born<V>> {
        live(&mut self.born, &mut self.removals, self.idle, id, now)
    }

    /// A request on session `id` whose single message is `message`, at `now`: a
    /// `notifications/initialized` is answered into `out` here.
    pub fn request(
        &mut self,
        id: &[u8],
        message: &Envelope<'_>,
        now: f64,
        framing: &Framing,
        out: &mut Vec<u8>,
    ) -> Step<'_, V> {
        let removals = self.removals;
        let Some(born) = live(&mut self.born, &mut self.removals, self.idle, id, now) else {
            return Step::Unknown;
        };
        if is_initialized(message) {
            born.initialized = true;
            born.last_seen = now;
            framing.empty(out, &self.heads.accepted);
            return Step::Initialized;
        }
        if !born.tools {
            return Step::Full;
        }
        born.last_seen = now;
        Step::Live {
            version: &born.version,
            removals,
        }
    }

    /// Whether session `id`, [`Step::Live`] with `removals`, is surely still one of theirs.
    pub fn holds(&self, id: &[u8], removals: u64) -> bool {
        self.removals == removals || self.born.contains_key(id)
    }

    /// End the live session `id` (a DELETE), its reply written into `out`: whether it was one.
    pub fn end(&mut self, id: &[u8], now: f64, framing: &Framing, out: &mut Vec<u8>) -> bool {
        if self.get(id, now).is_none() {
            return false;
        }
        self.born.remove(id);
        self.removals += 1;
        framing.empty(out, &self.heads.ended);
        true
    }

    /// Forget the sessions idle past the timeout, at most once per sweep period.
    pub fn sweep(&mut self, now: f64) {
        if now - self.swept >= self.sweep_every {
            self.forget_idle(now);
        }
    }

    /// Forget the sessions idle past the timeout.
    fn forget_idle(&mut self, now: f64) {
        self.swept = now;
        let idle = self.idle;
        self.born.retain(|_, b| now - b.last_seen < idle);
        self.removals += 1;
    }

    /// The ids of the live sessions at `now` (the others are forgotten).
    pub fn live_ids(&mut self, now: f64) -> impl Iterator<Item = &[u8]> {
        self.forget_idle(now);
        self.born.keys().map(Vec::as_slice)
    }

    /// The sessions held (live or not yet swept).
    pub fn len(&self) -> usize {
        self.born.len()
    }

    pub fn is_empty(&self) -> bool {
        self.born.is_empty()
    }

    /// Hand the live session `id` over: `(initialize body, initialized, last_seen)`.
    pub fn take(&mut self, id: &[u8], now: f64) -> Option<(Vec<u8>, bool, f64)> {
        self.get(id, now)?;
        let born = self.born.remove(id)?;
        self.removals += 1;
        Some((born.body, born.initialized, born.last_seen))
    }
}

/// The live session `id` of `born` (one idle for `idle` seconds at `now` is removed, and
/// counted in `removals`).
fn live<'b, V>(
    born: &'b mut HashMap<Vec<u8>, Born<V>, IdHash>,
    removals: &mut u64,
    idle: f64,
    id: &[u8],
    now: f64,
) -> Option<&'b mut Born<V>> {
    let expired = born.get(id).is_some_and(|b| now - b.last_seen >= idle);
    if expired {
        born.remove(id);
        *removals += 1;
        return None;
    }
    born.get_mut(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit::single;

    #[test]
    fn base64url_is_the_unpadded_url_alphabet() {
        assert_eq!(base64url(b""), b"");
        assert_eq!(base64url(b"f"), b"Zg");
        assert_eq!(base64url(b"fo"), b"Zm8");
        assert_eq!(base64url(b"foo"), b"Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff, 0xfe]), b"-__-");
        assert_eq!(base64url(&[0u8; 24]).len(), 32);
    }

    const INIT: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;

    fn is_initialized_body(body: &[u8]) -> bool {
        single(body).is_some_and(|env| is_initialized(&env))
    }

    #[test]
    fn only_a_plain_initialize_is_recognised() {
        assert_eq!(
            initialize(INIT).map(|i| i.requested.into_owned()),
            Some("2025-11-25".into())
        );
        for bad in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":{},"clientInfo":{}}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":[],"clientInfo":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":{},"clientInfo":"c"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":{},"clientInfo":{},"_meta":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","protocolVersion":"v","clientInfo":{}}}"#,
            br#"{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"v","capabilities":{},"clientInfo":{}}}"#,
            br#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"v","capabilities":{},"clientInfo":{}}}]"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"protocolVersion":"v","capabilities":{},"clientInfo":{}}}"#,
        ] {
            assert!(initialize(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn only_a_bare_initialized_notification_is_recognised() {
        assert!(is_initialized_body(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        ));
        assert!(!is_initialized_body(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#
        ));
        assert!(!is_initialized_body(
            br#"{"jsonrpc":"2.0","id":1,"method":"notifications/initialized"}"#
        ));
        assert!(!is_initialized_body(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#
        ));
    }

    #[test]
    fn the_id_pool_refills_when_dry_and_after_a_fork() {
        let mut pool = IdPool::new(3);
        let mut fills = 0u8;
        let mut fill = |buf: &mut [u8]| -> Result<(), ()> {
            fills += 1;
            buf.fill(fills);
            Ok(())
        };
        let first = pool.next(10, &mut fill).expect("an id");
        assert_eq!(first, base64url(&[1, 1, 1]));
        assert_eq!(first.len(), 4);
        assert_eq!(pool.next(10, &mut fill), Ok(base64url(&[1, 1, 1])));
        // another process: fresh bytes, never the parent's
        assert_eq!(pool.next(11, &mut fill), Ok(base64url(&[2, 2, 2])));
        // dry after POOL / 3 ids
        for _ in 0..POOL / 3 - 1 {
            assert_eq!(pool.next(11, &mut fill), Ok(base64url(&[2, 2, 2])));
        }
        assert_eq!(pool.next(11, &mut fill), Ok(base64url(&[3, 3, 3])));
        let mut failing = IdPool::new(3);
        assert_eq!(failing.next(1, |_| Err("no entropy")), Err("no entropy"));
    }

    #[test]
    fn heads_need_a_mark_and_ids_need_bytes() {
        assert_eq!(
            Heads::new(b"H\r\n", b"@ID@", b"A", b"E").err(),
            Some(Refused::NoIdMark)
        );
        assert_eq!(
            Heads::new(b"H\r\n", b"", b"A", b"E").err(),
            Some(Refused::NoIdMark)
        );
        assert_eq!(Refused::NoIdMark.to_string(), "opened_head lacks id_mark");
        let heads = Heads::new(b"H\r\nid: @ID@\r\n", b"@ID@", b"A", b"E").expect("heads");
        assert_eq!(
            Births::<u8, u8>::new(1, 1.0, 0, heads).err(),
            Some(Refused::NoIdBytes)
        );
        assert_eq!(Refused::NoIdBytes.to_string(), "id_bytes must be positive");
    }

    /// A host whose version handles are strings and whose defaults are numbers.
    struct Fake {
        held: usize,
        defaults: u32,
        asked: u32,
    }

    impl Host<String, u32> for Fake {
        type Error = &'static str;
        fn held(&self) -> usize {
            self.held
        }
        fn defaults(&mut self) -> Result<u32, &'static str> {
            self.asked += 1;
            Ok(self.defaults)
        }
        fn random(&mut self, buf: &mut [u8]) -> Result<(), &'static str> {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = i as u8;
            }
            Ok(())
        }
        fn version(&self, version: &String) -> String {
            version.clone()
        }
    }

    const DATE: &[u8] = b"date: D\r\n";

    fn setup(max: usize) -> (Births<String, u32>, Fake, Framing) {
        let heads = Heads::new(
            b"H200\r\nmcp-session-id: @\r\n",
            b"@",
            b"H202\r\n",
            b"H200e\r\n",
        )
        .expect("heads");
        let births = Births::new(max, 10.0, 3, heads).expect("births");
        let mut framing = Framing::new(b"J\r\n".to_vec());
        framing.set_date(1, DATE);
        let host = Fake {
            held: 0,
            defaults: 1,
            asked: 0,
        };
        (births, host, framing)
    }

    /// Opens a session for INIT at `now`: its id, or None.
    fn open(
        births: &mut Births<String, u32>,
        host: &mut Fake,
        framing: &Framing,
        now: f64,
    ) -> Option<Vec<u8>> {
        let init = initialize(INIT).expect("initialize");
        let (mut out, mut reply) = (Vec::new(), Vec::new());
        let opened = births
            .open(host, &init, INIT, now, framing, &mut out, &mut reply)
            .expect("no host error");
        if !opened {
            assert!(out.is_empty());
            return None;
        }
        let text = String::from_utf8(out).expect("ascii");
        let id = text
            .strip_prefix("H200\r\nmcp-session-id: ")
            .and_then(|t| t.split("\r\n").next())
            .expect("the id in the head")
            .as_bytes()
            .to_vec();
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"v":1}}"#;
        assert!(
            text.ends_with(&format!(
                "\r\ncontent-length: {}\r\ndate: D\r\n\r\n{body}",
                body.len()
            )),
            "{text}"
        );
        Some(id)
    }

    #[test]
    fn a_session_opens_only_with_a_learned_reply_under_the_same_defaults() {
        let (mut births, mut host, framing) = setup(4);
        assert_eq!(
            open(&mut births, &mut host, &framing, 0.0),
            None,
            "nothing learned"
        );
        assert_eq!(
            host.asked, 0,
            "the defaults are asked only for a learned reply"
        );
        births.learn("2025-06-18", "v1".into(), br#"{"v":0}"#, true, 1);
        assert_eq!(
            open(&mut births, &mut host, &framing, 0.0),
            None,
            "another version"
        );
        births.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 1);
        let id = open(&mut births, &mut host, &framing, 0.0).expect("opened");
        assert_eq!(id.len(), 4);
        assert_eq!(births.len(), 1);
        host.defaults = 2;
        assert_eq!(
            open(&mut births, &mut host, &framing, 0.0),
            None,
            "new defaults"
        );
        host.defaults = 1;
        assert_eq!(
            open(&mut births, &mut host, &framing, 0.0),
            None,
            "the replies were forgotten"
        );
        births.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 1);
        assert!(open(&mut births, &mut host, &framing, 0.0).is_some());
    }

    #[test]
    fn learning_under_other_defaults_forgets_the_others() {
        let (mut births, mut host, framing) = setup(4);
        births.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 1);
        births.learn("2025-06-18", "v1".into(), br#"{"v":0}"#, true, 2);
        host.defaults = 2;
        assert_eq!(open(&mut births, &mut host, &framing, 0.0), None);
        // relearning a version replaces its reply; at most REPLIES_MAX are kept
        births.learn("2025-11-25", "v2".into(), br#"{"v":9}"#, true, 2);
        births.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 2);
        assert!(open(&mut births, &mut host, &framing, 0.0).is_some());
        let (mut full, mut host, framing) = setup(4);
        for n in 0..REPLIES_MAX {
            full.learn(&format!("v{n}"), String::new(), b"{}", true, 1);
        }
        full.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 1);
        assert_eq!(
            open(&mut full, &mut host, &framing, 0.0),
            None,
            "no room to learn"
        );
    }

    #[test]
    fn sessions_are_counted_with_the_tables() {
        let (mut births, mut host, framing) = setup(2);
        births.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 1);
        host.held = 1;
        assert!(open(&mut births, &mut host, &framing, 0.0).is_some());
        assert_eq!(open(&mut births, &mut host, &framing, 0.0), None, "full");
        host.held = 0;
        assert!(open(&mut births, &mut host, &framing, 0.0).is_some());
        assert_eq!(births.len(), 2);
    }

    fn message(body: &[u8]) -> Envelope<'_> {
        single(body).expect("a message")
    }

    #[test]
    fn requests_on_a_born_session() {
        let (mut births, mut host, framing) = setup(4);
        births.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 1);
        births.learn("2024-11-05", "v0".into(), br#"{"v":1}"#, false, 1);
        let id = open(&mut births, &mut host, &framing, 0.0).expect("opened");
        let notified = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"e"}}"#;
        let mut out = Vec::new();
        assert_eq!(
            births.request(b"nope", &message(call), 1.0, &framing, &mut out),
            Step::Unknown
        );
        assert_eq!(
            births.request(&id, &message(notified), 1.0, &framing, &mut out),
            Step::Initialized
        );
        assert_eq!(out, b"H202\r\ncontent-length: 0\r\ndate: D\r\n\r\n");
        out.clear();
        let version = "v2".to_owned();
        assert_eq!(
            births.request(&id, &message(call), 2.0, &framing, &mut out),
            Step::Live {
                version: &version,
                removals: 0
            }
        );
        assert!(out.is_empty());
        assert!(births.holds(&id, 0));
        assert_eq!(births.take(&id, 3.0), Some((INIT.to_vec(), true, 2.0)));
        assert!(!births.holds(&id, 0), "taken over");
        assert_eq!(births.take(&id, 3.0), None);

        // a version without direct tools/call: only the notification is answered
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{}}}"#;
        let (mut o, mut r) = (Vec::new(), Vec::new());
        let parsed = initialize(init).expect("initialize");
        assert!(births
            .open(&mut host, &parsed, init, 0.0, &framing, &mut o, &mut r)
            .expect("no host error"));
        let old = births.live_ids(0.0).next().expect("one").to_vec();
        assert_eq!(
            births.request(&old, &message(call), 1.0, &framing, &mut out),
            Step::Full
        );
        assert_eq!(births.take(&old, 1.0), Some((init.to_vec(), false, 0.0)));
    }

    #[test]
    fn an_idle_session_ends() {
        let (mut births, mut host, framing) = setup(4);
        births.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 1);
        let a = open(&mut births, &mut host, &framing, 0.0).expect("opened");
        let b = open(&mut births, &mut host, &framing, 5.0).expect("opened");
        let c = open(&mut births, &mut host, &framing, 6.0).expect("opened");
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"e"}}"#;
        let mut out = Vec::new();
        // `a` is idle for the timeout: gone when asked for
        assert_eq!(
            births.request(&a, &message(call), 10.0, &framing, &mut out),
            Step::Unknown
        );
        assert!(!births.holds(&a, 0));
        assert_eq!(births.len(), 2);
        // a sweep forgets every idle one, at most once per period (idle / 4)
        births.sweep(15.0);
        assert_eq!(births.len(), 1, "b went");
        births.sweep(16.5);
        assert_eq!(births.len(), 1, "too soon to sweep again");
        births.sweep(17.5);
        assert!(births.is_empty(), "c went");
        assert_eq!(births.take(&b, 0.0), None);
        assert!(!births.end(&c, 0.0, &framing, &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn a_delete_ends_a_live_session() {
        let (mut births, mut host, framing) = setup(4);
        births.learn("2025-11-25", "v2".into(), br#"{"v":1}"#, true, 1);
        let id = open(&mut births, &mut host, &framing, 0.0).expect("opened");
        let mut out = Vec::new();
        assert!(!births.end(b"other", 1.0, &framing, &mut out));
        assert!(out.is_empty());
        assert!(births.end(&id, 1.0, &framing, &mut out));
        assert_eq!(out, b"H200e\r\ncontent-length: 0\r\ndate: D\r\n\r\n");
        assert!(births.is_empty());
        assert!(!births.holds(&id, 0));
        assert_eq!(births.live_ids(1.0).count(), 0);
    }
}
