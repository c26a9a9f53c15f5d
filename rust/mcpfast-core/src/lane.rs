//! The rules of a server's short path over HTTP: which requests it may answer without its full
//! path, decided from the request's head and body alone ([`Lane::decide`]), and what it was
//! told by the full path to decide them.
//!
//! The full path holds every rule; the lane answers only requests whose every check the full
//! path would pass, and says nothing it has not been told:
//! - the `Host`, `Accept`, `Content-Type` and `Origin` values of requests the full path
//!   accepted ([`Lane::learn`]; a few of each kept, others go the full path);
//! - the `MCP-Protocol-Version` values a session request may carry;
//! - the 2026-07-28 versions whose `tools/call` it may answer ([`Lane::allow_stateless`]);
//! - whether it opens sessions itself ([`Lane::allow_births`], see [`crate::births`]);
//! - with authentication, the bearer tokens the full path verified ([`Lane::require_tokens`],
//!   see [`crate::bearer`]): then a request needs one it holds, and a session request names
//!   the token's subject ([`Verdict::Session`]'s `caller`), which the caller matches against
//!   the session's ([`crate::bearer::serves`]); the births open no session (theirs would be
//!   bound to no subject).
//!
//! [`Lane::decide`] returns a [`Verdict`] that its caller acts on: the caller holds the
//! server's sessions and tools, runs them, and writes the replies through the lane's
//! [`Framing`].

use crate::admit::{call_of, plain_meta, single, Call, TOOLS_CALL};
use crate::bearer::{Subject, Tokens};
use crate::births::{self, Births, Host, Initialize, Step};
use crate::envelope::Envelope;
use crate::http1::Head;
use crate::reply::Framing;

/// Values kept per learned header: enough for every client of a deployment, bounded against a
/// client that varies them.
pub const LEARNED_MAX: usize = 64;

/// The headers whose values the lane learns from requests the full path accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned {
    Host = 0,
    Accept = 1,
    ContentType = 2,
    Origin = 3,
}

impl Learned {
    pub const ALL: [Learned; 4] = [
        Learned::Host,
        Learned::Accept,
        Learned::ContentType,
        Learned::Origin,
    ];

    /// The header's name, lower-case.
    pub fn name(self) -> &'static [u8] {
        match self {
            Learned::Host => b"host",
            Learned::Accept => b"accept",
            Learned::ContentType => b"content-type",
            Learned::Origin => b"origin",
        }
    }
}

/// The headers a session POST is judged by, each present at most once.
#[derive(Default)]
struct Seen<'a> {
    learned: [Option<&'a [u8]>; 4],
    session_id: Option<&'a [u8]>,
    version: Option<&'a [u8]>,
    method: Option<&'a [u8]>,
    name: Option<&'a [u8]>,
    authorization: Option<&'a [u8]>,
    /// An `Mcp-Param-*` header came (the full path judges those).
    params: bool,
}

impl<'a> Seen<'a> {
    /// `None` when one of them is repeated (the full path joins repeats and judges the result).
    fn of(head: &Head<'a>) -> Option<Self> {
        let mut seen = Seen::default();
        for &(name, value) in &head.headers {
            let slot = match name.len() {
                4 if name.eq_ignore_ascii_case(b"host") => {
                    &mut seen.learned[Learned::Host as usize]
                }
                6 if name.eq_ignore_ascii_case(b"accept") => {
                    &mut seen.learned[Learned::Accept as usize]
                }
                6 if name.eq_ignore_ascii_case(b"origin") => {
                    &mut seen.learned[Learned::Origin as usize]
                }
                12 if name.eq_ignore_ascii_case(b"content-type") => {
                    &mut seen.learned[Learned::ContentType as usize]
                }
                14 if name.eq_ignore_ascii_case(b"mcp-session-id") => &mut seen.session_id,
                20 if name.eq_ignore_ascii_case(b"mcp-protocol-version") => &mut seen.version,
                10 if name.eq_ignore_ascii_case(b"mcp-method") => &mut seen.method,
                8 if name.eq_ignore_ascii_case(b"mcp-name") => &mut seen.name,
                13 if name.eq_ignore_ascii_case(b"authorization") => &mut seen.authorization,
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

/// What the lane decided for one request.
#[derive(Debug)]
pub enum Verdict<'a> {
    /// The full path serves it.
    Full,
    /// A POST without a session: an `initialize` the births may answer ([`Lane::open`]).
    Open(Initialize<'a>),
    /// A DELETE (with an empty body) of session `id`, which the births may end ([`Lane::end`]).
    End(&'a [u8]),
    /// A POST on session `id` of the single message `message`: a session of the caller's, or
    /// one of the births' ([`Lane::born_request`]); a `tools/call` of it may be run
    /// ([`crate::admit::tools_call`]). `caller`: the subject of its bearer token (`None`
    /// without authentication), which must be the session's ([`crate::bearer::serves`]).
    Session {
        id: &'a [u8],
        message: Envelope<'a>,
        caller: Option<Subject>,
    },
    /// A 2026-07-28 `tools/call` in the `version`-th version of [`Lane::allow_stateless`].
    Stateless { version: usize, call: Call<'a> },
}

/// The lane's rules and what it was told (see the module doc). `V` is a version as the caller
/// holds it, `D` the server's session defaults (see [`Births`]).
#[derive(Debug)]
pub struct Lane<V, D> {
    path: Vec<u8>,
    versions: Vec<Vec<u8>>,
    /// Few values each (one or two per deployment): a scan beats hashing them.
    learned: [Vec<Vec<u8>>; 4],
    /// Each 2026-07-28 version answered, as sent and as the caller holds it.
    stateless: Option<Vec<(Vec<u8>, V)>>,
    births: Option<Births<V, D>>,
    /// With authentication: the tokens it may admit.
    tokens: Option<Tokens>,
    framing: Framing,
}

impl<V, D: PartialEq> Lane<V, D> {
    /// A lane for requests to `path` (the exact target) with an `MCP-Protocol-Version` among
    /// `versions` (or none), whose 200 JSON replies have `json_head` (up to their length).
    pub fn new(path: &[u8], versions: Vec<Vec<u8>>, json_head: Vec<u8>) -> Self {
        Lane {
            path: path.to_vec(),
            versions,
            learned: Default::default(),
            stateless: None,
            births: None,
            tokens: None,
            framing: Framing::new(json_head),
        }
    }

    /// Whether the lane still keeps new values of `header`.
    pub fn learns(&self, header: Learned) -> bool {
        self.learned[header as usize].len() < LEARNED_MAX
    }

    /// Remember `value` of `header`, from a request the full path accepted.
    pub fn learn(&mut self, header: Learned, value: &[u8]) {
        let known = &mut self.learned[header as usize];
        if known.len() < LEARNED_MAX && !known.iter().any(|k| k.as_slice() == value) {
            known.push(value.to_vec());
        }
    }

    /// Answer 2026-07-28 `tools/call` requests in `versions` (see [`Lane::decide`]).
    pub fn allow_stateless(&mut self, versions: Vec<(Vec<u8>, V)>) {
        self.stateless = Some(versions);
    }

    /// The `i`-th version of [`Lane::allow_stateless`].
    pub fn stateless_version(&self, i: usize) -> Option<&V> {
        Some(&self.stateless.as_ref()?.get(i)?.1)
    }

    /// Open sessions here too.
    pub fn allow_births(&mut self, births: Births<V, D>) {
        self.births = Some(births);
    }

    /// Answer only requests with a bearer token of `tokens` (the server authenticates).
    pub fn require_tokens(&mut self, tokens: Tokens) {
        self.tokens = Some(tokens);
    }

    /// The tokens it admits (`None`: the server does not authenticate).
    pub fn tokens(&self) -> Option<&Tokens> {
        self.tokens.as_ref()
    }

    /// [`Lane::tokens`], to change.
    pub fn tokens_mut(&mut self) -> Option<&mut Tokens> {
        self.tokens.as_mut()
    }

    pub fn births(&self) -> Option<&Births<V, D>> {
        self.births.as_ref()
    }

    pub fn births_mut(&mut self) -> Option<&mut Births<V, D>> {
        self.births.as_mut()
    }

    pub fn framing(&self) -> &Framing {
        &self.framing
    }

    pub fn framing_mut(&mut self) -> &mut Framing {
        &mut self.framing
    }

    /// What to do with the request of `head` and `body` (the caller acts on it). A POST or
    /// DELETE to the path, on a connection kept alive, with no header it judges repeated and
    /// learned values only (`Origin` may be absent; a DELETE needs neither `Accept` nor
    /// `Content-Type`), and, with authentication, a bearer token held and not past its time at
    /// `wall` (the Unix time now); then, by its `MCP-Session-Id` and `MCP-Protocol-Version`,
    /// see [`Verdict`].
    pub fn decide<'a>(&self, head: &Head<'a>, body: &'a [u8], wall: f64) -> Verdict<'a> {
        let delete = head.method == b"DELETE";
        if !(delete || head.method == b"POST")
            || head.target != self.path.as_slice()
            || !head.keep_alive
        {
            return Verdict::Full;
        }
        let Some(seen) = Seen::of(head) else {
            return Verdict::Full;
        };
        for (header, value) in Learned::ALL.into_iter().zip(seen.learned) {
            match value {
                Some(v)
                    if self.learned[header as usize]
                        .iter()
                        .any(|k| k.as_slice() == v) => {}
                None if header == Learned::Origin => {}
                // the full path judges neither for a DELETE: absent is as good as accepted
                None if delete && matches!(header, Learned::Accept | Learned::ContentType) => {}
                _ => return Verdict::Full,
            }
        }
        let caller = match &self.tokens {
            None => None,
            Some(tokens) => match seen.authorization.and_then(|a| tokens.admit(a, wall)) {
                Some(subject) => Some(subject),
                None => return Verdict::Full,
            },
        };
        if let Some(v) = seen.version {
            if !self.versions.iter().any(|known| known.as_slice() == v) {
                return if delete || seen.session_id.is_some() {
                    Verdict::Full
                } else {
                    self.stateless(&seen, v, body)
                };
            }
        }
        // the births' sessions are bound to no subject: none with authentication
        let births = self.births.is_some() && self.tokens.is_none();
        let Some(id) = seen.session_id else {
            if delete || !births {
                return Verdict::Full;
            }
            return births::initialize(body).map_or(Verdict::Full, Verdict::Open);
        };
        if delete {
            return if births && body.is_empty() {
                Verdict::End(id)
            } else {
                Verdict::Full
            };
        }
        match single(body) {
            Some(message) => Verdict::Session {
                id,
                message,
                caller: caller.cloned(),
            },
            None => Verdict::Full,
        }
    }

    /// A 2026-07-28 `tools/call` it may answer (in `version`, a header already matched against
    /// the learned values): `Mcp-Method` and `Mcp-Name` as sent agree with the body (a name in
    /// visible ASCII, not in the base64 form), no `Mcp-Param-*` header, params of exactly
    /// `name`, maybe `arguments`, and `_meta` as [`plain_meta`] says. Anything
    /// else goes the full path, which judges it.
    fn stateless<'a>(&self, seen: &Seen<'a>, version: &'a [u8], body: &'a [u8]) -> Verdict<'a> {
        let Some(versions) = self.stateless.as_ref() else {
            return Verdict::Full;
        };
        let Some(index) = versions.iter().position(|(v, _)| v.as_slice() == version) else {
            return Verdict::Full;
        };
        if seen.params || seen.method != Some(TOOLS_CALL) {
            return Verdict::Full;
        }
        let Some(named) = seen
            .name
            .filter(|n| !n.starts_with(b"=?") && n.iter().all(|b| (0x20..0x7f).contains(b)))
        else {
            return Verdict::Full;
        };
        let Some(env) = single(body) else {
            return Verdict::Full;
        };
        let Some((call, Some(meta))) = call_of(&env, body) else {
            return Verdict::Full;
        };
        if call.name.as_bytes() != named || !plain_meta(meta, version) {
            return Verdict::Full;
        }
        Verdict::Stateless {
            version: index,
            call,
        }
    }

    /// [`Verdict::Open`]: open the session if the births may (see [`Births::open`]), its
    /// reply written into `out`: whether it did.
    pub fn open<H: Host<V, D>>(
        &mut self,
        host: &mut H,
        init: &Initialize<'_>,
        body: &[u8],
        now: f64,
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> Result<bool, H::Error> {
        match self.births.as_mut() {
            Some(births) => births.open(host, init, body, now, &self.framing, out, reply),
            None => Ok(false),
        }
    }

    /// [`Verdict::End`]: end the births' session `id`, its reply written into `out`: whether
    /// it was one of theirs.
    pub fn end(&mut self, id: &[u8], now: f64, out: &mut Vec<u8>) -> bool {
        match self.births.as_mut() {
            Some(births) => births.end(id, now, &self.framing, out),
            None => false,
        }
    }

    /// [`Verdict::Session`] on a session the caller does not hold: see [`Births::request`].
    pub fn born_request(
        &mut self,
        id: &[u8],
        message: &Envelope<'_>,
        now: f64,
        out: &mut Vec<u8>,
    ) -> Step<'_, V> {
        match self.births.as_mut() {
            Some(births) => births.request(id, message, now, &self.framing, out),
            None => Step::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit::tools_call;
    use crate::births::Heads;
    use crate::http1::{parse_request, Body, Parse};
    use std::sync::Arc;

    const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{}}}"#;
    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

    /// A request's bytes: `method` to `target` with `headers` and `body`.
    fn request(method: &str, target: &str, headers: &[&str], body: &str) -> Vec<u8> {
        let mut text = format!("{method} {target} HTTP/1.1\r\n");
        for h in headers {
            text.push_str(h);
            text.push_str("\r\n");
        }
        text.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        text.into_bytes()
    }

    /// A POST to `/mcp`.
    fn post(headers: &[&str], body: &str) -> Vec<u8> {
        request("POST", "/mcp", headers, body)
    }

    /// The learned headers (by `lane()`), then `own` and `more`.
    fn headers(own: &[&'static str], more: &[&'static str]) -> Vec<&'static str> {
        let learned = [
            "Host: localhost:8000",
            "Accept: application/json, text/event-stream",
            "Content-Type: application/json",
        ];
        learned.iter().chain(own).chain(more).copied().collect()
    }

    /// The usual headers of a POST on session `s1`, then `more`.
    fn session(more: &[&'static str]) -> Vec<&'static str> {
        headers(
            &["Mcp-Session-Id: s1", "MCP-Protocol-Version: 2025-11-25"],
            more,
        )
    }

    /// The usual headers of a 2026-07-28 call of tool `echo`, then `more`.
    fn stateless(more: &[&'static str]) -> Vec<&'static str> {
        let own = [
            "MCP-Protocol-Version: 2026-07-28",
            "Mcp-Method: tools/call",
            "Mcp-Name: echo",
        ];
        headers(&own, more)
    }

    /// `headers` without those that start with `prefix`.
    fn without(headers: Vec<&'static str>, prefix: &str) -> Vec<&'static str> {
        headers
            .into_iter()
            .filter(|h| !h.starts_with(prefix))
            .collect()
    }

    /// `headers` with `to` in place of those that start with `prefix`.
    fn swapped(headers: Vec<&'static str>, prefix: &str, to: &'static str) -> Vec<&'static str> {
        let swap = |h: &'static str| if h.starts_with(prefix) { to } else { h };
        headers.into_iter().map(swap).collect()
    }

    fn lane() -> Lane<&'static str, u8> {
        let mut lane = Lane::new(
            b"/mcp",
            vec![b"2025-11-25".to_vec(), b"2025-06-18".to_vec()],
            b"J\r\n".to_vec(),
        );
        lane.learn(Learned::Host, b"localhost:8000");
        lane.learn(Learned::Accept, b"application/json, text/event-stream");
        lane.learn(Learned::ContentType, b"application/json");
        lane.learn(Learned::Origin, b"http://localhost:8000");
        lane
    }

    fn with_births(mut lane: Lane<&'static str, u8>) -> Lane<&'static str, u8> {
        let heads = Heads::new(b"O @\r\n", b"@", b"A\r\n", b"E\r\n").expect("heads");
        lane.allow_births(Births::new(8, 60.0, 16, heads).expect("births"));
        lane
    }

    fn with_stateless(mut lane: Lane<&'static str, u8>) -> Lane<&'static str, u8> {
        lane.allow_stateless(vec![
            (b"2026-01-01".to_vec(), "a"),
            (b"2026-07-28".to_vec(), "b"),
        ]);
        lane
    }

    /// What `lane` decides for `bytes` (one whole request), as a short word.
    fn decide(lane: &Lane<&'static str, u8>, bytes: &[u8]) -> String {
        decide_at(lane, bytes, 0.0)
    }

    /// [`decide`] at Unix time `wall`.
    fn decide_at(lane: &Lane<&'static str, u8>, bytes: &[u8], wall: f64) -> String {
        let Parse::Head(head) = parse_request(bytes, 1 << 16, 1 << 20) else {
            panic!("not a request: {}", String::from_utf8_lossy(bytes));
        };
        let Body::Length(n) = head.body else {
            panic!("chunked");
        };
        let body = &bytes[head.head_len..head.head_len + n];
        match lane.decide(&head, body, wall) {
            Verdict::Full => "full".into(),
            Verdict::Open(init) => format!("open {}", init.requested),
            Verdict::End(id) => format!("end {}", String::from_utf8_lossy(id)),
            Verdict::Session {
                id,
                message,
                caller,
            } => {
                let call =
                    tools_call(&message, body).map_or("other".into(), |c| c.name.into_owned());
                let by = caller.map_or(String::new(), |c| format!(" by {c}"));
                format!("session {} {call}{by}", String::from_utf8_lossy(id))
            }
            Verdict::Stateless { version, call } => {
                format!("stateless {version} {} {:?}", call.name, call.id)
            }
        }
    }

    #[test]
    fn a_session_post_with_learned_headers_is_the_lanes() {
        let lane = lane();
        assert_eq!(decide(&lane, &post(&session(&[]), CALL)), "session s1 echo");
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(
            decide(&lane, &post(&session(&[]), ping)),
            "session s1 other"
        );
        // an earlier version the server holds, an Origin it learned, names in any case
        assert_eq!(
            decide(
                &lane,
                &post(
                    &[
                        "HOST: localhost:8000",
                        "accept: application/json, text/event-stream",
                        "content-TYPE: application/json",
                        "origin: http://localhost:8000",
                        "mcp-session-id: s1",
                        "mcp-protocol-version: 2025-06-18",
                    ],
                    CALL
                )
            ),
            "session s1 echo"
        );
        // no version header: the full path's default applies to the session, as here
        let no_version = without(session(&[]), "MCP-Protocol");
        assert_eq!(decide(&lane, &post(&no_version, CALL)), "session s1 echo");
    }

    #[test]
    fn anything_else_about_the_request_goes_the_full_path() {
        let lane = lane();
        let cases = [
            ("a GET", request("GET", "/mcp", &session(&[]), "")),
            ("a PUT", request("PUT", "/mcp", &session(&[]), CALL)),
            (
                "another path",
                request("POST", "/mcp/", &session(&[]), CALL),
            ),
            ("a query", request("POST", "/mcp?x=1", &session(&[]), CALL)),
            (
                "a closing connection",
                post(&session(&["Connection: close"]), CALL),
            ),
            (
                "a repeated Host",
                post(&session(&["Host: localhost:8000"]), CALL),
            ),
            (
                "a repeated session",
                post(&session(&["Mcp-Session-Id: s1"]), CALL),
            ),
            (
                "an Origin not learned",
                post(&session(&["Origin: http://evil"]), CALL),
            ),
            (
                "a Host not learned",
                post(&swapped(session(&[]), "Host", "Host: other"), CALL),
            ),
            ("no Accept", post(&without(session(&[]), "Accept"), CALL)),
            (
                "a version no session has",
                post(
                    &swapped(
                        session(&[]),
                        "MCP-Protocol",
                        "MCP-Protocol-Version: 2024-11-05",
                    ),
                    CALL,
                ),
            ),
            ("a batch", post(&session(&[]), &format!("[{CALL}]"))),
            ("no JSON", post(&session(&[]), "{")),
        ];
        for (why, bytes) in cases {
            assert_eq!(decide(&lane, &bytes), "full", "{why}");
        }
    }

    #[test]
    fn learned_values_are_kept_once_and_bounded() {
        let mut lane: Lane<(), u8> = Lane::new(b"/", Vec::new(), Vec::new());
        assert!(lane.learns(Learned::Host));
        lane.learn(Learned::Host, b"h");
        lane.learn(Learned::Host, b"h");
        assert_eq!(lane.learned[Learned::Host as usize].len(), 1);
        for n in 0..2 * LEARNED_MAX {
            lane.learn(Learned::Host, n.to_string().as_bytes());
        }
        assert_eq!(lane.learned[Learned::Host as usize].len(), LEARNED_MAX);
        assert!(!lane.learns(Learned::Host));
        assert!(lane.learns(Learned::Origin));
        assert_eq!(
            Learned::ALL.map(Learned::name),
            [&b"host"[..], b"accept", b"content-type", b"origin"]
        );
    }

    #[test]
    fn births_are_asked_only_when_allowed() {
        let plain = lane();
        let born = with_births(lane());
        let no_session = without(session(&[]), "Mcp-Session");
        let init = post(&no_session, INIT);
        assert_eq!(decide(&plain, &init), "full");
        assert_eq!(decide(&born, &init), "open 2025-11-25");
        // not an initialize the births may answer
        assert_eq!(decide(&born, &post(&no_session, CALL)), "full");
        let delete = |more: &[&str], body: &str| {
            let mut headers = vec!["Host: localhost:8000"];
            headers.extend_from_slice(more);
            request("DELETE", "/mcp", &headers, body)
        };
        let end = delete(&["Mcp-Session-Id: s1"], "");
        assert_eq!(decide(&plain, &end), "full");
        assert_eq!(decide(&born, &end), "end s1");
        // a DELETE with a body, or without a session, or with a version no session has
        assert_eq!(
            decide(&born, &delete(&["Mcp-Session-Id: s1"], "{}")),
            "full"
        );
        assert_eq!(decide(&born, &delete(&[], "")), "full");
        let unknown = delete(
            &["Mcp-Session-Id: s1", "MCP-Protocol-Version: 2026-07-28"],
            "",
        );
        assert_eq!(
            decide(&with_stateless(with_births(lane())), &unknown),
            "full"
        );
    }

    #[test]
    fn a_stateless_call_agrees_with_its_headers() {
        let lane = with_stateless(lane());
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{{"name":"echo","arguments":{{}},{META}}}}}"#
        );
        let ok = post(&stateless(&[]), &body);
        assert_eq!(decide(&lane, &ok), r#"stateless 1 echo Str("c")"#);
        assert_eq!(lane.stateless_version(1), Some(&"b"));
        assert_eq!(lane.stateless_version(2), None);
        assert_eq!(decide(&self::lane(), &ok), "full", "not allowed");
        let full = |headers: &[&str], body: &str| {
            assert_eq!(
                decide(&lane, &post(headers, body)),
                "full",
                "{headers:?} {body}"
            );
        };
        full(&stateless(&["Mcp-Session-Id: s1"]), &body);
        full(&stateless(&["Mcp-Param-X: 1"]), &body);
        let swap = |from: &str, to: &'static str| swapped(stateless(&[]), from, to);
        full(
            &swap("MCP-Protocol", "MCP-Protocol-Version: 2027-01-01"),
            &body,
        );
        full(&swap("Mcp-Method", "Mcp-Method: tools/list"), &body);
        full(&swap("Mcp-Name", "Mcp-Name: other"), &body);
        full(&swap("Mcp-Name", "Mcp-Name: =?base64?ZWNobw==?="), &body);
        full(&swap("Mcp-Name", "Mcp-Name: ech\u{e9}"), &body);
        let no_name = without(stateless(&[]), "Mcp-Name");
        full(&no_name, &body);
        // the body's side: _meta needed and plain, nothing but name and arguments besides
        full(&stateless(&[]), CALL);
        full(&stateless(&[]), &body.replace("2026-07-28", "2025-11-25"));
        full(
            &stateless(&[]),
            &body.replace(r#""arguments":{}"#, r#""task":{}"#),
        );
        full(&stateless(&[]), &format!("[{body}]"));
        // in the other version allowed
        let first = body.replace("2026-07-28", "2026-01-01");
        assert_eq!(
            decide(
                &lane,
                &post(
                    &swap("MCP-Protocol", "MCP-Protocol-Version: 2026-01-01"),
                    &first
                )
            ),
            r#"stateless 0 echo Str("c")"#
        );
    }

    #[test]
    fn the_births_steps_go_through_the_lane() {
        let mut plain = lane();
        let notified = single(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .expect("a message");
        let mut out = Vec::new();
        assert_eq!(
            plain.born_request(b"s1", &notified, 0.0, &mut out),
            Step::Unknown
        );
        assert!(!plain.end(b"s1", 0.0, &mut out));
        struct NoHost;
        impl Host<&'static str, u8> for NoHost {
            type Error = ();
            fn held(&self) -> usize {
                0
            }
            fn defaults(&mut self) -> Result<u8, ()> {
                Err(())
            }
            fn random(&mut self, _: &mut [u8]) -> Result<(), ()> {
                Err(())
            }
            fn version(&self, v: &&'static str) -> &'static str {
                v
            }
        }
        let init = births::initialize(INIT.as_bytes()).expect("initialize");
        let mut reply = Vec::new();
        let mut open = |lane: &mut Lane<&'static str, u8>| {
            lane.open(
                &mut NoHost,
                &init,
                INIT.as_bytes(),
                0.0,
                &mut out,
                &mut reply,
            )
        };
        assert_eq!(open(&mut plain), Ok(false), "no births");
        let mut born = with_births(lane());
        born.births_mut()
            .expect("births")
            .learn("2025-11-25", "v", b"{}", true, 0);
        assert_eq!(
            open(&mut born),
            Err(()),
            "the host's failure is the caller's"
        );
        assert!(out.is_empty());
        assert_eq!(born.births().map(Births::len), Some(0));
    }

    #[test]
    fn with_tokens_a_request_needs_one_held_and_in_time() {
        let mut lane = with_stateless(with_births(lane()));
        lane.require_tokens(Tokens::new(8));
        let tokens = lane.tokens_mut().expect("tokens");
        assert!(tokens.learn(b"Bearer good", Arc::from("alice"), 100.0, 0.0));
        let call = |auth: &[&'static str]| post(&session(auth), CALL);
        assert_eq!(
            decide_at(&lane, &call(&["Authorization: Bearer good"]), 50.0),
            "session s1 echo by alice"
        );
        assert_eq!(
            decide_at(&lane, &call(&["authorization: bearer good"]), 99.0),
            "session s1 echo by alice"
        );
        for (why, auth, wall) in [
            ("no token", &[][..], 50.0),
            (
                "a token not held",
                &["Authorization: Bearer other"][..],
                50.0,
            ),
            ("past its time", &["Authorization: Bearer good"][..], 100.0),
            (
                "a repeated Authorization",
                &["Authorization: Bearer good", "Authorization: Bearer good"][..],
                50.0,
            ),
            (
                "not the strict form",
                &["Authorization: Bearer  good"][..],
                50.0,
            ),
        ] {
            assert_eq!(decide_at(&lane, &call(auth), wall), "full", "{why}");
        }
        // a stateless call with the token; births refused with it or without
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{{"name":"echo",{META}}}}}"#
        );
        assert_eq!(
            decide_at(
                &lane,
                &post(&stateless(&["Authorization: Bearer good"]), &body),
                1.0
            ),
            r#"stateless 1 echo Str("c")"#
        );
        assert_eq!(decide_at(&lane, &post(&stateless(&[]), &body), 1.0), "full");
        let no_session = without(session(&["Authorization: Bearer good"]), "Mcp-Session");
        assert_eq!(decide_at(&lane, &post(&no_session, INIT), 1.0), "full");
        let end = request(
            "DELETE",
            "/mcp",
            &[
                "Host: localhost:8000",
                "Mcp-Session-Id: s1",
                "Authorization: Bearer good",
            ],
            "",
        );
        assert_eq!(decide_at(&lane, &end, 1.0), "full");
        // without authentication the header is not the lane's to read
        assert_eq!(
            decide(&self::lane(), &call(&["Authorization: Bearer x"])),
            "session s1 echo"
        );
        lane.tokens_mut().expect("tokens").clear();
        assert_eq!(
            decide_at(&lane, &call(&["Authorization: Bearer good"]), 50.0),
            "full"
        );
    }
}
