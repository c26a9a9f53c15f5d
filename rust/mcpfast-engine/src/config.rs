//! The engine's configuration: one JSON object, validated field by field (README.md lists them).

use std::time::Duration;

use serde_json::{Map, Value};

use crate::mcp::Target;
use crate::net::{ConnectTo, TlsOptions};

/// The protocol versions this engine speaks.
pub const HANDSHAKE_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
pub const STATELESS_VERSIONS: &[&str] = &["2026-07-28"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Stdio,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    ToolsCall,
    Handshake,
    SessionChurn,
    SseStreaming,
    Mixed,
    /// HTTP only: each user is one keep-alive connection that opens sessions (one per
    /// iteration, while `iterations` last) and keeps them until the engine stops, then DELETEs
    /// them (unless `hold_delete` is false).
    Hold,
}

/// When a user opens a new connection (besides after the server closed one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewConnection {
    /// One kept-alive connection per user.
    Keep,
    /// A new connection for every session (its initialize opens it).
    Session,
    /// A new connection for every request (each sent with `Connection: close`).
    Request,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    Uniform,
    Poisson,
}

/// One entry of a weighted mix: a method with its params (tools/call: name + arguments).
#[derive(Debug, Clone)]
pub struct MixItem {
    pub method: String,
    /// The params object, JSON text (without `_meta`); None: no params.
    pub params: Option<String>,
    /// The `Mcp-Name` value and stats-name suffix (tool / prompt name, resource uri).
    pub name: Option<String>,
    pub weight: u32,
    /// `"stream": true`: sent with a progress token, its progress/SSE events timed (as `sse_streaming`).
    pub stream: bool,
}

impl MixItem {
    /// Stats name as the Python users report it: `tools/call:echo`, `prompts/get:greet`,
    /// `resources/read` (the uri is not in the name), `tools/list`.
    pub fn stat_name(&self) -> String {
        match &self.name {
            Some(n) if self.method != "resources/read" => format!("{}:{}", self.method, n),
            _ => self.method.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub transport: Transport,
    pub target: Option<Target>,
    pub url: String,
    /// Extra request headers (name, value), already checked for CR/LF.
    pub headers: Vec<(String, String)>,
    /// Bearer tokens handed to the users in turn (user slot i gets token i mod n); empty: none.
    pub bearer_tokens: Vec<String>,
    pub tls: TlsOptions,
    pub connect_to: Vec<ConnectTo>,
    pub new_connection: NewConnection,
    /// A cookie jar per user (sticky sessions behind balancers).
    pub cookies: bool,
    /// After a refusal with `Retry-After`, the user waits that long before its next request.
    pub retry_after: bool,
    pub command: Vec<String>,
    pub inflight_per_process: usize,
    pub family: Family,
    pub protocol_version: String,
    /// JSON text of the client capabilities object.
    pub client_capabilities: String,
    pub tool: String,
    /// JSON text of the arguments object.
    pub arguments: String,
    pub mix: Vec<MixItem>,
    pub stream_tool: String,
    pub stream_arguments: String,
    pub churn_delete_share: f64,
    pub threads: usize,
    pub rate: Option<f64>,
    pub arrivals: Arrivals,
    pub max_inflight: usize,
    pub timeout: Duration,
    pub max_reply_bytes: usize,
    pub max_sessions: usize,
    pub request_type: String,
    pub seed: u64,
    /// `handshake` / `session_churn`: send the first tools/call of each session (false: the
    /// cycle is initialize, initialized, DELETE).
    pub handshake_call: bool,
    /// `handshake` / `session_churn`: also record the whole cycle (initialize start to DELETE
    /// end, complete cycles only) as the `cycle` row.
    pub cycle_latency: bool,
    /// The whole engine starts at most this many iterations (a handshake or churn cycle, a held
    /// session, a request of the per-session families); `Engine::add_iterations` adds more.
    /// None: no bound.
    pub iterations: Option<u64>,
    /// `hold`: DELETE the held sessions at stop.
    pub hold_delete: bool,
    /// A `progress` event (message: the count) each time this many iterations have ended.
    pub progress_every: Option<u64>,
    /// Open model: an arrival sent more than this after its intended time counts as late.
    pub late_after: Duration,
    /// `sse_streaming` over HTTP (handshake era): every this many stream calls (the 1st, the
    /// 11th, ... with 10) the session also listens on its standalone GET stream for
    /// `get_stream`; 0: never.
    pub get_stream_every: u64,
    pub get_stream: Duration,
}

impl Config {
    pub fn stateless(&self) -> bool {
        STATELESS_VERSIONS.contains(&self.protocol_version.as_str())
    }
}

fn err(field: &str, what: impl std::fmt::Display) -> String {
    format!("engine config: {field}: {what}")
}

fn get_str(o: &Map<String, Value>, field: &str, default: &str) -> Result<String, String> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(default.to_string()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(err(field, "must be a string")),
    }
}

fn get_f64(o: &Map<String, Value>, field: &str, default: f64) -> Result<f64, String> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|v| v.is_finite())
            .ok_or_else(|| err(field, "must be a finite number")),
        Some(_) => Err(err(field, "must be a number")),
    }
}

fn get_usize(
    o: &Map<String, Value>,
    field: &str,
    default: usize,
    min: usize,
    max: usize,
) -> Result<usize, String> {
    let v = match o.get(field) {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| err(field, "must be a non-negative integer"))?,
        Some(_) => return Err(err(field, "must be an integer")),
    };
    let v = usize::try_from(v).map_err(|_| err(field, "too large"))?;
    if v < min || v > max {
        return Err(err(field, format!("must be in {min}..={max}, got {v}")));
    }
    Ok(v)
}

fn get_bool(o: &Map<String, Value>, field: &str, default: bool) -> Result<bool, String> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(err(field, "must be true or false")),
    }
}

fn get_object_text(o: &Map<String, Value>, field: &str) -> Result<String, String> {
    match o.get(field) {
        None | Some(Value::Null) => Ok("{}".into()),
        Some(v @ Value::Object(_)) => Ok(v.to_string()),
        Some(_) => Err(err(field, "must be an object")),
    }
}

fn get_strings(o: &Map<String, Value>, field: &str) -> Result<Vec<String>, String> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| err(field, "must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(err(field, "must be a list of strings")),
    }
}

/// Bearer tokens as the `Authorization` line carries them: each non-empty, without a space or
/// a byte that would break the header.
pub fn check_bearer_tokens(tokens: &[String]) -> Result<(), String> {
    match tokens
        .iter()
        .position(|t| t.is_empty() || !header_safe(t) || t.contains(' '))
    {
        Some(i) => Err(format!(
            "token {}: empty or not a valid header value",
            i + 1
        )),
        None => Ok(()),
    }
}

/// A header value or name must not break the request head.
fn header_safe(s: &str) -> bool {
    !s.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
}

impl Config {
    /// Parse and validate the JSON config; the error names the bad field.
    pub fn parse(bytes: &[u8]) -> Result<Config, String> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("engine config: not JSON: {e}"))?;
        let Value::Object(o) = v else {
            return Err("engine config: must be a JSON object".into());
        };
        const KNOWN: &[&str] = &[
            "transport",
            "url",
            "headers",
            "command",
            "inflight_per_process",
            "family",
            "protocol_version",
            "client_capabilities",
            "tool",
            "arguments",
            "mix",
            "stream_tool",
            "stream_arguments",
            "churn_delete_share",
            "threads",
            "rate",
            "arrivals",
            "max_inflight",
            "timeout_s",
            "max_reply_bytes",
            "max_sessions",
            "request_type",
            "seed",
            "handshake_call",
            "cycle_latency",
            "iterations",
            "hold_delete",
            "progress_every",
            "late_after_s",
            "get_stream_every",
            "get_stream_s",
            "bearer_tokens",
            "ca_files",
            "client_cert",
            "client_key",
            "insecure",
            "connect_to",
            "new_connection",
            "cookies",
            "retry_after",
        ];
        if let Some(k) = o.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(err(k, "unknown field"));
        }
        let transport = match get_str(&o, "transport", "http")?.as_str() {
            "http" => Transport::Http,
            "stdio" => Transport::Stdio,
            other => {
                return Err(err(
                    "transport",
                    format!("'http' or 'stdio', not {other:?}"),
                ))
            }
        };
        let url = get_str(&o, "url", "")?;
        let target = if transport == Transport::Http {
            if url.is_empty() {
                return Err(err("url", "required for transport http"));
            }
            Some(Target::parse(&url).map_err(|e| err("url", e))?)
        } else {
            None
        };
        let mut headers = Vec::new();
        match o.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(h)) => {
                for (k, v) in h {
                    let Value::String(v) = v else {
                        return Err(err("headers", format!("{k}: value must be a string")));
                    };
                    if k.is_empty()
                        || !k
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
                        || !header_safe(v)
                    {
                        return Err(err("headers", format!("{k}: not a valid header")));
                    }
                    headers.push((k.clone(), v.clone()));
                }
            }
            Some(_) => return Err(err("headers", "must be an object of strings")),
        }
        let bearer_tokens = get_strings(&o, "bearer_tokens")?;
        check_bearer_tokens(&bearer_tokens).map_err(|e| err("bearer_tokens", e))?;
        if !bearer_tokens.is_empty()
            && headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        {
            return Err(err("headers", "Authorization and bearer_tokens both given"));
        }
        let optional_path = |field: &str| -> Result<Option<String>, String> {
            match get_str(&o, field, "")? {
                p if p.is_empty() => Ok(None),
                p => Ok(Some(p)),
            }
        };
        let tls = TlsOptions {
            ca_files: get_strings(&o, "ca_files")?,
            client_cert: optional_path("client_cert")?,
            client_key: optional_path("client_key")?,
            insecure: get_bool(&o, "insecure", false)?,
        };
        if tls.client_cert.is_some() != tls.client_key.is_some() {
            return Err(err("client_cert", "client_cert and client_key go together"));
        }
        let connect_to = get_strings(&o, "connect_to")?
            .iter()
            .map(|c| ConnectTo::parse(c).map_err(|e| err("connect_to", e)))
            .collect::<Result<Vec<_>, _>>()?;
        let new_connection = match get_str(&o, "new_connection", "keep")?.as_str() {
            "keep" => NewConnection::Keep,
            "session" => NewConnection::Session,
            "request" => NewConnection::Request,
            other => {
                return Err(err(
                    "new_connection",
                    format!("'keep', 'session' or 'request', not {other:?}"),
                ))
            }
        };
        let command = match o.get("command") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| err("command", "must be a list of strings"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err("command", "must be a list of strings")),
        };
        if transport == Transport::Stdio && command.is_empty() {
            return Err(err("command", "required (non-empty) for transport stdio"));
        }
        let family = match get_str(&o, "family", "tools_call")?.as_str() {
            "tools_call" => Family::ToolsCall,
            "handshake" => Family::Handshake,
            "session_churn" => Family::SessionChurn,
            "sse_streaming" => Family::SseStreaming,
            "mixed" => Family::Mixed,
            "hold" => Family::Hold,
            other => {
                return Err(err(
                    "family",
                    format!("one of tools_call, handshake, session_churn, sse_streaming, mixed, hold; not {other:?}"),
                ))
            }
        };
        if family == Family::Hold && transport != Transport::Http {
            return Err(err("family", "hold is an HTTP family"));
        }
        let protocol_version = get_str(&o, "protocol_version", "2025-11-25")?;
        if !HANDSHAKE_VERSIONS.contains(&protocol_version.as_str())
            && !STATELESS_VERSIONS.contains(&protocol_version.as_str())
        {
            return Err(err(
                "protocol_version",
                format!("unsupported {protocol_version:?} (known: {HANDSHAKE_VERSIONS:?}, {STATELESS_VERSIONS:?})"),
            ));
        }
        if family == Family::Hold && STATELESS_VERSIONS.contains(&protocol_version.as_str()) {
            return Err(err(
                "family",
                "hold keeps handshake-era sessions; 2026-07-28 has none",
            ));
        }
        if protocol_version == "2024-11-05" && transport == Transport::Http {
            return Err(err(
                "protocol_version",
                "2024-11-05 over HTTP is the HTTP+SSE transport, which the native engine does not speak",
            ));
        }
        let client_capabilities = get_object_text(&o, "client_capabilities")?;
        let tool = get_str(&o, "tool", "echo")?;
        let arguments = get_object_text(&o, "arguments")?;
        let mut mix = Vec::new();
        match o.get("mix") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    mix.push(mix_item(item).map_err(|e| err(&format!("mix[{i}]"), e))?);
                }
            }
            Some(_) => return Err(err("mix", "must be a list")),
        }
        if family == Family::Mixed {
            if mix.is_empty() {
                return Err(err("mix", "required (non-empty) for family mixed"));
            }
            if mix.iter().all(|m| m.weight == 0) {
                return Err(err("mix", "all weights are 0"));
            }
        }
        let stream_tool = get_str(&o, "stream_tool", "stream")?;
        let stream_arguments = match o.get("stream_arguments") {
            None | Some(Value::Null) => r#"{"n":10}"#.to_string(),
            Some(v @ Value::Object(_)) => v.to_string(),
            Some(_) => return Err(err("stream_arguments", "must be an object")),
        };
        let churn_delete_share = get_f64(&o, "churn_delete_share", 1.0)?;
        if !(0.0..=1.0).contains(&churn_delete_share) {
            return Err(err("churn_delete_share", "must be in 0..=1"));
        }
        let threads = get_usize(&o, "threads", 1, 1, 256)?;
        let rate = match o.get("rate") {
            None | Some(Value::Null) => None,
            Some(_) => {
                let r = get_f64(&o, "rate", 0.0)?;
                if r <= 0.0 {
                    return Err(err("rate", "must be > 0 (or null for the closed model)"));
                }
                Some(r)
            }
        };
        let arrivals = match get_str(&o, "arrivals", "uniform")?.as_str() {
            "uniform" => Arrivals::Uniform,
            "poisson" => Arrivals::Poisson,
            other => {
                return Err(err(
                    "arrivals",
                    format!("'uniform' or 'poisson', not {other:?}"),
                ))
            }
        };
        let max_inflight = get_usize(&o, "max_inflight", 4096, 1, 1 << 24)?;
        let timeout_s = get_f64(&o, "timeout_s", 30.0)?;
        if !(timeout_s > 0.0 && timeout_s <= 3600.0) {
            return Err(err("timeout_s", "must be in (0, 3600]"));
        }
        let max_reply_bytes = get_usize(&o, "max_reply_bytes", 16 * 1024 * 1024, 1024, 1 << 30)?;
        let max_sessions = get_usize(&o, "max_sessions", 100_000, 1, 10_000_000)?;
        let inflight_per_process = get_usize(&o, "inflight_per_process", 32, 1, 65_536)?;
        let default_type = match transport {
            Transport::Http => "mcp-http",
            Transport::Stdio => "mcp-stdio",
        };
        let request_type = get_str(&o, "request_type", default_type)?;
        let seed = get_usize(&o, "seed", 0x5eed, 0, usize::MAX)? as u64;
        let handshake_call = get_bool(&o, "handshake_call", true)?;
        let cycle_latency = get_bool(&o, "cycle_latency", false)?;
        let hold_delete = get_bool(&o, "hold_delete", true)?;
        let iterations = match o.get("iterations") {
            None | Some(Value::Null) => None,
            Some(_) => Some(get_usize(&o, "iterations", 0, 0, usize::MAX)? as u64),
        };
        let progress_every = match o.get("progress_every") {
            None | Some(Value::Null) => None,
            Some(_) => Some(get_usize(&o, "progress_every", 1, 1, usize::MAX)? as u64),
        };
        let late_after_s = get_f64(&o, "late_after_s", 0.001)?;
        if !(0.0..=3600.0).contains(&late_after_s) {
            return Err(err("late_after_s", "must be in 0..=3600"));
        }
        let get_stream_every = get_usize(&o, "get_stream_every", 10, 0, usize::MAX)? as u64;
        let get_stream_s = get_f64(&o, "get_stream_s", 0.5)?;
        if !(get_stream_s > 0.0 && get_stream_s <= 3600.0) {
            return Err(err("get_stream_s", "must be in (0, 3600]"));
        }
        Ok(Config {
            transport,
            target,
            url,
            headers,
            bearer_tokens,
            tls,
            connect_to,
            new_connection,
            cookies: get_bool(&o, "cookies", true)?,
            retry_after: get_bool(&o, "retry_after", false)?,
            command,
            inflight_per_process,
            family,
            protocol_version,
            client_capabilities,
            tool,
            arguments,
            mix,
            stream_tool,
            stream_arguments,
            churn_delete_share,
            threads,
            rate,
            arrivals,
            max_inflight,
            timeout: Duration::from_secs_f64(timeout_s),
            max_reply_bytes,
            max_sessions,
            request_type,
            seed,
            handshake_call,
            cycle_latency,
            iterations,
            hold_delete,
            progress_every,
            late_after: Duration::from_secs_f64(late_after_s),
            get_stream_every,
            get_stream: Duration::from_secs_f64(get_stream_s),
        })
    }
}

fn mix_item(item: &Value) -> Result<MixItem, String> {
    let Value::Object(o) = item else {
        return Err("must be an object".into());
    };
    let weight = match o.get("weight") {
        None | Some(Value::Null) => 1,
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|w| u32::try_from(w).ok())
            .ok_or("weight must be a non-negative integer")?,
        Some(_) => return Err("weight must be an integer".into()),
    };
    let stream = match o.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("stream must be true or false".into()),
    };
    if let Some(tool) = o.get("tool") {
        let Value::String(tool) = tool else {
            return Err("tool must be a string".into());
        };
        let args = match o.get("arguments") {
            None | Some(Value::Null) => "{}".to_string(),
            Some(v @ Value::Object(_)) => v.to_string(),
            Some(_) => return Err("arguments must be an object".into()),
        };
        let params = format!(
            r#"{{"name":{},"arguments":{args}}}"#,
            Value::String(tool.clone())
        );
        return Ok(MixItem {
            method: "tools/call".into(),
            params: Some(params),
            name: Some(tool.clone()),
            weight,
            stream,
        });
    }
    let Some(Value::String(method)) = o.get("method") else {
        return Err("needs \"tool\" or \"method\" (a string)".into());
    };
    if method == "initialize" || method.starts_with("notifications/") {
        return Err(format!("method {method:?} cannot be mixed"));
    }
    if stream && method != "tools/call" {
        return Err(format!("stream applies to tools/call, not {method:?}"));
    }
    let params = match o.get("params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(p)) => Some(p.clone()),
        Some(_) => return Err("params must be an object".into()),
    };
    let key = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    let name = key
        .and_then(|k| params.as_ref().and_then(|p| p.get(k)))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(MixItem {
        method: method.clone(),
        params: params.map(|p| Value::Object(p).to_string()),
        name,
        weight,
        stream,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_errors_name_the_field() {
        let c = Config::parse(br#"{"url":"http://127.0.0.1:1/mcp"}"#).expect("valid");
        assert_eq!(c.family, Family::ToolsCall);
        assert_eq!(c.request_type, "mcp-http");
        assert_eq!(c.arguments, "{}");
        for (bad, field) in [
            (
                r#"{"transport":"x","url":"http://127.0.0.1:1/"}"#,
                "transport",
            ),
            (r#"{"url":"ftp://x/"}"#, "url"),
            (
                r#"{"url":"http://x:1/","bearer_tokens":["a",""]}"#,
                "bearer_tokens",
            ),
            (
                r#"{"url":"http://x:1/","bearer_tokens":"a"}"#,
                "bearer_tokens",
            ),
            (
                r#"{"url":"http://x:1/","connect_to":["x:1:y"]}"#,
                "connect_to",
            ),
            (
                r#"{"url":"http://x:1/","new_connection":"never"}"#,
                "new_connection",
            ),
            (
                r#"{"url":"https://x:1/","client_cert":"/c.pem"}"#,
                "client_cert",
            ),
            (
                r#"{"url":"http://x:1/","headers":{"Authorization":"y"},"bearer_tokens":["t"]}"#,
                "headers",
            ),
            (r#"{"transport":"stdio"}"#, "command"),
            (r#"{"url":"http://127.0.0.1:1/","threads":0}"#, "threads"),
            (r#"{"url":"http://127.0.0.1:1/","rate":-1}"#, "rate"),
            (r#"{"url":"http://127.0.0.1:1/","family":"mixed"}"#, "mix"),
            (r#"{"url":"http://127.0.0.1:1/","bogus":1}"#, "bogus"),
            (
                r#"{"url":"http://127.0.0.1:1/","headers":{"A":"b\r\nc"}}"#,
                "headers",
            ),
            (
                r#"{"url":"http://127.0.0.1:1/","protocol_version":"1999"}"#,
                "protocol_version",
            ),
        ] {
            let e = Config::parse(bad.as_bytes()).expect_err(bad);
            assert!(e.contains(field), "{e} should name {field}");
        }
    }

    #[test]
    fn mix_items() {
        let c = Config::parse(
            br#"{"url":"http://127.0.0.1:1/","family":"mixed","mix":[{"tool":"echo","arguments":{"text":"x"},"weight":9},{"method":"tools/list","weight":1},{"method":"resources/read","params":{"uri":"file:///a"}}]}"#,
        )
        .expect("valid");
        assert_eq!(c.mix[0].stat_name(), "tools/call:echo");
        assert_eq!(c.mix[1].stat_name(), "tools/list");
        assert_eq!(c.mix[2].stat_name(), "resources/read");
        assert_eq!(c.mix[2].name.as_deref(), Some("file:///a"));
        assert!(!c.mix[0].stream);
    }

    #[test]
    fn mix_stream_items() {
        let c = Config::parse(
            br#"{"url":"http://127.0.0.1:1/","family":"mixed","mix":[{"method":"tools/call","params":{"name":"slow","arguments":{"steps":4}},"stream":true},{"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}}]}"#,
        )
        .expect("valid");
        assert!(c.mix[0].stream);
        assert_eq!(c.mix[0].stat_name(), "tools/call:slow");
        assert_eq!(c.mix[1].stat_name(), "completion/complete");
        for (bad, what) in [
            (
                r#"{"method":"tools/list","stream":true}"#,
                "stream applies to tools/call",
            ),
            (
                r#"{"tool":"echo","stream":"yes"}"#,
                "stream must be true or false",
            ),
        ] {
            let text = format!(r#"{{"url":"http://127.0.0.1:1/","family":"mixed","mix":[{bad}]}}"#);
            let e = Config::parse(text.as_bytes()).expect_err(bad);
            assert!(e.contains("mix[0]") && e.contains(what), "{e}");
        }
    }
}
