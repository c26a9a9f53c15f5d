//! The engine's configuration: [`Settings`] holds typed values with their defaults (README.md
//! lists them) and [`Settings::build`] validates them once into the [`Config`] the engine runs
//! on. Every error names its field, so the Python binding and `mcpfast-load` report a bad value
//! the same way.

use std::fmt;
use std::net::IpAddr;
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
    /// HTTP: each user is an agent: a session (`initialize`, or the 2026-07-28 start), a
    /// `tools/list`, then the `mix` as its steps (in order, or sampled by weight) with a think
    /// time before each; the session ends with DELETE or is abandoned, and after an idle gap
    /// the agent starts a new one.
    Agents,
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
    Agents => "agents",
]);

/// `agents`: the steps of a session in the order given, or sampled by weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOrder {
    Sequence,
    Weighted,
}

named_choices!(StepOrder, "agent_order", [Sequence => "sequence", Weighted => "weighted"]);

/// The 90th percentile of the standard normal: a log-normal given by its median and p90 has
/// σ = ln(p90 / median) / Z90.
pub const Z90: f64 = 1.281_551_565_544_600_4;

/// The longest think time or idle gap a draw gives (a heavy tail is cut here).
pub const MAX_THINK_S: f64 = 86_400.0;

/// A distribution of think times (or idle gaps), in seconds. Spelled `constant:S`,
/// `uniform:MIN:MAX`, `exponential:MEAN` or `lognormal:MEDIAN:P90`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Think {
    Constant(f64),
    Uniform { min: f64, max: f64 },
    Exponential { mean: f64 },
    LogNormal { median: f64, sigma: f64 },
}

impl Think {
    /// The distribution a spec names; the error names `field` and what is wrong.
    pub fn parse(field: &str, spec: &str) -> Result<Think, String> {
        const FORMS: &str =
            "constant:S, uniform:MIN:MAX, exponential:MEAN or lognormal:MEDIAN:P90 (seconds)";
        let mut parts = spec.trim().split(':');
        let kind = parts.next().unwrap_or("");
        let numbers = parts
            .map(|p| p.trim().parse::<f64>().ok().filter(|v| v.is_finite()))
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| {
                field_error(
                    field,
                    format!("{spec:?}: not numbers after the kind; {FORMS}"),
                )
            })?;
        let bad = |what: String| Err(field_error(field, format!("{spec}: {what}")));
        if let Some(v) = numbers.iter().find(|v| **v < 0.0) {
            return bad(format!("{v} is negative (times are seconds, 0 or more)"));
        }
        if let Some(v) = numbers.iter().find(|v| **v > MAX_THINK_S) {
            return bad(format!("{v} s is more than a day"));
        }
        let think = match (kind, numbers.as_slice()) {
            ("constant", [s]) => Think::Constant(*s),
            ("uniform", [min, max]) if min <= max => Think::Uniform {
                min: *min,
                max: *max,
            },
            ("uniform", [min, max]) => return bad(format!("max ({max}) is below min ({min})")),
            ("exponential", [mean]) if *mean > 0.0 => Think::Exponential { mean: *mean },
            ("exponential", [_]) => return bad("the mean must be above 0".into()),
            ("lognormal", [median, p90]) if *median <= 0.0 => {
                let _ = p90;
                return bad("the median must be above 0".into());
            }
            ("lognormal", [median, p90]) if p90 < median => {
                return bad(format!("p90 ({p90}) is below the median ({median})"))
            }
            ("lognormal", [median, p90]) => Think::LogNormal {
                median: *median,
                sigma: (p90 / median).ln() / Z90,
            },
            _ => return Err(field_error(field, format!("one of {FORMS}; not {spec:?}"))),
        };
        Ok(think)
    }

    /// One draw from two uniform draws in (0, 1] (Box-Muller for the normal under the
    /// log-normal), cut at [`MAX_THINK_S`].
    pub fn sample(&self, u1: f64, u2: f64) -> Duration {
        let s = match *self {
            Think::Constant(s) => s,
            Think::Uniform { min, max } => min + (max - min) * u1,
            Think::Exponential { mean } => -mean * u1.ln(),
            Think::LogNormal { median, sigma } => {
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                median * (sigma * z).exp()
            }
        };
        Duration::from_secs_f64(if s.is_finite() {
            s.clamp(0.0, MAX_THINK_S)
        } else {
            0.0
        })
    }

    /// The distribution's mean, seconds.
    pub fn mean(&self) -> f64 {
        match *self {
            Think::Constant(s) => s,
            Think::Uniform { min, max } => (min + max) / 2.0,
            Think::Exponential { mean } => mean,
            Think::LogNormal { median, sigma } => median * (sigma * sigma / 2.0).exp(),
        }
    }
}

/// Where a step's value comes from in an earlier step's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extract {
    /// A JSON pointer (RFC 6901) into the result's `structuredContent`.
    Pointer(String),
    /// A regular expression on the result's text content (its `text` items, joined by
    /// newlines): the first group, or the whole match without one.
    Regex(String),
}

/// `agents`: a value of a step's params taken from the result of step `step` (an index
/// among the steps) of the same session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// Where the value goes: a JSON pointer into the request's params (`/arguments/id`; the
    /// value given there is replaced).
    pub at: String,
    pub step: usize,
    pub extract: Extract,
}

/// A use ready to run: its extraction compiled.
#[derive(Debug, Clone)]
pub struct StepUse {
    pub at: String,
    pub step: usize,
    pub extract: Extractor,
}

/// An extraction ready to run.
#[derive(Debug, Clone)]
pub enum Extractor {
    Pointer(String),
    Regex(regex::Regex),
}

impl Extractor {
    /// How the failure of a missing value names it: the pointer, or the expression.
    pub fn describe(&self) -> String {
        match self {
            Extractor::Pointer(p) => format!("structuredContent {p}"),
            Extractor::Regex(r) => format!("a match of /{}/ in its text", r.as_str()),
        }
    }
}

/// How the mark of a use begins (see [`use_mark`]).
pub const USE_MARK: &str = "\u{1}mcpfast-use-";

/// The JSON string a step's params carry in place of the value of its use `k` until the
/// request is built (the template fills it in).
pub fn use_mark(k: usize) -> String {
    format!("{USE_MARK}{k}\u{1}")
}

/// The use whose mark `text` is.
pub fn use_of_mark(text: &str) -> Option<usize> {
    text.strip_prefix(USE_MARK)?
        .strip_suffix('\u{1}')?
        .parse()
        .ok()
}

/// `agents`: what each agent does around its steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub order: StepOrder,
    /// Weighted order: steps per session, drawn uniformly in min..=max.
    pub steps: (u32, u32),
    /// Before each step (after the session's `tools/list`).
    pub think: Think,
    /// Between one session's end and the next one's start (and before the first).
    pub idle: Think,
    /// Each session lists the tools first (the `tools/list` row).
    pub list_tools: bool,
    /// The share of the agents that hold a stream for their session's life (the standalone
    /// GET stream, or a 2026-07-28 `subscriptions/listen`).
    pub hold_stream: f64,
    /// The share of the sessions abandoned (no DELETE).
    pub abandon: f64,
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
    /// `agents`: the step's name in the failures of the steps that use its result.
    pub label: Option<String>,
    /// `agents`: values of its params taken from earlier steps' results.
    pub uses: Vec<Use>,
}

impl MixItem {
    /// An entry calling `call` with `weight`, not streamed, with no label and no uses.
    pub fn new(call: MixCall, weight: u32) -> MixItem {
        MixItem {
            call,
            weight,
            stream: false,
            label: None,
            uses: Vec::new(),
        }
    }
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
    /// `agents`: how the step is named where a use of its result fails (its label, or
    /// `step N (<row>)`), its uses (their values marked in `params`, [`use_mark`]), and
    /// whether a use reads its result.
    pub label: String,
    pub uses: Vec<StepUse>,
    pub read_by_uses: bool,
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
    /// Open model over several generator processes (Locust workers), each at its share of the
    /// rate: this process's place among `worker_count`, so their uniform arrivals interleave
    /// instead of landing together.
    pub worker_index: usize,
    pub worker_count: usize,
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
    /// HTTP: the local addresses new connections are bound to before they connect, in turn
    /// (`127.0.0.2` or a range `127.0.0.2-127.0.0.20`); empty: the kernel picks.
    pub source_addresses: Vec<String>,
    /// `agents`: the steps in order or by weight, steps per session (weighted), think and idle
    /// distributions ([`Think::parse`]; None: idle as think), the `tools/list` first, the
    /// shares of agents holding a stream and of sessions abandoned.
    pub agent_order: StepOrder,
    pub agent_steps: (u32, u32),
    pub think: String,
    pub idle: Option<String>,
    pub agent_list_tools: bool,
    pub agent_hold_stream: f64,
    pub agent_abandon: f64,
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
            worker_index: 0,
            worker_count: 1,
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
            source_addresses: Vec::new(),
            agent_order: StepOrder::Sequence,
            agent_steps: (1, 1),
            think: "lognormal:2:8".into(),
            idle: None,
            agent_list_tools: true,
            agent_hold_stream: 0.0,
            agent_abandon: 0.0,
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
    /// This process's place among the generator processes sharing the rate (see `Settings`).
    pub worker_index: usize,
    pub worker_count: usize,
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
    /// HTTP: local addresses new connections bind to, in turn (empty: the kernel picks).
    pub source_addresses: Vec<IpAddr>,
    /// `agents`: what each agent does around its steps (the steps are `mix`).
    pub agent: Agent,
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
        let worker_count = in_range("worker_count", self.worker_count, 1, 1 << 20)?;
        if self.worker_index >= worker_count {
            return Err(field_error("worker_index", "must be below worker_count"));
        }
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
        let mut mix = mix;
        let stateless_era = stateless;
        let agents = family == Family::Agents;
        if agents {
            if transport != Transport::Http {
                return Err(field_error("family", "agents runs over HTTP"));
            }
            if mix.is_empty() {
                return Err(field_error(
                    "mix",
                    "the agent's steps: required (non-empty) for family agents",
                ));
            }
            if self.agent_order == StepOrder::Weighted && mix.iter().all(|m| m.weight == 0) {
                return Err(field_error("mix", "all weights are 0 (weighted order)"));
            }
        }
        let steps = mix.len();
        for (i, (item, request)) in self.mix.iter().zip(mix.iter_mut()).enumerate() {
            let field = format!("mix[{i}]");
            if !agents && (item.label.is_some() || !item.uses.is_empty()) {
                return Err(field_error(&field, "label and uses apply to family agents"));
            }
            request.label = match &item.label {
                Some(l) => l.clone(),
                None => format!("step {} ({})", i + 1, request.stat_name()),
            };
            request.uses = mark_uses(
                request,
                &item.uses,
                i,
                steps,
                self.agent_order,
                stateless_era,
            )
            .map_err(|e| field_error(&field, e))?;
        }
        for i in 0..mix.len() {
            let read = mix.iter().any(|m| m.uses.iter().any(|u| u.step == i));
            mix[i].read_by_uses = read;
        }
        let (lo, hi) = self.agent_steps;
        if lo == 0 || hi < lo || hi > 100_000 {
            return Err(field_error(
                "agent_steps",
                format!("(min, max) with 1 <= min <= max <= 100000, got ({lo}, {hi})"),
            ));
        }
        let think = Think::parse("think", &self.think)?;
        let idle = match &self.idle {
            Some(spec) => Think::parse("idle", spec)?,
            None => think,
        };
        let share = |field: &str, v: f64| -> Result<f64, String> {
            let v = finite(field, v)?;
            if (0.0..=1.0).contains(&v) {
                Ok(v)
            } else {
                Err(field_error(field, "must be in 0..=1"))
            }
        };
        let agent = Agent {
            order: self.agent_order,
            steps: (lo, hi),
            think,
            idle,
            list_tools: self.agent_list_tools,
            hold_stream: share("agent_hold_stream", self.agent_hold_stream)?,
            abandon: share("agent_abandon", self.agent_abandon)?,
        };
        let source_addresses = source_addresses(&self.source_addresses)
            .map_err(|e| field_error("source_addresses", e))?;
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
            worker_index: self.worker_index,
            worker_count,
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
            source_addresses,
            agent,
        })
    }
}

/// Most source addresses one run may bind to.
const MAX_SOURCE_ADDRESSES: u128 = 65_536;

/// The addresses of `specs`, each `ADDR` or a range `FIRST-LAST` of one family, in order.
fn source_addresses(specs: &[String]) -> Result<Vec<IpAddr>, String> {
    let mut out: Vec<IpAddr> = Vec::new();
    for spec in specs {
        let spec = spec.trim();
        let (first, last) = spec.split_once('-').unwrap_or((spec, spec));
        let parse = |t: &str| {
            t.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("{spec:?}: not an IP address or a range FIRST-LAST"))
        };
        let (first, last) = (parse(first)?, parse(last)?);
        let (a, b) = match (first, last) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b))),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
            _ => return Err(format!("{spec}: a range of one address family")),
        };
        if b < a {
            return Err(format!("{spec}: the range ends before it starts"));
        }
        if b - a + 1 + out.len() as u128 > MAX_SOURCE_ADDRESSES {
            return Err(format!("more than {MAX_SOURCE_ADDRESSES} addresses"));
        }
        for n in a..=b {
            let ip = match first {
                IpAddr::V4(_) => IpAddr::from(std::net::Ipv4Addr::from(n as u32)),
                IpAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(n)),
            };
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    if out.iter().any(IpAddr::is_ipv4) && out.iter().any(IpAddr::is_ipv6) {
        return Err(
            "IPv4 and IPv6 addresses mixed (connections go to one server address family)".into(),
        );
    }
    Ok(out)
}

/// The uses of step `i` ready to run, their values marked in the step's params; the error
/// says which use is wrong and why.
fn mark_uses(
    request: &mut MixRequest,
    uses: &[Use],
    i: usize,
    steps: usize,
    order: StepOrder,
    stateless: bool,
) -> Result<Vec<StepUse>, String> {
    if uses.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Value = match &request.params {
        Some(text) => serde_json::from_str(text).map_err(|e| format!("params: {e}"))?,
        None => Value::Object(JsonObject::new()),
    };
    let mut out = Vec::with_capacity(uses.len());
    for (k, u) in uses.iter().enumerate() {
        let what = format!("uses[{k}] (at {:?})", u.at);
        if !u.at.starts_with('/') {
            return Err(format!(
                "{what}: at must be a JSON pointer into the params, such as /arguments/id"
            ));
        }
        let name_key = match request.method.as_str() {
            "tools/call" | "prompts/get" => Some("/name"),
            "resources/read" if stateless => Some("/uri"),
            _ => None,
        };
        if name_key == Some(u.at.as_str()) {
            return Err(format!(
                "{what}: the request's name (its Mcp-Name) cannot come from a use"
            ));
        }
        if u.step >= steps {
            return Err(format!(
                "{what}: step {} does not exist ({steps} steps)",
                u.step + 1
            ));
        }
        if order == StepOrder::Sequence && u.step >= i {
            return Err(format!(
                "{what}: step {} is not an earlier step (in order, a step uses the steps before it)",
                u.step + 1
            ));
        }
        let slot = params
            .pointer_mut(&u.at)
            .ok_or_else(|| format!("{what}: the params have no value there to replace"))?;
        *slot = Value::String(use_mark(k));
        let extract = match &u.extract {
            Extract::Pointer(p) if p.is_empty() || p.starts_with('/') => {
                Extractor::Pointer(p.clone())
            }
            Extract::Pointer(p) => {
                return Err(format!(
                    "{what}: {p:?} is not a JSON pointer (empty, or starting with /)"
                ))
            }
            Extract::Regex(r) => Extractor::Regex(
                regex::Regex::new(r)
                    .map_err(|e| format!("{what}: not a regular expression: {e}"))?,
            ),
        };
        out.push(StepUse {
            at: u.at.clone(),
            step: u.step,
            extract,
        });
    }
    request.params = Some(params.to_string());
    Ok(out)
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
        label: String::new(),
        uses: Vec::new(),
        read_by_uses: false,
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
        MixItem::new(
            MixCall::Method {
                method: name.into(),
                params,
            },
            1,
        )
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
                    worker_index: 2,
                    worker_count: 2,
                    ..http()
                },
                "worker_index",
            ),
            (
                Settings {
                    worker_count: 0,
                    ..http()
                },
                "worker_count",
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
                MixItem::new(
                    MixCall::Tool {
                        name: "echo".into(),
                        arguments: object(&[("text", Value::from("x"))]),
                    },
                    9,
                ),
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

    /// The `q` quantile of `n` draws of `think` (the engine's xorshift draws stand in: any
    /// uniform source).
    fn quantiles(think: &Think, n: usize) -> Vec<f64> {
        let mut x: u64 = 0x5eed;
        let mut unit = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64
        };
        let mut v: Vec<f64> = (0..n)
            .map(|_| think.sample(unit(), unit()).as_secs_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    #[test]
    fn think_times_follow_their_distribution() {
        let at = |v: &[f64], q: f64| v[(v.len() as f64 * q) as usize];
        let lognormal = Think::parse("think", "lognormal:2:8").expect("valid");
        let v = quantiles(&lognormal, 200_000);
        assert!(
            (at(&v, 0.5) / 2.0 - 1.0).abs() < 0.01,
            "median {}",
            at(&v, 0.5)
        );
        assert!(
            (at(&v, 0.9) / 8.0 - 1.0).abs() < 0.01,
            "p90 {}",
            at(&v, 0.9)
        );
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean / lognormal.mean() - 1.0).abs() < 0.03, "mean {mean}");
        let v = quantiles(
            &Think::parse("think", "exponential:3").expect("valid"),
            200_000,
        );
        assert!((at(&v, 0.5) / (3.0 * 2f64.ln()) - 1.0).abs() < 0.02);
        let v = quantiles(
            &Think::parse("think", "uniform:1:3").expect("valid"),
            100_000,
        );
        assert!(v[0] >= 1.0 && v[v.len() - 1] <= 3.0);
        assert!((at(&v, 0.5) - 2.0).abs() < 0.02);
        let v = quantiles(&Think::parse("think", "constant:0.25").expect("valid"), 10);
        assert!(v.iter().all(|s| (s - 0.25).abs() < 1e-9));
        // p90 equal to the median: no spread
        let v = quantiles(&Think::parse("think", "lognormal:1:1").expect("valid"), 100);
        assert!(v.iter().all(|s| (s - 1.0).abs() < 1e-9));
    }

    #[test]
    fn think_times_that_make_no_sense_are_refused_by_name() {
        for (spec, why) in [
            ("lognormal:2:1", "p90 (1) is below the median (2)"),
            ("lognormal:0:1", "the median must be above 0"),
            ("constant:-1", "-1 is negative"),
            ("uniform:3:1", "max (1) is below min (3)"),
            ("exponential:0", "the mean must be above 0"),
            ("exponential:x", "not numbers"),
            ("gamma:2", "one of constant:S"),
            ("lognormal:2", "one of constant:S"),
            ("constant:100000", "more than a day"),
        ] {
            let e = Settings {
                think: spec.into(),
                ..http()
            }
            .build()
            .expect_err(spec);
            assert!(
                e.starts_with("engine config: think: ") && e.contains(why),
                "{spec}: {e}"
            );
        }
        let e = Settings {
            idle: Some("uniform:2:1".into()),
            ..http()
        }
        .build()
        .expect_err("idle");
        assert!(e.starts_with("engine config: idle: "), "{e}");
    }

    fn agents(mix: Vec<MixItem>) -> Settings {
        Settings {
            family: Family::Agents,
            mix,
            ..http()
        }
    }

    fn tool_with(name: &str, arguments: Value, uses: Vec<Use>) -> MixItem {
        let Value::Object(arguments) = arguments else {
            panic!("an object")
        };
        MixItem {
            uses,
            ..MixItem::new(
                MixCall::Tool {
                    name: name.into(),
                    arguments,
                },
                1,
            )
        }
    }

    fn use_of(at: &str, step: usize, extract: Extract) -> Use {
        Use {
            at: at.into(),
            step,
            extract,
        }
    }

    #[test]
    fn a_steps_uses_are_marked_in_its_params() {
        let c = agents(vec![
            MixItem {
                label: Some("create".into()),
                ..tool_with("create", serde_json::json!({}), vec![])
            },
            tool_with(
                "get",
                serde_json::json!({"id": 0, "deep": {"k": [1, "x"]}}),
                vec![
                    use_of("/arguments/id", 0, Extract::Pointer("/id".into())),
                    use_of("/arguments/deep/k/1", 0, Extract::Regex(r"k=(\w+)".into())),
                ],
            ),
        ])
        .build()
        .expect("valid");
        assert_eq!(c.mix[0].label, "create");
        assert!(c.mix[0].read_by_uses && !c.mix[1].read_by_uses);
        assert_eq!(c.mix[1].label, "step 2 (tools/call:get)");
        let params: Value =
            serde_json::from_str(c.mix[1].params.as_deref().expect("params")).expect("json");
        assert_eq!(params["arguments"]["id"], use_mark(0));
        assert_eq!(params["arguments"]["deep"]["k"][1], use_mark(1));
        assert_eq!(params["arguments"]["deep"]["k"][0], 1);
        assert_eq!(use_of_mark(&use_mark(12)), Some(12));
        assert!(matches!(c.mix[1].uses[1].extract, Extractor::Regex(_)));
    }

    #[test]
    fn uses_that_cannot_work_are_refused_by_name() {
        let get = |uses: Vec<Use>| {
            vec![
                tool_with("create", serde_json::json!({}), vec![]),
                tool_with("get", serde_json::json!({"id": 0}), uses),
            ]
        };
        let pointer = |p: &str| Extract::Pointer(p.into());
        for (mix, why) in [
            (
                get(vec![use_of("/arguments/nope", 0, pointer("/id"))]),
                "no value there",
            ),
            (
                get(vec![use_of("arguments/id", 0, pointer("/id"))]),
                "at must be a JSON pointer",
            ),
            (
                get(vec![use_of("/name", 0, pointer("/id"))]),
                "cannot come from a use",
            ),
            (
                get(vec![use_of("/arguments/id", 1, pointer("/id"))]),
                "not an earlier step",
            ),
            (
                get(vec![use_of("/arguments/id", 5, pointer("/id"))]),
                "step 6 does not exist",
            ),
            (
                get(vec![use_of("/arguments/id", 0, pointer("id"))]),
                "is not a JSON pointer",
            ),
            (
                get(vec![use_of("/arguments/id", 0, Extract::Regex("(".into()))]),
                "not a regular expression",
            ),
        ] {
            let e = agents(mix).build().expect_err(why);
            assert!(
                e.starts_with("engine config: mix[1]: uses[0]") && e.contains(why),
                "{why}: {e}"
            );
        }
        // in weighted order any step may be read (its value is missing until it has run)
        let weighted = Settings {
            agent_order: StepOrder::Weighted,
            ..agents(get(vec![use_of("/arguments/id", 1, pointer("/id"))]))
        };
        assert!(weighted.build().is_ok());
        let e = Settings {
            agent_order: StepOrder::Weighted,
            ..agents(get(vec![use_of("/arguments/id", 5, pointer("/id"))]))
        }
        .build()
        .expect_err("no step 6");
        assert!(e.contains("step 6 does not exist"), "{e}");
        // uses and labels belong to agents
        let e = Settings {
            family: Family::Mixed,
            ..agents(get(vec![use_of("/arguments/id", 0, pointer("/id"))]))
        }
        .build()
        .expect_err("mixed");
        assert!(e.contains("apply to family agents"), "{e}");
        let e = agents(vec![]).build().expect_err("no steps");
        assert!(e.starts_with("engine config: mix: "), "{e}");
        for (steps, ok) in [
            ((1, 1), true),
            ((2, 9), true),
            ((0, 1), false),
            ((3, 2), false),
        ] {
            let r = Settings {
                agent_steps: steps,
                ..agents(get(vec![]))
            }
            .build();
            assert_eq!(r.is_ok(), ok, "{steps:?}");
        }
        for share in [-0.1, 1.5, f64::NAN] {
            let e = Settings {
                agent_abandon: share,
                ..agents(get(vec![]))
            }
            .build()
            .expect_err("share");
            assert!(e.starts_with("engine config: agent_abandon: "), "{e}");
        }
    }

    #[test]
    fn source_addresses_and_ranges() {
        let ips = |specs: &[&str]| {
            Settings {
                source_addresses: specs.iter().map(|s| (*s).to_string()).collect(),
                ..http()
            }
            .build()
            .map(|c| {
                c.source_addresses
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            ips(&["127.0.0.2-127.0.0.4", "127.0.0.9", "127.0.0.3"]).expect("valid"),
            ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.9"]
        );
        assert_eq!(
            ips(&["127.0.0.255-127.0.1.0"]).expect("valid"),
            ["127.0.0.255", "127.0.1.0"]
        );
        for (bad, why) in [
            (&["127.0.0.5-127.0.0.2"][..], "ends before it starts"),
            (&["127.0.0.300"][..], "not an IP address"),
            (&["127.0.0.1-::1"][..], "one address family"),
            (&["127.0.0.1", "::1"][..], "mixed"),
            (&["10.0.0.0-10.2.0.0"][..], "more than 65536"),
        ] {
            let e = ips(bad).expect_err(why);
            assert!(
                e.starts_with("engine config: source_addresses: ") && e.contains(why),
                "{e}"
            );
        }
    }
}
