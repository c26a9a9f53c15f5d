//! Request templates: each request body of a family built once with its id (and progress
//! token) left out, the `_meta` of the 2026-07-28 era, and the SEP-2243 header value codec.

use mcpfast_core::meta;
use serde_json::{Map, Value};

use crate::check::Want;
use crate::config::Config;
use crate::mcp::CLIENT_INFO;

/// The `_meta` every 2026-07-28 request carries.
fn modern_meta(cfg: &Config) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(
        meta::PROTOCOL_VERSION.into(),
        Value::String(cfg.stateless_version().to_owned()),
    );
    meta.insert(
        meta::CLIENT_CAPABILITIES.into(),
        serde_json::from_str(&cfg.client_capabilities).unwrap_or(Value::Object(Map::new())),
    );
    meta.insert(
        meta::CLIENT_INFO.into(),
        serde_json::from_str(CLIENT_INFO).unwrap_or(Value::Null),
    );
    meta
}

const ID_MARK: &str = "\u{1}mcpfast-id\u{1}";

/// A request body with the id (and maybe the progress token) left out: `parts` joined by the id.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    /// Stats name id.
    pub(crate) name: usize,
    parts: Vec<Vec<u8>>,
    /// Per-request headers (2026-07-28: `Mcp-Method`, `Mcp-Name`).
    pub(crate) headers: Vec<u8>,
    pub(crate) want: Want,
    pub(crate) weight: u32,
    /// A progress token (= the id) in `_meta`.
    pub(crate) progress: bool,
}

impl Template {
    /// A request of `method` in the era given: `stateless` (2026-07-28: `_meta` and the
    /// `Mcp-*` headers; usually `cfg.stateless()`) or the handshake era's.
    pub(crate) fn new(
        stateless: bool,
        cfg: &Config,
        method: &str,
        params: Option<&str>,
        header_name: Option<&str>,
        name: usize,
        progress: bool,
    ) -> Template {
        let mut params: Option<Value> = params.and_then(|p| serde_json::from_str(p).ok());
        if stateless || progress {
            let mut p = match params.take() {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            let mut meta = match p.remove("_meta") {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            if stateless {
                meta.extend(modern_meta(cfg));
            }
            if progress {
                meta.insert("progressToken".into(), Value::String(ID_MARK.into()));
            }
            p.insert("_meta".into(), Value::Object(meta));
            params = Some(Value::Object(p));
        }
        let mut msg = Map::new();
        msg.insert("jsonrpc".into(), Value::String("2.0".into()));
        msg.insert("id".into(), Value::String(ID_MARK.into()));
        msg.insert("method".into(), Value::String(method.into()));
        if let Some(p) = params {
            msg.insert("params".into(), p);
        }
        let text = Value::Object(msg).to_string();
        let mark = Value::String(ID_MARK.into()).to_string();
        let parts = text.split(&mark).map(|s| s.as_bytes().to_vec()).collect();
        let mut headers = Vec::new();
        if stateless {
            headers.extend_from_slice(b"Mcp-Method: ");
            headers.extend_from_slice(encode_header_value(method).as_bytes());
            headers.extend_from_slice(b"\r\n");
            if let Some(n) = header_name {
                headers.extend_from_slice(b"Mcp-Name: ");
                headers.extend_from_slice(encode_header_value(n).as_bytes());
                headers.extend_from_slice(b"\r\n");
            }
        }
        Template {
            name,
            parts,
            headers,
            want: if method == "tools/call" {
                Want::ToolCall
            } else {
                Want::Plain
            },
            weight: 1,
            progress,
        }
    }

    /// The body for request `id`.
    pub(crate) fn body(&self, id: i64, out: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(id).as_bytes();
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(digits);
            }
            out.extend_from_slice(p);
        }
    }

    pub(crate) fn body_len(&self, id: i64) -> usize {
        let mut digits = itoa::Buffer::new();
        let n = digits.format(id).len();
        self.parts.iter().map(Vec::len).sum::<usize>() + n * (self.parts.len() - 1)
    }
}

/// SEP-2243 header values: visible ASCII without surrounding spaces as is, anything else as
/// `=?base64?<base64 of the UTF-8>?=`.
fn encode_header_value(v: &str) -> String {
    let safe = !v.is_empty()
        && v.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !v.starts_with(' ')
        && !v.ends_with(' ')
        && (!v.starts_with("=?") || !v.ends_with("?="));
    if safe {
        return v.to_string();
    }
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::from("=?base64?");
    for chunk in v.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out.push_str("?=");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::rows::FixedRow;

    #[test]
    fn header_values() {
        assert_eq!(encode_header_value("echo"), "echo");
        assert_eq!(encode_header_value(" x"), "=?base64?IHg=?=");
        assert_eq!(encode_header_value("é"), "=?base64?w6k=?=");
        assert_eq!(encode_header_value("abc"), "abc");
        assert_eq!(encode_header_value("a\u{1}bc"), "=?base64?YQFiYw==?=");
    }

    #[test]
    fn templates_carry_the_id_and_meta() {
        let cfg = Settings {
            url: Some("http://127.0.0.1:1/mcp".into()),
            protocol_version: "2026-07-28".into(),
            ..Settings::default()
        }
        .build()
        .expect("config");
        let t = Template::new(
            cfg.stateless(),
            &cfg,
            "tools/call",
            Some(r#"{"name":"echo","arguments":{"text":"hi"}}"#),
            Some("echo"),
            FixedRow::Call.id(),
            true,
        );
        let mut body = Vec::new();
        t.body(42, &mut body);
        assert_eq!(body.len(), t.body_len(42));
        let v: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["id"], 42);
        assert_eq!(v["params"]["_meta"]["progressToken"], 42);
        assert_eq!(
            v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(v["params"]["arguments"]["text"], "hi");
        let h = String::from_utf8(t.headers.clone()).expect("utf8");
        assert_eq!(h, "Mcp-Method: tools/call\r\nMcp-Name: echo\r\n");
    }
}
