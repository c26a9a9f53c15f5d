//! Command line: `mcpfast-load MODE --url URL [options]`.

use std::time::Duration;

use mcpfast_engine::config::JsonObject;
use serde_json::Value;

pub const USAGE: &str = "\
mcpfast-load: load generator for MCP over Streamable HTTP (handshake era, 2025-03-26..2025-11-25)

usage: mcpfast-load MODE --url http://127.0.0.1:PORT/mcp [options]

modes:
  calls       N sessions, each on its own keep-alive connection, loop tools/call (one in flight
              per session) for --duration after --warmup; then DELETE every session
                --sessions 32 --duration 10 --warmup 2 --tool echo --arguments '{\"text\":\"hello\"}'
              --rate R: open model, R calls/s for the whole run (latency from the intended send
              time; `open_model` in the summary: late and dropped sends, send lag, service time)
  handshakes  each connection loops initialize, notifications/initialized (202), DELETE (2xx)
                --connections 32 --duration 10 --warmup 2
  hold        open N sessions over C connections and keep them; print a JSON line when all are
              open, wait for a line or EOF on stdin, then DELETE them (unless --no-delete)
                --sessions 1000 --connections 32 [--no-delete]
  churn       create-and-delete cycles (initialize, initialized, DELETE); a JSON line every
              --report-every cycles
                --cycles 100000 --connections 32 --report-every 10000

common options:
  --url URL                 the MCP endpoint (http:// or https://)
  --protocol-version V      version offered in initialize (default 2025-11-25); the server's
                            choice is then used
  --timeout SECONDS         per-request timeout (default 10)
  --threads N               engine threads (default 1); sessions and rate are shared out
  --max-time SECONDS        hard cap on the whole run (default: calls/handshakes warmup +
                            duration + 60; hold and churn 3600)
  --server-pid PID          calls and handshakes: also read the server's CPU time
                            (/proc/PID/stat) at the start and end of the measured window, and
                            report it per operation (`server_cpu` in the summary); repeat it
                            for a server of several processes (their CPU is added up)

reaching a deployed server (the swarm's options of the same names, checked by the engine):
  --ca-file PEM             trust this CA too (repeatable; the system store stays; SSL_CERT_FILE
                            honoured)
  --client-cert PEM --client-key PEM
                            mTLS client certificate
  --insecure                accept any server certificate (said on stderr and in the summary)
  --header 'Name: value'    sent on every request (repeatable)
  --token TOKEN             bearer token (repeatable: the sessions take them in turn)
  --connect-to HOST:PORT:ADDR:PORT
                            connect there; TLS name and Host stay the URL's (repeatable)

Every mode runs on the native load engine (rust/mcpfast-engine): its families tools_call,
handshake, session_churn and hold, the same run loop as the Python binding's.

Output: JSON on stdout (one object per line; the last line is the summary), a human line on
stderr. Exit status 0 when nothing failed, 1 when any request failed, 2 on usage errors, 3 when
--max-time cut the run short.
";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Calls,
    Handshakes,
    Hold,
    Churn,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Calls => "calls",
            Mode::Handshakes => "handshakes",
            Mode::Hold => "hold",
            Mode::Churn => "churn",
        }
    }

    fn allows(self, option: &str) -> bool {
        const COMMON: &[&str] = &[
            "url",
            "protocol-version",
            "timeout",
            "max-time",
            "threads",
            "ca-file",
            "client-cert",
            "client-key",
            "insecure",
            "header",
            "token",
            "connect-to",
        ];
        let own: &[&str] = match self {
            Mode::Calls => &[
                "sessions",
                "duration",
                "warmup",
                "tool",
                "arguments",
                "server-pid",
                "rate",
            ],
            Mode::Handshakes => &["connections", "duration", "warmup", "server-pid"],
            Mode::Hold => &["sessions", "connections", "no-delete"],
            Mode::Churn => &["cycles", "connections", "report-every"],
        };
        COMMON.contains(&option) || own.contains(&option)
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    pub url: String,
    pub protocol_version: String,
    pub timeout: Duration,
    pub max_time: Duration,
    pub sessions: usize,
    pub connections: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub tool: String,
    pub arguments: JsonObject,
    pub cycles: u64,
    pub report_every: u64,
    pub no_delete: bool,
    pub server_pids: Vec<u32>,
    pub ca_files: Vec<String>,
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
    pub insecure: bool,
    pub headers: Vec<(String, String)>,
    pub tokens: Vec<String>,
    pub connect_to: Vec<String>,
    /// Engine threads.
    pub threads: usize,
    /// `calls`: open model at this many calls/s (None: closed model).
    pub rate: Option<f64>,
}

fn seconds(name: &str, v: &str) -> Result<Duration, String> {
    let x: f64 = v
        .parse()
        .map_err(|_| format!("--{name}: not a number of seconds: {v}"))?;
    if !(x.is_finite() && (0.0..=7.0 * 86400.0).contains(&x)) {
        return Err(format!("--{name}: out of range: {v}"));
    }
    Ok(Duration::from_secs_f64(x))
}

fn count<T: std::str::FromStr + PartialOrd + From<u8>>(
    name: &str,
    v: &str,
    max: T,
) -> Result<T, String> {
    let x: T = v
        .parse()
        .map_err(|_| format!("--{name}: not a whole number: {v}"))?;
    if x < T::from(1) || x > max {
        return Err(format!("--{name}: out of range: {v}"));
    }
    Ok(x)
}

/// Parse the arguments after the program name. `Ok(None)` means help was asked for.
pub fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let Some(first) = args.first() else {
        return Err("a mode is required: calls, handshakes, hold or churn".into());
    };
    let mode = match first.as_str() {
        "calls" => Mode::Calls,
        "handshakes" => Mode::Handshakes,
        "hold" => Mode::Hold,
        "churn" => Mode::Churn,
        "-h" | "--help" | "help" => return Ok(None),
        other => {
            return Err(format!(
                "unknown mode {other:?}: calls, handshakes, hold or churn"
            ))
        }
    };
    let mut o = Options {
        mode,
        url: String::new(),
        protocol_version: "2025-11-25".into(),
        timeout: Duration::from_secs(10),
        max_time: Duration::ZERO,
        sessions: if mode == Mode::Hold { 1000 } else { 32 },
        connections: 32,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(2),
        tool: "echo".into(),
        arguments: JsonObject::from_iter([("text".to_string(), Value::from("hello"))]),
        cycles: 100_000,
        report_every: 10_000,
        no_delete: false,
        server_pids: Vec::new(),
        ca_files: Vec::new(),
        client_cert: None,
        client_key: None,
        insecure: false,
        headers: Vec::new(),
        tokens: Vec::new(),
        connect_to: Vec::new(),
        threads: 1,
        rate: None,
    };
    let mut max_time = None;
    let mut i = 1;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "-h" || arg == "--help" {
            return Ok(None);
        }
        let Some(flag) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        if !mode.allows(name) {
            return Err(format!("--{name} is not an option of {}", mode.name()));
        }
        if name == "no-delete" || name == "insecure" {
            if inline.is_some() {
                return Err(format!("--{name} takes no value"));
            }
            if name == "insecure" {
                o.insecure = true;
            } else {
                o.no_delete = true;
            }
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => {
                let v = args
                    .get(i)
                    .ok_or_else(|| format!("--{name} needs a value"))?
                    .clone();
                i += 1;
                v
            }
        };
        match name {
            "url" => o.url = value,
            "protocol-version" => o.protocol_version = value,
            "timeout" => {
                o.timeout = seconds(name, &value)?;
                if o.timeout.is_zero() {
                    return Err("--timeout must be above 0".into());
                }
            }
            "max-time" => max_time = Some(seconds(name, &value)?),
            "sessions" => o.sessions = count(name, &value, 10_000_000usize)?,
            "connections" => o.connections = count(name, &value, 100_000usize)?,
            "duration" => o.duration = seconds(name, &value)?,
            "warmup" => o.warmup = seconds(name, &value)?,
            "tool" => o.tool = value,
            "arguments" => {
                let v: Value = serde_json::from_str(&value)
                    .map_err(|e| format!("--arguments is not JSON: {e}"))?;
                let Value::Object(arguments) = v else {
                    return Err("--arguments must be a JSON object".into());
                };
                o.arguments = arguments;
            }
            "cycles" => o.cycles = count(name, &value, 1_000_000_000u64)?,
            "report-every" => o.report_every = count(name, &value, 1_000_000_000u64)?,
            "server-pid" => o.server_pids.push(count(name, &value, u32::MAX)?),
            "threads" => o.threads = count(name, &value, 256usize)?,
            "ca-file" => o.ca_files.push(value),
            "client-cert" => o.client_cert = Some(value),
            "client-key" => o.client_key = Some(value),
            "header" => {
                let (k, v) = value
                    .split_once(':')
                    .ok_or_else(|| format!("--header: not 'Name: value': {value:?}"))?;
                o.headers.push((k.trim().to_string(), v.trim().to_string()));
            }
            "token" => o.tokens.push(value),
            "connect-to" => o.connect_to.push(value),
            "rate" => {
                let r: f64 = value
                    .parse()
                    .map_err(|_| format!("--rate: not a number: {value}"))?;
                if !(r.is_finite() && r > 0.0 && r <= 1e8) {
                    return Err(format!("--rate: out of range: {value}"));
                }
                o.rate = Some(r);
            }
            _ => return Err(format!("unknown option --{name}")),
        }
    }
    if o.url.is_empty() {
        return Err("--url is required".into());
    }
    if matches!(mode, Mode::Calls | Mode::Handshakes) && o.duration.is_zero() {
        return Err("--duration must be above 0".into());
    }
    if mode == Mode::Hold {
        o.connections = o.connections.min(o.sessions);
    }
    o.max_time = max_time.unwrap_or(match mode {
        Mode::Calls | Mode::Handshakes => o.warmup + o.duration + Duration::from_secs(60),
        Mode::Hold | Mode::Churn => Duration::from_secs(3600),
    });
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn defaults_and_values() {
        let o = parse(&args(
            "calls --url http://127.0.0.1:1/mcp --sessions 8 --duration=2.5",
        ))
        .expect("ok")
        .expect("options");
        assert_eq!(o.mode, Mode::Calls);
        assert_eq!(o.sessions, 8);
        assert_eq!(o.duration, Duration::from_millis(2500));
        assert_eq!(o.warmup, Duration::from_secs(2));
        assert_eq!(o.max_time, Duration::from_millis(64_500));
        assert_eq!(o.protocol_version, "2025-11-25");
        let o = parse(&args("hold --url http://x/ --no-delete --sessions 5"))
            .expect("ok")
            .expect("options");
        assert!(o.no_delete);
        assert_eq!(o.connections, 5);
        assert!(o.server_pids.is_empty());
        let o = parse(&args(
            "handshakes --url http://x/ --server-pid 4242 --server-pid=4243",
        ))
        .expect("ok")
        .expect("options");
        assert_eq!(o.server_pids, vec![4242, 4243]);
        let o = parse(&args("calls --url http://x/ --rate 1500.5 --threads 2"))
            .expect("ok")
            .expect("options");
        assert_eq!((o.rate, o.threads), (Some(1500.5), 2));
    }

    #[test]
    fn reaching_options() {
        let o = parse(&args(
            "calls --url https://mcp.example.test/mcp --ca-file a.pem --ca-file=b.pem --insecure \
             --client-cert c.pem --client-key k.pem --header x-api-key:k1 --token t1 --token t2 \
             --connect-to mcp.example.test:443:127.0.0.1:8443",
        ))
        .expect("ok")
        .expect("options");
        assert_eq!(o.ca_files, vec!["a.pem", "b.pem"]);
        assert!(o.insecure);
        assert_eq!(o.headers, vec![("x-api-key".to_string(), "k1".to_string())]);
        assert_eq!(o.tokens, vec!["t1", "t2"]);
        let settings = crate::engine_settings(&o);
        assert_eq!(
            settings.headers,
            vec![("x-api-key".to_string(), "k1".to_string())]
        );
        assert_eq!(settings.bearer_tokens, vec!["t1", "t2"]);
        assert_eq!(
            (
                settings.client_cert.as_deref(),
                settings.client_key.as_deref()
            ),
            (Some("c.pem"), Some("k.pem"))
        );
        assert_eq!(
            settings.connect_to,
            vec!["mcp.example.test:443:127.0.0.1:8443"]
        );
        let cfg = settings.build().expect("the engine takes the settings");
        assert_eq!(cfg.tls.ca_files, vec!["a.pem", "b.pem"]);
        assert_eq!(cfg.request_type, "mcpfast-load");
        assert!(parse(&args("calls --url http://x/ --header novalue")).is_err());
        assert!(parse(&args("calls --url http://x/ --insecure=yes")).is_err());
    }

    #[test]
    fn errors() {
        assert!(parse(&args("calls")).is_err());
        assert!(parse(&args("calls --url http://x/ --cycles 3")).is_err());
        assert!(parse(&args("calls --url http://x/ --sessions 0")).is_err());
        assert!(parse(&args("calls --url http://x/ --arguments [1]")).is_err());
        assert!(parse(&args("calls --url http://x/ --timeout 0")).is_err());
        assert!(parse(&args("fly --url http://x/")).is_err());
        assert!(parse(&args("churn --url")).is_err());
        assert!(matches!(parse(&args("churn --help")), Ok(None)));
        assert!(parse(&args("churn --url http://x/ --server-pid 7")).is_err());
        assert!(parse(&args("calls --url http://x/ --server-pid 0")).is_err());
        assert!(parse(&args("calls --url http://x/ --server-pid x")).is_err());
        assert!(parse(&args("calls --url http://x/ --rate 0")).is_err());
        assert!(parse(&args("churn --url http://x/ --rate 10")).is_err());
        assert!(parse(&args("calls --url http://x/ --threads 0")).is_err());
    }
}
