//! MCP over Streamable HTTP: the requests (handshake era and 2026-07-28
//! stateless), and the reasons a request fails.

use crate::http::{Conn, ExchangeError, ResponseParser};
use crate::target::Target;

/// The request settings shared by every session.
#[derive(Debug, Clone)]
pub(crate) struct Proto {
    pub(crate) target: Target,
    pub(crate) version: String,
    /// Extra header lines (each `Name: value\r\n`) sent on every request.
    extra_headers: Vec<u8>,
    /// JSON text of the client capabilities sent in `initialize`.
    pub(crate) capabilities: String,
    /// Largest reply body accepted.
    pub(crate) max_reply: usize,
}

impl Proto {
    pub(crate) fn new(target: Target, version: String) -> Proto {
        Proto {
            target,
            version,
            extra_headers: Vec::new(),
            capabilities: "{}".into(),
            max_reply: crate::http::MAX_BODY,
        }
    }

    /// Add a header line sent on every request (the value checked for CR/LF by the caller).
    pub(crate) fn add_header(&mut self, name: &str, value: &str) {
        self.extra_headers.extend_from_slice(name.as_bytes());
        self.extra_headers.extend_from_slice(b": ");
        self.extra_headers.extend_from_slice(value.as_bytes());
        self.extra_headers.extend_from_slice(b"\r\n");
    }

    pub(crate) fn head(&self, out: &mut Vec<u8>, method: &str, session: Option<&Session>) {
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

    /// The `initialize` request, with `own` (this user's header lines) after the shared ones.
    pub(crate) fn initialize_request(&self, out: &mut Vec<u8>, id: i64, own: &[u8]) {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":{},"capabilities":{},"clientInfo":{CLIENT_INFO}}}}}"#,
            serde_json::to_string(&self.version).unwrap_or_default(),
            self.capabilities,
        );
        out.clear();
        self.head(out, "POST", None);
        out.extend_from_slice(own);
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(body.as_bytes());
    }
}

/// The `clientInfo` this client sends.
pub(crate) const CLIENT_INFO: &str = concat!(
    r#"{"name":"mcpfast-engine","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// One open MCP session: its id (if the server minted one) and the negotiated version.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) id: Option<String>,
    pub(crate) version: String,
}

impl Session {
    pub(crate) fn new(id: Option<String>, version: String) -> Session {
        Session { id, version }
    }
}

/// Why one request failed.
#[derive(Debug)]
pub(crate) enum Problem {
    Exchange(ExchangeError),
    ContentType,
    ToolError,
    NoSessionId,
    BadSessionId,
    Version(String),
}

impl Problem {
    /// A short, low-cardinality reason, e.g. `http 404`, `timeout`, `jsonrpc error -32602`.
    pub(crate) fn reason(&self) -> String {
        match self {
            Problem::Exchange(e) => e.kind(),
            Problem::ContentType => "reply neither application/json nor text/event-stream".into(),
            Problem::ToolError => "result has isError: true".into(),
            Problem::NoSessionId => "no Mcp-Session-Id in the reply".into(),
            Problem::BadSessionId => "invalid Mcp-Session-Id".into(),
            Problem::Version(v) => format!("server chose unknown protocol version {v:?}"),
        }
    }
}

/// The failure reason of a refused reply (`http 401 invalid_token`, `http 429 rate limited
/// (Retry-After 2 s)`, `http 503 too many connections (Retry-After 1 s)`) and the wait its
/// `Retry-After` asks for.
pub(crate) fn refusal(p: &ResponseParser) -> (String, Option<f64>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let (reason, wait) = mcpfast_core::refused::refusal(
        p.status,
        p.www_authenticate.as_deref(),
        p.retry_after.as_deref(),
        now,
    );
    (with_body_reason(reason, p.status, &p.body), wait)
}

/// `reason` with the cause `body` gives when the status alone says nothing of why (a server
/// that refuses past a limit says which in its body): after the status, before a `Retry-After`
/// wait, which says when to come back, not why.
fn with_body_reason(mut reason: String, status: u16, body: &[u8]) -> String {
    let bare = format!("http {status}");
    let says_nothing = reason
        .strip_prefix(&bare)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(" (Retry-After"));
    if says_nothing {
        if let Some(why) = body_reason(body) {
            reason.insert_str(bare.len(), &format!(" {why}"));
        }
    }
    reason
}

/// Longest cause a refusal's body adds to its failure reason (a cause stays one entry of the
/// failures table; a long text is cut, not kept whole).
const MAX_BODY_REASON: usize = 60;

/// What a refusal's body says of its cause: a JSON-RPC error's `message` (or a JSON object's
/// own `message`, `error` or `detail` string), else the first line of a text body; None when
/// it says nothing readable.
pub(crate) fn body_reason(body: &[u8]) -> Option<String> {
    let trimmed = body.trim_ascii();
    let text = if trimmed.first() == Some(&b'{') {
        let error = crate::check::member(trimmed, "error");
        error
            .and_then(|e| crate::check::string_member(e, "message"))
            .or_else(|| {
                ["message", "error", "detail"]
                    .iter()
                    .find_map(|k| crate::check::string_member(trimmed, k))
            })?
    } else {
        let text = std::str::from_utf8(trimmed).ok()?;
        text.lines().next()?.to_owned()
    };
    let text: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_BODY_REASON)
        .collect();
    (!text.is_empty() && !text.starts_with('<')).then_some(text)
}

/// The start of a reply that failed its check, for the report's samples.
#[cold]
pub(crate) fn reply_sample(conn: &Conn) -> String {
    const KEEP: usize = 300;
    let p = &conn.parser;
    let body = &p.body[..p.body.len().min(KEEP)];
    let more = if p.body.len() > KEEP { "..." } else { "" };
    format!(
        "HTTP {} {:?}: {}{more}",
        p.status,
        p.content_type,
        String::from_utf8_lossy(body)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_well_formed() {
        let target = Target::parse("http://127.0.0.1:1/mcp").expect("parsed");
        let mut proto = Proto::new(target, "2025-11-25".into());
        proto.add_header("x-api-key", "k1");
        let mut out = Vec::new();
        proto.initialize_request(&mut out, 1, b"Authorization: Bearer t1\r\n");
        let text = String::from_utf8(out.clone()).expect("utf8");
        assert!(text.starts_with("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"));
        assert!(text.contains("\r\nx-api-key: k1\r\nAuthorization: Bearer t1\r\nContent-Length: "));
        assert!(!text.contains("Mcp-Session-Id"));
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.ends_with(&format!("Content-Length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["params"]["protocolVersion"], "2025-11-25");

        let session = Session::new(Some("s1".into()), "2025-06-18".into());
        let mut head = Vec::new();
        proto.head(&mut head, "DELETE", Some(&session));
        let head = String::from_utf8(head).expect("utf8");
        assert!(head.starts_with("DELETE /mcp HTTP/1.1\r\n"));
        assert!(head.contains("\r\nMcp-Session-Id: s1\r\nMCP-Protocol-Version: 2025-06-18\r\n"));
    }

    #[test]
    fn a_refusals_body_names_its_cause() {
        let jsonrpc = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"too many connections"}}"#;
        assert_eq!(
            body_reason(jsonrpc).as_deref(),
            Some("too many connections")
        );
        assert_eq!(
            body_reason(br#"{"detail": "Service  Unavailable"}"#).as_deref(),
            Some("Service Unavailable")
        );
        assert_eq!(
            body_reason(b"overloaded\r\nretry later").as_deref(),
            Some("overloaded")
        );
        assert_eq!(body_reason(b"<html><body>503</body></html>"), None);
        // the cause stays with a Retry-After wait, and a status that names its own is left alone
        assert_eq!(
            with_body_reason("http 503 (Retry-After 1 s)".into(), 503, jsonrpc),
            "http 503 too many connections (Retry-After 1 s)"
        );
        assert_eq!(
            with_body_reason("http 503".into(), 503, jsonrpc),
            "http 503 too many connections"
        );
        assert_eq!(
            with_body_reason(
                "http 429 rate limited (Retry-After 2 s)".into(),
                429,
                jsonrpc
            ),
            "http 429 rate limited (Retry-After 2 s)"
        );
        assert_eq!(body_reason(b"  "), None);
        assert_eq!(body_reason(b"{}"), None);
        let long = "x".repeat(200);
        assert_eq!(
            body_reason(long.as_bytes()).map(|r| r.len()),
            Some(MAX_BODY_REASON)
        );
    }
}
