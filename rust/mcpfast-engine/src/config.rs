//! The engine's configuration: [`Settings`] holds typed values with their defaults (README.md
//! lists them) and [`Settings::build`] validates them once into the [`Config`] the engine runs
//! on. Every error names its field, so the Python binding and `mcpfast-load` report a bad value
//! the same way.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use mcpfast_core::versions;
use serde_json::{Map, Value};

use crate::target::{ConnectTo, Target, TlsOptions};

/// A JSON object: tool arguments, client capabilities, the params of a mix entry.
pub type JsonObject = Map<String, Value>;

/// The message of a bad value: `engine config: <field>: <what>`.
pub fn field_error(field: &str, what: impl fmt::Display) -> String {
    format!("engine config: {field}: {what}")
}

/// An enum chosen by name in a config field: `FromStr` (the error names the field and the
/// choices) and `name()` come from the one list of (variant, name) pairs.
macro_rules! named_choices {
    ($ty:ident, $field:literal, [$($variant:ident => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// Every choice with its name, in the order the error message lists them.
            pub const CHOICES: &'static [($ty, &'static str)] = &[$(($ty::$variant, $name)),+];

            /// The name the config spells this choice with.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(text: &str) -> Result<$ty, String> {
                match text {
                    $($name => Ok($ty::$variant),)+
                    other => Err(field_error(
                        $field,
                        format!("one of {}; not {other:?}", [$($name),+].join(", ")),
                    )),
                }
            }
        }
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Stdio,
}

named_choices!(Transport, "transport", [Http => "http", Stdio => "stdio"]);

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
    /// HTTP only: each user alternates a fresh 2026-07-28 start (`server/discover`, the first
    /// call) and a fresh handshake-era one (`protocol_version`: initialize, initialized, the
    /// first call, DELETE) on its keep-alive connection.
    Discover,
    /// HTTP, 2026-07-28: each call of `tool` that returns a task (`io.modelcontextprotocol/tasks`)
    /// is polled with `tasks/get` until it ends; `tasks_cancel_share` of them get a
    /// `tasks/cancel` after their first poll.
    Tasks,
}

named_choices!(Family, "family", [
    ToolsCall => "tools_call",
    Handshake => "handshake",
    SessionChurn => "session_churn",
    SseStreaming => "sse_streaming",
    Mixed => "mixed",
    Hold => "hold",
    Discover => "discover",
    Tasks => "tasks",
]);

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

named_choices!(NewConnection, "new_connection", [
    Keep => "keep",
    Session => "session",
    Request => "request",
]);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    Uniform,
    Poisson,
}

named_choices!(Arrivals, "arrivals", [Uniform => "uniform", Poisson => "poisson"]);

/// One entry of `mix` as given: what it calls, its weight among the entries, and whether it is
/// streamed (`stream`: sent with a progress token, its progress and SSE events timed as
/// `sse_streaming` times them).
#[derive(Debug, Clone, PartialEq)]
pub struct MixItem {
    pub call: MixCall,
    pub weight: u32,
    pub stream: bool,
}

/// What a mix entry calls.
#[derive(Debug, Clone, PartialEq)]
pub enum MixCall {
    /// `tools/call` of the tool `name` with `arguments`.
    Tool { name: String, arguments: JsonObject },
    /// Any other method (or `tools/call` spelled out) with its params, if any.
    Method {
        method: String,
        params: Option<JsonObject>,
    },
}

/// A mix entry ready to send: a method with its params (tools/call: name + arguments).
#[derive(Debug, Clone)]
pub struct MixRequest {
    pub method: String,
    /// The params object, JSON text (without `_meta`); None: no params.
    pub params: Option<String>,
    /// The `Mcp-Name` value and stats-name suffix (tool / prompt name, resource uri).
    pub name: Option<String>,
    pub weight: u32,
    /// Sent with a progress token, its progress/SSE events timed (as `sse_streaming`).
    pub stream: bool,
}

impl MixRequest {
    /// Stats name as the Python users report it: `tools/call:echo`, `prompts/get:greet`,
    /// `resources/read` (the uri is not in the name), `tools/list`.
    pub(crate) fn stat_name(&self) -> String {
        match &self.name {
            Some(n) if self.method != "resources/read" => format!("{}:{}", self.method, n),
            _ => self.method.clone(),
        }
    }
}

/// The engine's settings as given, each with its default (`Settings::default()`); `build`
/// checks them and makes the [`Config`] an engine runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub transport: Transport,
    /// `http://host[:port]/path` or `https://...`; required over HTTP.
    pub url: Option<String>,
    /// Extra request headers (name, value), in the order given.
    pub headers: Vec<(String, String)>,
    pub bearer_tokens: Vec<String>,
    pub ca_files: Vec<String>,
    /// mTLS: PEM chain and its key (both or neither; an empty path is none).
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
    pub insecure: bool,
    /// `HOST:PORT:ADDR:PORT` each.
    pub connect_to: Vec<String>,
    pub new_connection: NewConnection,
    pub cookies: bool,
    pub retry_after: bool,
    /// argv of the stdio server; required over stdio.
    pub command: Vec<String>,
    pub inflight_per_process: usize,
    pub family: Family,
    pub protocol_version: String,
    pub client_capabilities: JsonObject,
    pub tool: String,
    pub arguments: JsonObject,
    pub mix: Vec<MixItem>,
    pub stream_tool: String,
    pub stream_arguments: JsonObject,
    pub churn_delete_share: f64,
    pub threads: usize,
    /// Open model: arrivals/s for the whole engine; None: the closed model.
    pub rate: Option<f64>,
    pub arrivals: Arrivals,
    pub max_inflight: usize,
    pub timeout_s: f64,
    pub max_reply_bytes: usize,
    pub max_sessions: usize,
    /// None: `mcp-http` or `mcp-stdio`, by transport.
    pub request_type: Option<String>,
    pub seed: u64,
    pub handshake_call: bool,
    pub cycle_latency: bool,
    pub iterations: Option<u64>,
    pub progress_every: Option<u64>,
    pub hold_delete: bool,
    pub late_after_s: f64,
    pub hold_stream: bool,
    /// `hold`: GET streams each user holds, one session each (0: sessions kept without streams).
    pub hold_streams: usize,
    /// `hold` with streams: the tool whose call makes the server notify every session (the
    /// fan-out); None: no trigger in this engine.
    pub hold_trigger: Option<String>,
    pub hold_trigger_every_s: f64,
    /// `hold` with streams: a file the trigger writes its rounds to (number, send time) and
    /// the listeners read them from, so that engines on one host share one trigger; None: this
    /// engine's own trigger only.
    pub hold_clock: Option<String>,
    /// `tasks`: the share of tasks cancelled after their first poll.
    pub tasks_cancel_share: f64,
}

impl Default for Settings {
    fn default() -> Self {
        let mut stream_arguments = JsonObject::new();
        stream_arguments.insert("n".into(), Value::from(10));
        Settings {
            transport: Transport::Http,
            url: None,
            headers: Vec::new(),
            bearer_tokens: Vec::new(),
            ca_files: Vec::new(),
            client_cert: None,
            client_key: None,
            insecure: false,
            connect_to: Vec::new(),
            new_connection: NewConnection::Keep,
            cookies: true,
            retry_after: false,
            command: Vec::new(),
            inflight_per_process: 32,
            family: Family::ToolsCall,
            protocol_version: "2025-11-25".into(),
            client_capabilities: JsonObject::new(),
            tool: "echo".into(),
            arguments: JsonObject::new(),
            mix: Vec::new(),
            stream_tool: "stream".into(),
            stream_arguments,
            churn_delete_share: 1.0,
            threads: 1,
            rate: None,
            arrivals: Arrivals::Uniform,
            max_inflight: 4096,
            timeout_s: 30.0,
            max_reply_bytes: 16 * 1024 * 1024,
            max_sessions: 100_000,
            request_type: None,
            seed: 0x5eed,
            handshake_call: true,
            cycle_latency: false,
            iterations: None,
            progress_every: None,
            hold_delete: true,
            late_after_s: 0.001,
            hold_stream: true,
            hold_streams: 0,
            hold_trigger: None,
            hold_trigger_every_s: 5.0,
            hold_clock: None,
            tasks_cancel_share: 0.0,
        }
    }
}

/// The validated configuration an engine runs on (made by [`Settings::build`]).
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
    pub mix: Vec<MixRequest>,
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
    /// `sse_streaming` over HTTP: each session holds its long-lived stream (the standalone GET
    /// stream, or a 2026-07-28 `subscriptions/listen`) beside its calls, on its own
    /// connection, for as long as it lives.
    pub hold_stream: bool,
    /// `hold`: GET streams each user holds (one session each); 0: sessions without streams.
    pub hold_streams: usize,
    /// `hold` with streams: the fan-out trigger's tool, and the time between its calls once
    /// every stream is open.
    pub hold_trigger: Option<String>,
    pub hold_trigger_every: Duration,
    /// `hold` with streams: the file of the trigger's rounds shared by engines on one host.
    pub hold_clock: Option<String>,
    /// `tasks`: the share of tasks cancelled after their first poll.
    pub tasks_cancel_share: f64,
}

impl Config {
    pub(crate) fn stateless(&self) -> bool {
        versions::STATELESS.contains(&self.protocol_version.as_str())
    }

    /// The version a 2026-07-28 request carries: `protocol_version`, or (`discover`, whose
    /// `protocol_version` is the handshake era's) the stateless era's own.
    pub(crate) fn stateless_version(&self) -> &str {
        if self.stateless() {
            &self.protocol_version
        } else {
            versions::STATELESS[0]
        }
    }
}

/// Bearer tokens as the `Authorization` line carries them: each non-empty, without a space or
/// a byte that would break the header.
pub(crate) fn check_bearer_tokens(tokens: &[String]) -> Result<(), String> {
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

/// `value` if it lies in `min..=max`.
fn in_range<T: PartialOrd + fmt::Display>(
    field: &str,
    value: T,
    min: T,
    max: T,
) -> Result<T, String> {
    if value < min || value > max {
        return Err(field_error(
            field,
            format!("must be in {min}..={max}, got {value}"),
        ));
    }
    Ok(value)
}

/// `value` if it is finite (a NaN or an infinity passes no range check by accident).
fn finite(field: &str, value: f64) -> Result<f64, String> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(field_error(field, "must be a finite number"))
    }
}

impl Settings {
    /// Check every value and make the engine's config; the error names the bad field.
    pub fn build(&self) -> Result<Config, String> {
        let transport = self.transport;
        let url = self.url.clone().unwrap_or_default();
        let target = if transport == Transport::Http {
            if url.is_empty() {
                return Err(field_error("url", "required for transport http"));
            }
            Some(Target::parse(&url).map_err(|e| field_error("url", e))?)
        } else {
            None
        };
        for (k, v) in &self.headers {
            if k.is_empty()
                || !k
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
                || !header_safe(v)
            {
                return Err(field_error("headers", format!("{k}: not a valid header")));
            }
        }
        check_bearer_tokens(&self.bearer_tokens).map_err(|e| field_error("bearer_tokens", e))?;
        if !self.bearer_tokens.is_empty()
            && self
                .headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        {
            return Err(field_error(
                "headers",
                "Authorization and bearer_tokens both given",
            ));
        }
        let path = |p: &Option<String>| p.clone().filter(|p| !p.is_empty());
        let tls = TlsOptions {
            ca_files: self.ca_files.clone(),
            client_cert: path(&self.client_cert),
            client_key: path(&self.client_key),
            insecure: self.insecure,
        };
        if tls.client_cert.is_some() != tls.client_key.is_some() {
            return Err(field_error(
                "client_cert",
                "client_cert and client_key go together",
            ));
        }
        let connect_to = self
            .connect_to
            .iter()
            .map(|c| ConnectTo::parse(c).map_err(|e| field_error("connect_to", e)))
            .collect::<Result<Vec<_>, _>>()?;
        if transport == Transport::Stdio && self.command.is_empty() {
            return Err(field_error(
                "command",
                "required (non-empty) for transport stdio",
            ));
        }
        let family = self.family;
        if family == Family::Hold && transport != Transport::Http {
            return Err(field_error("family", "hold is an HTTP family"));
        }
        let protocol_version = self.protocol_version.clone();
        let stateless = versions::STATELESS.contains(&protocol_version.as_str());
        if !versions::HANDSHAKE.contains(&protocol_version.as_str()) && !stateless {
            return Err(field_error(
                "protocol_version",
                format!(
                    "unsupported {protocol_version:?} (known: {:?}, {:?})",
                    versions::HANDSHAKE,
                    versions::STATELESS
                ),
            ));
        }
        if family == Family::Discover && (transport != Transport::Http || stateless) {
            return Err(field_error(
                "family",
                "discover runs over HTTP and compares 2026-07-28 with the handshake era of protocol_version (not a 2026-07-28 one)",
            ));
        }
        if family == Family::Tasks && (transport != Transport::Http || !stateless) {
            return Err(field_error(
                "family",
                "tasks runs over HTTP in 2026-07-28 (protocol_version)",
            ));
        }
        if family == Family::Hold && stateless {
            return Err(field_error(
                "family",
                "hold keeps handshake-era sessions; 2026-07-28 has none",
            ));
        }
        if protocol_version == "2024-11-05" && transport == Transport::Http {
            return Err(field_error(
                "protocol_version",
                "2024-11-05 over HTTP is the HTTP+SSE transport, which the native engine does not speak",
            ));
        }
        let mix = self
            .mix
            .iter()
            .enumerate()
            .map(|(i, item)| mix_request(item).map_err(|e| field_error(&format!("mix[{i}]"), e)))
            .collect::<Result<Vec<_>, _>>()?;
        if family == Family::Mixed {
            if mix.is_empty() {
                return Err(field_error("mix", "required (non-empty) for family mixed"));
            }
            if mix.iter().all(|m| m.weight == 0) {
                return Err(field_error("mix", "all weights are 0"));
            }
        }
        let churn_delete_share = finite("churn_delete_share", self.churn_delete_share)?;
        if !(0.0..=1.0).contains(&churn_delete_share) {
            return Err(field_error("churn_delete_share", "must be in 0..=1"));
        }
        let rate = match self.rate {
            None => None,
            Some(r) if finite("rate", r)? > 0.0 => Some(r),
            Some(_) => return Err(field_error("rate", "must be > 0 (None: the closed model)")),
        };
        let timeout_s = finite("timeout_s", self.timeout_s)?;
        if !(timeout_s > 0.0 && timeout_s <= 3600.0) {
            return Err(field_error("timeout_s", "must be in (0, 3600]"));
        }
        let late_after_s = finite("late_after_s", self.late_after_s)?;
        if !(0.0..=3600.0).contains(&late_after_s) {
            return Err(field_error("late_after_s", "must be in 0..=3600"));
        }
        if let Some(every) = self.progress_every {
            in_range("progress_every", every, 1, u64::MAX)?;
        }
        let hold_streams = in_range("hold_streams", self.hold_streams, 0, 1_000_000)?;
        if hold_streams > 0 && family != Family::Hold {
            return Err(field_error("hold_streams", "applies to family hold"));
        }
        if let Some(tool) = &self.hold_trigger {
            if tool.is_empty() {
                return Err(field_error("hold_trigger", "an empty tool name"));
            }
            if hold_streams == 0 {
                return Err(field_error(
                    "hold_trigger",
                    "needs family hold with hold_streams > 0 (the listeners)",
                ));
            }
        }
        let every = finite("hold_trigger_every_s", self.hold_trigger_every_s)?;
        if !(every > 0.0 && every <= 86_400.0) {
            return Err(field_error("hold_trigger_every_s", "must be in (0, 86400]"));
        }
        let hold_clock = self.hold_clock.clone().filter(|p| !p.is_empty());
        if hold_clock.is_some() && hold_streams == 0 {
            return Err(field_error(
                "hold_clock",
                "needs family hold with hold_streams > 0",
            ));
        }
        let tasks_cancel_share = finite("tasks_cancel_share", self.tasks_cancel_share)?;
        if !(0.0..=1.0).contains(&tasks_cancel_share) {
            return Err(field_error("tasks_cancel_share", "must be in 0..=1"));
        }
        let default_type = match transport {
            Transport::Http => "mcp-http",
            Transport::Stdio => "mcp-stdio",
        };
        Ok(Config {
            transport,
            target,
            url,
            headers: self.headers.clone(),
            bearer_tokens: self.bearer_tokens.clone(),
            tls,
            connect_to,
            new_connection: self.new_connection,
            cookies: self.cookies,
            retry_after: self.retry_after,
            command: self.command.clone(),
            inflight_per_process: in_range(
                "inflight_per_process",
                self.inflight_per_process,
                1,
                65_536,
            )?,
            family,
            protocol_version,
            client_capabilities: object_text(&self.client_capabilities),
            tool: self.tool.clone(),
            arguments: object_text(&self.arguments),
            mix,
            stream_tool: self.stream_tool.clone(),
            stream_arguments: object_text(&self.stream_arguments),
            churn_delete_share,
            threads: in_range("threads", self.threads, 1, 256)?,
            rate,
            arrivals: self.arrivals,
            max_inflight: in_range("max_inflight", self.max_inflight, 1, 1 << 24)?,
            timeout: Duration::from_secs_f64(timeout_s),
            max_reply_bytes: in_range("max_reply_bytes", self.max_reply_bytes, 1024, 1 << 30)?,
            max_sessions: in_range("max_sessions", self.max_sessions, 1, 10_000_000)?,
            request_type: self
                .request_type
                .clone()
                .unwrap_or_else(|| default_type.into()),
            seed: self.seed,
            handshake_call: self.handshake_call,
            cycle_latency: self.cycle_latency,
            iterations: self.iterations,
            hold_delete: self.hold_delete,
            progress_every: self.progress_every,
            late_after: Duration::from_secs_f64(late_after_s),
            hold_stream: self.hold_stream,
            hold_streams,
            hold_trigger: self.hold_trigger.clone(),
            hold_trigger_every: Duration::from_secs_f64(every),
            hold_clock,
            tasks_cancel_share,
        })
    }
}

fn object_text(object: &JsonObject) -> String {
    Value::Object(object.clone()).to_string()
}

/// A mix entry ready to send, or why it cannot be mixed.
fn mix_request(item: &MixItem) -> Result<MixRequest, String> {
    let (method, params, name) = match &item.call {
        MixCall::Tool { name, arguments } => {
            // the name first, as every tools/call the engine sends has it
            let params = format!(
                r#"{{"name":{},"arguments":{}}}"#,
                Value::String(name.clone()),
                object_text(arguments)
            );
            ("tools/call", Some(params), Some(name.clone()))
        }
        MixCall::Method { method, params } => {
            if method == "initialize" || method.starts_with("notifications/") {
                return Err(format!("method {method:?} cannot be mixed"));
            }
            let key = match method.as_str() {
                "tools/call" | "prompts/get" => Some("name"),
                "resources/read" => Some("uri"),
                _ => None,
            };
            let name = key
                .and_then(|k| params.as_ref().and_then(|p| p.get(k)))
                .and_then(Value::as_str)
                .map(str::to_owned);
            (method.as_str(), params.as_ref().map(object_text), name)
        }
    };
    if item.stream && method != "tools/call" {
        return Err(format!("stream applies to tools/call, not {method:?}"));
    }
    Ok(MixRequest {
        method: method.into(),
        params,
        name,
        weight: item.weight,
        stream: item.stream,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http() -> Settings {
        Settings {
            url: Some("http://127.0.0.1:1/mcp".into()),
            ..Settings::default()
        }
    }

    fn object(pairs: &[(&str, Value)]) -> JsonObject {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect()
    }

    fn method(name: &str, params: Option<JsonObject>) -> MixItem {
        MixItem {
            call: MixCall::Method {
                method: name.into(),
                params,
            },
            weight: 1,
            stream: false,
        }
    }

    #[test]
    fn defaults_and_errors_name_the_field() {
        let c = http().build().expect("valid");
        assert_eq!(c.family, Family::ToolsCall);
        assert_eq!(c.request_type, "mcp-http");
        assert_eq!(c.arguments, "{}");
        assert_eq!(c.stream_arguments, r#"{"n":10}"#);
        let bad: Vec<(Settings, &str)> = vec![
            (
                Settings {
                    url: Some("ftp://x/".into()),
                    ..http()
                },
                "url",
            ),
            (
                Settings {
                    bearer_tokens: vec!["a".into(), String::new()],
                    ..http()
                },
                "bearer_tokens",
            ),
            (
                Settings {
                    connect_to: vec!["x:1:y".into()],
                    ..http()
                },
                "connect_to",
            ),
            (
                Settings {
                    url: Some("https://x:1/".into()),
                    client_cert: Some("/c.pem".into()),
                    ..http()
                },
                "client_cert",
            ),
            (
                Settings {
                    headers: vec![("Authorization".into(), "y".into())],
                    bearer_tokens: vec!["t".into()],
                    ..http()
                },
                "headers",
            ),
            (
                Settings {
                    transport: Transport::Stdio,
                    ..Settings::default()
                },
                "command",
            ),
            (
                Settings {
                    threads: 0,
                    ..http()
                },
                "threads",
            ),
            (
                Settings {
                    rate: Some(-1.0),
                    ..http()
                },
                "rate",
            ),
            (
                Settings {
                    rate: Some(f64::NAN),
                    ..http()
                },
                "rate",
            ),
            (
                Settings {
                    family: Family::Mixed,
                    ..http()
                },
                "mix",
            ),
            (
                Settings {
                    headers: vec![("A".into(), "b\r\nc".into())],
                    ..http()
                },
                "headers",
            ),
            (
                Settings {
                    protocol_version: "1999".into(),
                    ..http()
                },
                "protocol_version",
            ),
            (
                Settings {
                    timeout_s: f64::INFINITY,
                    ..http()
                },
                "timeout_s",
            ),
            (
                Settings {
                    progress_every: Some(0),
                    ..http()
                },
                "progress_every",
            ),
            (
                Settings {
                    max_reply_bytes: 10,
                    ..http()
                },
                "max_reply_bytes",
            ),
            (
                Settings {
                    hold_streams: 2,
                    ..http()
                },
                "hold_streams",
            ),
            (
                Settings {
                    family: Family::Hold,
                    hold_trigger: Some("broadcast".into()),
                    ..http()
                },
                "hold_trigger",
            ),
            (
                Settings {
                    family: Family::Hold,
                    hold_streams: 1,
                    hold_trigger: Some(String::new()),
                    ..http()
                },
                "hold_trigger",
            ),
            (
                Settings {
                    hold_trigger_every_s: 0.0,
                    ..http()
                },
                "hold_trigger_every_s",
            ),
            (
                Settings {
                    hold_clock: Some("/tmp/x".into()),
                    ..http()
                },
                "hold_clock",
            ),
        ];
        for (settings, field) in bad {
            let e = settings.build().expect_err(field);
            assert!(
                e.starts_with(&format!("engine config: {field}: ")),
                "{e} should name {field}"
            );
        }
    }

    #[test]
    fn choices_by_name() {
        assert_eq!("stdio".parse::<Transport>(), Ok(Transport::Stdio));
        assert_eq!("session_churn".parse::<Family>(), Ok(Family::SessionChurn));
        assert_eq!(
            "request".parse::<NewConnection>(),
            Ok(NewConnection::Request)
        );
        assert_eq!("poisson".parse::<Arrivals>(), Ok(Arrivals::Poisson));
        for (family, name) in Family::CHOICES {
            assert_eq!(family.name(), *name);
            assert_eq!(name.parse::<Family>(), Ok(*family));
        }
        let e = "x".parse::<Transport>().expect_err("bad");
        assert_eq!(
            e,
            r#"engine config: transport: one of http, stdio; not "x""#
        );
        let e = "never".parse::<NewConnection>().expect_err("bad");
        assert!(e.starts_with("engine config: new_connection: "), "{e}");
    }

    #[test]
    fn mix_items() {
        let c = Settings {
            family: Family::Mixed,
            mix: vec![
                MixItem {
                    call: MixCall::Tool {
                        name: "echo".into(),
                        arguments: object(&[("text", Value::from("x"))]),
                    },
                    weight: 9,
                    stream: false,
                },
                method("tools/list", None),
                method(
                    "resources/read",
                    Some(object(&[("uri", Value::from("file:///a"))])),
                ),
            ],
            ..http()
        }
        .build()
        .expect("valid");
        assert_eq!(c.mix[0].stat_name(), "tools/call:echo");
        assert_eq!(
            c.mix[0].params.as_deref(),
            Some(r#"{"name":"echo","arguments":{"text":"x"}}"#)
        );
        assert_eq!(c.mix[1].stat_name(), "tools/list");
        assert_eq!(c.mix[1].params, None);
        assert_eq!(c.mix[2].stat_name(), "resources/read");
        assert_eq!(c.mix[2].name.as_deref(), Some("file:///a"));
        assert!(!c.mix[0].stream);
    }

    #[test]
    fn mix_stream_items() {
        let slow = object(&[
            ("name", Value::from("slow")),
            (
                "arguments",
                Value::Object(object(&[("steps", Value::from(4))])),
            ),
        ]);
        let c = Settings {
            family: Family::Mixed,
            mix: vec![
                MixItem {
                    stream: true,
                    ..method("tools/call", Some(slow))
                },
                method("completion/complete", Some(object(&[]))),
            ],
            ..http()
        }
        .build()
        .expect("valid");
        assert!(c.mix[0].stream);
        assert_eq!(c.mix[0].stat_name(), "tools/call:slow");
        assert_eq!(c.mix[1].stat_name(), "completion/complete");
        for (item, what) in [
            (
                MixItem {
                    stream: true,
                    ..method("tools/list", None)
                },
                "stream applies to tools/call",
            ),
            (method("initialize", None), "cannot be mixed"),
            (method("notifications/progress", None), "cannot be mixed"),
        ] {
            let e = Settings {
                family: Family::Mixed,
                mix: vec![item],
                ..http()
            }
            .build()
            .expect_err(what);
            assert!(e.contains("mix[0]") && e.contains(what), "{e}");
        }
    }
}
