//! MCP over Streamable HTTP: the requests (handshake era and 2026-07-28 stateless) and how
//! each reply is checked.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::check::{self, Checked, SseCheck, Verdict, Want};
use crate::http::{Conn, ContentType, ExchangeError};

/// Protocol versions of the handshake era this client can speak.
pub const KNOWN_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Where the MCP endpoint is.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    /// `Host` header value.
    pub host: String,
    /// Request target (path and query).
    pub path: String,
}

impl Target {
    /// Parse `http://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("only http:// URLs are supported: {url}"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("bad host in URL: {url}"));
        }
        let with_port = if authority.starts_with('[') {
            if authority.contains("]:") {
                authority.to_string()
            } else {
                format!("{authority}:80")
            }
        } else if authority.contains(':') {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {authority}: {e}"))?
            .next()
            .ok_or_else(|| format!("no address for {authority}"))?;
        let path = match path.find('#') {
            Some(i) => &path[..i],
            None => path,
        };
        Ok(Target {
            addr,
            host: authority.to_string(),
            path: path.to_string(),
        })
    }
}

/// The request settings shared by every session.
#[derive(Debug, Clone)]
pub struct Proto {
    pub target: Target,
    pub version: String,
    pub timeout: Duration,
    /// `tools/call` body around the id: `{"jsonrpc":"2.0","id":` .. id .. `,"method":...}`
    pub call_suffix: Vec<u8>,
    /// Extra header lines (each `Name: value\r\n`) sent on every request.
    pub extra_headers: Vec<u8>,
    /// JSON text of the client capabilities sent in `initialize`.
    pub capabilities: String,
    /// Largest reply body accepted.
    pub max_reply: usize,
}

impl Proto {
    pub fn new(
        target: Target,
        version: String,
        timeout: Duration,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Proto {
        let name = serde_json::to_string(tool).unwrap_or_default();
        let args = serde_json::to_string(arguments).unwrap_or_default();
        let call_suffix =
            format!(r#","method":"tools/call","params":{{"name":{name},"arguments":{args}}}}}"#)
                .into_bytes();
        Proto {
            target,
            version,
            timeout,
            call_suffix,
            extra_headers: Vec::new(),
            capabilities: "{}".into(),
            max_reply: crate::http::MAX_BODY,
        }
    }

    /// Add a header line sent on every request (the value checked for CR/LF by the caller).
    pub fn add_header(&mut self, name: &str, value: &str) {
        self.extra_headers.extend_from_slice(name.as_bytes());
        self.extra_headers.extend_from_slice(b": ");
        self.extra_headers.extend_from_slice(value.as_bytes());
        self.extra_headers.extend_from_slice(b"\r\n");
    }

    pub fn head(&self, out: &mut Vec<u8>, method: &str, session: Option<&Session>) {
        out.extend_from_slice(method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.target.path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(self.target.host.as_bytes());
        out.extend_from_slice(b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n");
        out.extend_from_slice(&self.extra_headers);
        if let Some(s) = session {
            if let Some(id) = &s.id {
                out.extend_from_slice(b"Mcp-Session-Id: ");
                out.extend_from_slice(id.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"MCP-Protocol-Version: ");
            out.extend_from_slice(s.version.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }

    pub fn post(&self, out: &mut Vec<u8>, session: Option<&Session>, body: &[u8]) {
        out.clear();
        self.head(out, "POST", session);
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(body);
    }

    pub fn initialize_request(&self, out: &mut Vec<u8>, id: i64) {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":{},"capabilities":{},"clientInfo":{CLIENT_INFO}}}}}"#,
            serde_json::to_string(&self.version).unwrap_or_default(),
            self.capabilities,
        );
        self.post(out, None, body.as_bytes());
    }
}

/// The `clientInfo` this client sends.
pub const CLIENT_INFO: &str = concat!(
    r#"{"name":"mcpfast-engine","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// One open MCP session: its id (if the server minted one), the negotiated version and the
/// prebuilt request heads.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: Option<String>,
    pub version: String,
    /// `POST` head up to and including `Content-Length: `.
    post_head: Vec<u8>,
    /// The whole `DELETE` request.
    delete: Vec<u8>,
    /// Next JSON-RPC id.
    pub next_id: i64,
}

impl Session {
    pub fn new(proto: &Proto, id: Option<String>, version: String, next_id: i64) -> Session {
        let mut s = Session {
            id,
            version,
            post_head: Vec::new(),
            delete: Vec::new(),
            next_id,
        };
        let mut head = Vec::with_capacity(256);
        proto.head(&mut head, "POST", Some(&s));
        head.extend_from_slice(b"Content-Length: ");
        let mut delete = Vec::with_capacity(256);
        proto.head(&mut delete, "DELETE", Some(&s));
        delete.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        s.post_head = head;
        s.delete = delete;
        s
    }
}

/// The step of the protocol a measurement or failure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Initialize = 0,
    Initialized = 1,
    Call = 2,
    Delete = 3,
}

pub const PHASES: [Phase; 4] = [
    Phase::Initialize,
    Phase::Initialized,
    Phase::Call,
    Phase::Delete,
];

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Initialize => "initialize",
            Phase::Initialized => "notifications/initialized",
            Phase::Call => "tools/call",
            Phase::Delete => "delete",
        }
    }
}

/// Why one request failed.
#[derive(Debug)]
pub enum Problem {
    Exchange(ExchangeError),
    Status(u16),
    ContentType,
    Reply(Verdict),
    ToolError,
    NoSessionId,
    BadSessionId,
    Version(String),
}

impl Problem {
    /// A short, low-cardinality reason, e.g. `http 404`, `timeout`, `jsonrpc error -32602`.
    pub fn reason(&self) -> String {
        match self {
            Problem::Exchange(e) => e.kind(),
            Problem::Status(s) => format!("http {s}"),
            Problem::ContentType => "reply neither application/json nor text/event-stream".into(),
            Problem::Reply(v) => v.describe(),
            Problem::ToolError => "result has isError: true".into(),
            Problem::NoSessionId => "no Mcp-Session-Id in the reply".into(),
            Problem::BadSessionId => "invalid Mcp-Session-Id".into(),
            Problem::Version(v) => format!("server chose unknown protocol version {v:?}"),
        }
    }
}

#[derive(Debug)]
pub struct Failure {
    pub phase: Phase,
    pub problem: Problem,
    /// The start of the response that failed the check, for the report's samples.
    pub sample: Option<String>,
}

impl Failure {
    /// A stable name for counting failures by kind, e.g. `tools/call: http 404`.
    pub fn kind(&self) -> String {
        format!("{}: {}", self.phase.name(), self.problem.reason())
    }

    /// The session is gone on the server (404): it must be initialized again.
    pub fn session_gone(&self) -> bool {
        matches!(self.problem, Problem::Status(404))
    }
}

pub fn fail(phase: Phase, problem: Problem) -> Failure {
    Failure {
        phase,
        problem,
        sample: None,
    }
}

/// A failure of a response that did arrive: keep the start of it.
#[cold]
pub fn bad(phase: Phase, problem: Problem, conn: &Conn) -> Failure {
    const KEEP: usize = 300;
    let p = &conn.parser;
    let body = &p.body[..p.body.len().min(KEEP)];
    let more = if p.body.len() > KEEP { "..." } else { "" };
    let sample = format!(
        "HTTP {} {:?}: {}{more}",
        p.status,
        p.content_type,
        String::from_utf8_lossy(body)
    );
    Failure {
        phase,
        problem,
        sample: Some(sample),
    }
}

/// Per-connection scratch: the request buffer and the SSE reply checker.
pub struct Scratch {
    pub req: Vec<u8>,
    pub sse: SseCheck,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            req: Vec::new(),
            sse: SseCheck::new(mcpfast_core::DEFAULT_MAX_EVENT),
        }
    }
}

/// Check the reply to a request with id `want` now in `conn.parser`.
pub fn check_reply(
    conn: &mut Conn,
    phase: Phase,
    want: i64,
    what: Want,
    sse: &mut SseCheck,
) -> Result<Checked, Failure> {
    let p = &conn.parser;
    if p.status != 200 {
        return Err(bad(phase, Problem::Status(p.status), conn));
    }
    let checked = match p.content_type {
        ContentType::Json => check::check_json(&p.body, want, what),
        ContentType::EventStream => {
            sse.reset(want, what);
            sse.feed(&p.body);
            sse.finish()
        }
        _ => return Err(bad(phase, Problem::ContentType, conn)),
    };
    conn.sse_other_messages += u64::from(checked.other_messages);
    if checked.verdict() != Verdict::Ok {
        return Err(bad(phase, Problem::Reply(checked.verdict()), conn));
    }
    Ok(checked)
}

/// `initialize`: a new session (id from the reply header, version from the result).
pub async fn initialize(
    conn: &mut Conn,
    proto: &Proto,
    scratch: &mut Scratch,
    id: i64,
) -> Result<Session, Failure> {
    let phase = Phase::Initialize;
    proto.initialize_request(&mut scratch.req, id);
    conn.exchange(&scratch.req, true, proto.timeout)
        .await
        .map_err(|e| fail(phase, Problem::Exchange(e)))?;
    let checked = check_reply(conn, phase, id, Want::Initialize, &mut scratch.sse)?;
    let p = &conn.parser;
    let version = checked
        .version
        .ok_or_else(|| bad(phase, Problem::Reply(Verdict::NotJsonRpc), conn))?;
    if !KNOWN_VERSIONS.contains(&version.as_str()) {
        return Err(bad(phase, Problem::Version(version), conn));
    }
    if p.session_id_invalid {
        return Err(fail(phase, Problem::BadSessionId));
    }
    Ok(Session::new(proto, p.session_id.clone(), version, id + 1))
}

/// `notifications/initialized`: expects 202 Accepted.
pub async fn initialized(
    conn: &mut Conn,
    proto: &Proto,
    scratch: &mut Scratch,
    session: &Session,
) -> Result<(), Failure> {
    let phase = Phase::Initialized;
    proto.post(
        &mut scratch.req,
        Some(session),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    conn.exchange(&scratch.req, false, proto.timeout)
        .await
        .map_err(|e| fail(phase, Problem::Exchange(e)))?;
    if conn.parser.status != 202 {
        return Err(bad(phase, Problem::Status(conn.parser.status), conn));
    }
    Ok(())
}

/// `tools/call` with the next id of the session; checks the reply is a result for that id
/// without `isError: true`.
pub async fn call(
    conn: &mut Conn,
    proto: &Proto,
    scratch: &mut Scratch,
    session: &mut Session,
) -> Result<(), Failure> {
    let phase = Phase::Call;
    let id = session.next_id;
    session.next_id += 1;
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(id).as_bytes();
    const PREFIX: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    let len = PREFIX.len() + digits.len() + proto.call_suffix.len();
    let req = &mut scratch.req;
    req.clear();
    req.extend_from_slice(&session.post_head);
    req.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    req.extend_from_slice(b"\r\n\r\n");
    req.extend_from_slice(PREFIX);
    req.extend_from_slice(digits);
    req.extend_from_slice(&proto.call_suffix);
    conn.exchange(req, false, proto.timeout)
        .await
        .map_err(|e| fail(phase, Problem::Exchange(e)))?;
    let checked = check_reply(conn, phase, id, Want::ToolCall, &mut scratch.sse)?;
    if checked.tool_error {
        return Err(bad(phase, Problem::ToolError, conn));
    }
    Ok(())
}

/// `DELETE` the session: any 2xx is success.
pub async fn delete(conn: &mut Conn, proto: &Proto, session: &Session) -> Result<(), Failure> {
    let phase = Phase::Delete;
    conn.exchange(&session.delete, false, proto.timeout)
        .await
        .map_err(|e| fail(phase, Problem::Exchange(e)))?;
    if !(200..300).contains(&conn.parser.status) {
        return Err(bad(phase, Problem::Status(conn.parser.status), conn));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = Target::parse("http://127.0.0.1:18500/mcp").expect("parsed");
        assert_eq!(t.addr, "127.0.0.1:18500".parse().expect("addr"));
        assert_eq!(t.host, "127.0.0.1:18500");
        assert_eq!(t.path, "/mcp");
        let t = Target::parse("http://127.0.0.1").expect("parsed");
        assert_eq!(t.addr.port(), 80);
        assert_eq!(t.path, "/");
        let t = Target::parse("http://[::1]:9000/a?b=c#frag").expect("parsed");
        assert_eq!(t.addr, "[::1]:9000".parse().expect("addr"));
        assert_eq!(t.path, "/a?b=c");
        assert!(Target::parse("https://127.0.0.1/mcp").is_err());
    }

    #[test]
    fn requests_are_well_formed() {
        let target = Target::parse("http://127.0.0.1:1/mcp").expect("parsed");
        let args = serde_json::json!({"text": "hi \"there\""});
        let proto = Proto::new(
            target,
            "2025-11-25".into(),
            Duration::from_secs(1),
            "echo",
            &args,
        );
        let mut out = Vec::new();
        proto.initialize_request(&mut out, 1);
        let text = String::from_utf8(out.clone()).expect("utf8");
        assert!(text.starts_with("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"));
        assert!(!text.contains("Mcp-Session-Id"));
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.ends_with(&format!("Content-Length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["params"]["protocolVersion"], "2025-11-25");

        let session = Session::new(&proto, Some("s1".into()), "2025-06-18".into(), 2);
        let mut scratch = Scratch::default();
        let mut s = session.clone();
        // build a call request the way call() does, without a connection
        let id = s.next_id;
        s.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id}{}"#,
            String::from_utf8_lossy(&proto.call_suffix)
        );
        let v: serde_json::Value = serde_json::from_str(&body).expect("call body is json");
        assert_eq!(v["params"]["arguments"]["text"], "hi \"there\"");
        assert_eq!(v["id"], 2);
        let head = String::from_utf8(session.post_head.clone()).expect("utf8");
        assert!(head.contains("\r\nMcp-Session-Id: s1\r\nMCP-Protocol-Version: 2025-06-18\r\n"));
        assert!(head.ends_with("Content-Length: "));
        let delete = String::from_utf8(session.delete.clone()).expect("utf8");
        assert!(delete.starts_with("DELETE /mcp HTTP/1.1\r\n"));
        assert!(delete.ends_with("Content-Length: 0\r\n\r\n"));
        scratch.req.clear();
    }
}
