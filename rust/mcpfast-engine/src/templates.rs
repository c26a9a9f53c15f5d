//! Request templates: each request body of a family built once with its id (and progress
//! token) left out, the `_meta` of the 2026-07-28 era, and the SEP-2243 header value codec.

use mcpfast_core::meta;
use serde_json::{Map, Value};

use crate::check::Want;
use crate::config::{use_of_mark, Config, USE_MARK};
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

/// What goes between two parts of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The request id (and the progress token, which is the id).
    Id,
    /// The value of use `k` of an `agents` step (JSON text).
    Use(usize),
}

/// A request body with the id (and maybe the progress token, and an `agents` step's values)
/// left out: `parts` joined by the `slots`.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    /// Stats name id.
    pub(crate) name: usize,
    parts: Vec<Vec<u8>>,
    /// `slots[i]` goes between `parts[i]` and `parts[i + 1]`.
    slots: Vec<Slot>,
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
        let (parts, slots) = split_marks(&text);
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
            slots,
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

    /// The body for request `id`, with `values` (JSON texts) for an `agents` step's uses (a
    /// use without one is `null`).
    pub(crate) fn body(&self, id: i64, values: &[String], out: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(id).as_bytes();
        out.extend_from_slice(&self.parts[0]);
        for (slot, part) in self.slots.iter().zip(&self.parts[1..]) {
            out.extend_from_slice(match slot {
                Slot::Id => digits,
                Slot::Use(k) => values.get(*k).map_or(b"null".as_slice(), |v| v.as_bytes()),
            });
            out.extend_from_slice(part);
        }
    }

    pub(crate) fn body_len(&self, id: i64, values: &[String]) -> usize {
        let mut digits = itoa::Buffer::new();
        let n = digits.format(id).len();
        let filled: usize = self
            .slots
            .iter()
            .map(|slot| match slot {
                Slot::Id => n,
                Slot::Use(k) => values.get(*k).map_or(4, String::len),
            })
            .sum();
        self.parts.iter().map(Vec::len).sum::<usize>() + filled
    }
}

/// The JSON text of a message cut at each mark (the id's, and the uses' of an `agents` step):
/// the parts, and what goes between them.
fn split_marks(text: &str) -> (Vec<Vec<u8>>, Vec<Slot>) {
    let id = Value::String(ID_MARK.into()).to_string();
    // a use's mark as JSON text begins so (its \u{1} escaped), up to the index
    let use_start = Value::String(USE_MARK.into()).to_string();
    let use_start = &use_start[..use_start.len() - 1];
    let mut parts = Vec::new();
    let mut slots = Vec::new();
    let mut rest = text;
    loop {
        // the nearest mark: the id's, or a use's
        let next_id = rest.find(&id).map(|at| (at, id.len(), Slot::Id));
        let next_use = rest.find(use_start).and_then(|at| {
            let tail = &rest[at + 1..];
            let end = tail.find('"')?;
            let mark: String = serde_json::from_str(&rest[at..at + end + 2]).ok()?;
            let k = use_of_mark(&mark)?;
            Some((at, end + 2, Slot::Use(k)))
        });
        let next = match (next_id, next_use) {
            (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        let Some((at, len, slot)) = next else {
            parts.push(rest.as_bytes().to_vec());
            return (parts, slots);
        };
        parts.push(rest.as_bytes()[..at].to_vec());
        slots.push(slot);
        rest = &rest[at + len..];
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
        t.body(42, &[], &mut body);
        assert_eq!(body.len(), t.body_len(42, &[]));
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
