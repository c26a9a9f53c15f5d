//! MCP over Streamable HTTP: where the endpoint is, the requests (handshake era and 2026-07-28
//! stateless), and the reasons a request fails.

use std::time::Duration;

use crate::check::Verdict;
use crate::http::{Conn, ExchangeError};

/// Where the MCP endpoint is, as the URL names it (resolution is [`crate::net`]'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `https://`: every connection is TLS.
    pub tls: bool,
    /// The URL's host without brackets: the TLS server name and what `--connect-to` matches.
    pub hostname: String,
    pub port: u16,
    /// `Host` header value (the URL's authority).
    pub host: String,
    /// Request target (path and query).
    pub path: String,
}

impl Target {
    /// Parse `http[s]://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Target, String> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(format!("not an http:// or https:// URL: {url}"));
        };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
            Some(i) => (&rest[..i], "/"),
            None => (rest, "/"),
        };
        let bad = || format!("bad host in URL: {url}");
        if authority.is_empty() || authority.contains('@') {
            return Err(bad());
        }
        let default = if tls { 443 } else { 80 };
        let (hostname, port) = split_host_port(authority, default).ok_or_else(bad)?;
        let path = match path.find('#') {
            Some(i) => &path[..i],
            None => path,
        };
        Ok(Target {
            tls,
            hostname,
            port,
            host: authority.to_string(),
            path: path.to_string(),
        })
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` as (host without brackets, port).
pub fn split_host_port(s: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':')?)),
        }
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty()
        || host.contains([' ', '/', '[', ']'])
        || (!s.starts_with('[') && host.contains(':'))
    {
        return None;
    }
    let port = match port {
        None => default_port,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
        Some(_) => return None,
    };
    Some((host.to_string(), port))
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

    /// The `initialize` request, with `own` (this user's header lines) after the shared ones.
    pub fn initialize_request(&self, out: &mut Vec<u8>, id: i64, own: &[u8]) {
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
pub const CLIENT_INFO: &str = concat!(
    r#"{"name":"mcpfast-engine","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// One open MCP session: its id (if the server minted one) and the negotiated version.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: Option<String>,
    pub version: String,
    /// Next JSON-RPC id.
    pub next_id: i64,
}

impl Session {
    pub fn new(id: Option<String>, version: String, next_id: i64) -> Session {
        Session {
            id,
            version,
            next_id,
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

/// The start of a reply that failed its check, for the report's samples.
#[cold]
pub fn reply_sample(conn: &Conn) -> String {
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
    fn urls() {
        let t = Target::parse("http://127.0.0.1:18500/mcp").expect("parsed");
        assert_eq!(
            (t.tls, t.hostname.as_str(), t.port),
            (false, "127.0.0.1", 18500)
        );
        assert_eq!(t.host, "127.0.0.1:18500");
        assert_eq!(t.path, "/mcp");
        let t = Target::parse("http://127.0.0.1").expect("parsed");
        assert_eq!(t.port, 80);
        assert_eq!(t.path, "/");
        let t = Target::parse("http://[::1]:9000/a?b=c#frag").expect("parsed");
        assert_eq!((t.hostname.as_str(), t.port), ("::1", 9000));
        assert_eq!(t.host, "[::1]:9000");
        assert_eq!(t.path, "/a?b=c");
        let t = Target::parse("https://mcp.example.com/mcp").expect("parsed");
        assert_eq!(
            (t.tls, t.hostname.as_str(), t.port),
            (true, "mcp.example.com", 443)
        );
        assert_eq!(t.host, "mcp.example.com");
        let t = Target::parse("https://h.test?x=1").expect("parsed");
        assert_eq!(t.path, "/");
        for bad in [
            "ftp://h/",
            "h:80/mcp",
            "http:///mcp",
            "http://u@h/",
            "http://h:port/",
            "http://h:/",
            "http://[::1/",
            "http://::1/",
            "https://h:99999/",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_are_well_formed() {
        let target = Target::parse("http://127.0.0.1:1/mcp").expect("parsed");
        let args = serde_json::json!({"text": "hi \"there\""});
        let mut proto = Proto::new(
            target,
            "2025-11-25".into(),
            Duration::from_secs(1),
            "echo",
            &args,
        );
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

        let body = format!(
            r#"{{"jsonrpc":"2.0","id":2{}"#,
            String::from_utf8_lossy(&proto.call_suffix)
        );
        let v: serde_json::Value = serde_json::from_str(&body).expect("call body is json");
        assert_eq!(v["params"]["arguments"]["text"], "hi \"there\"");
        let session = Session::new(Some("s1".into()), "2025-06-18".into(), 2);
        let mut head = Vec::new();
        proto.head(&mut head, "DELETE", Some(&session));
        let head = String::from_utf8(head).expect("utf8");
        assert!(head.starts_with("DELETE /mcp HTTP/1.1\r\n"));
        assert!(head.contains("\r\nMcp-Session-Id: s1\r\nMCP-Protocol-Version: 2025-06-18\r\n"));
    }
}
