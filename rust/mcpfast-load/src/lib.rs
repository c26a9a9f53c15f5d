//! mcpfast-load: a command-line front on the native load engine (`mcpfast-engine`) for MCP
//! over Streamable HTTP (the handshake era, 2025-03-26..2025-11-25).
//!
//! The CLI ([`cli`]) becomes the engine's typed settings; the engine's own families run the load on its
//! own thread(s) (`calls`: `tools_call`, `handshakes`: `handshake`, `churn`: `session_churn`,
//! `hold`: `hold`), and this front only steers it through the engine's public API (users,
//! iterations, stop), drains its rows at the window's edges and prints them ([`stats`]: the
//! rows added up per phase, µs summaries, CPU time). One run loop serves the Python binding
//! and this CLI.

pub mod cli;
pub mod stats;

use std::io::Write;
use std::time::{Duration, Instant};

use mcpfast_engine::config::{Family, Settings, Transport};
use mcpfast_engine::rows::FixedRow;
use mcpfast_engine::{Engine, Status};
use serde_json::{json, Value};

use crate::cli::{Mode, Options};
use crate::stats::{cpu_json, process_cpu, server_cpu_json, summary, Cpu, Tally};

/// How often the front looks at the engine's counters while it waits.
const POLL: Duration = Duration::from_millis(1);

/// The engine settings of a run (checked by the engine: a bad value is its error to name).
pub fn engine_settings(opts: &Options) -> Settings {
    let mut settings = Settings {
        transport: Transport::Http,
        url: Some(opts.url.clone()),
        family: match opts.mode {
            Mode::Calls => Family::ToolsCall,
            Mode::Handshakes => Family::Handshake,
            Mode::Churn => Family::SessionChurn,
            Mode::Hold => Family::Hold,
        },
        protocol_version: opts.protocol_version.clone(),
        tool: opts.tool.clone(),
        arguments: opts.arguments.clone(),
        timeout_s: opts.timeout.as_secs_f64(),
        threads: opts.threads,
        max_sessions: 10_000_000,
        request_type: Some("mcpfast-load".into()),
        ca_files: opts.ca_files.clone(),
        insecure: opts.insecure,
        headers: opts.headers.clone(),
        bearer_tokens: opts.tokens.clone(),
        connect_to: opts.connect_to.clone(),
        // one without the other is the engine's error to name
        client_cert: opts.client_cert.clone(),
        client_key: opts.client_key.clone(),
        ..Settings::default()
    };
    match opts.mode {
        Mode::Calls => {
            if let Some(rate) = opts.rate {
                settings.rate = Some(rate);
                settings.max_inflight = opts.sessions.max(4096);
            }
        }
        Mode::Handshakes | Mode::Churn => {
            settings.handshake_call = false;
            settings.cycle_latency = true;
            settings.churn_delete_share = 1.0;
            if opts.mode == Mode::Churn {
                settings.iterations = Some(opts.cycles);
                settings.progress_every = Some(opts.report_every);
            }
        }
        Mode::Hold => {
            settings.iterations = Some(opts.sessions as u64);
            settings.hold_delete = !opts.no_delete;
        }
    }
    settings
}

/// Run one mode to the end; prints the JSON lines and the human line, returns the exit status.
pub fn run(opts: Options) -> i32 {
    let engine = match engine_settings(&opts).build().and_then(Engine::new) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("mcpfast-load: {e}");
            return 2;
        }
    };
    let https = opts.url.starts_with("https://");
    if https && opts.insecure {
        eprintln!("mcpfast-load: TLS without verification: any server certificate is accepted (--insecure)");
    }
    let started = Instant::now();
    let front = Front {
        deadline: started + opts.max_time,
        started,
        opts,
        engine,
        tally: Tally::default(),
    };
    if let Err(e) = front.engine.start() {
        eprintln!("mcpfast-load: {e}");
        return 2;
    }
    let (summary, human, cut_short, failed) = match front.opts.mode {
        Mode::Calls => front.calls(),
        Mode::Handshakes => front.handshakes(),
        Mode::Hold => front.hold(),
        Mode::Churn => front.churn(),
    };
    emit(&summary);
    eprintln!("{human}");
    if cut_short {
        3
    } else if failed {
        1
    } else {
        0
    }
}

/// One run: the options, the engine, and the rows drained so far.
struct Front {
    opts: Options,
    engine: Engine,
    tally: Tally,
    started: Instant,
    /// Hard cap (`--max-time`): the run stops here.
    deadline: Instant,
}

/// The summary, the human line, whether the run was cut short, whether anything failed.
type Outcome = (Value, String, bool, bool);

impl Front {
    /// A mode's end: its summary, and its human line (`head`, then the failures and the
    /// generator's CPU every mode reports, then `cpu_note`); failed when any request failed.
    fn outcome(&self, s: Value, head: String, cpu_note: &str, cut_short: bool) -> Outcome {
        let failures = self.tally.failures_total();
        let cpu = s["generator_cpu_seconds"].as_f64().unwrap_or(0.0);
        let human = format!("{head}, {failures} failures, generator CPU {cpu:.2} s{cpu_note}");
        (s, human, cut_short, failures > 0)
    }

    /// The common head of every JSON line.
    fn header(&self, event: &str) -> Value {
        json!({
            "event": event,
            "mode": self.opts.mode.name(),
            "url": self.opts.url,
            "protocol_version_requested": self.opts.protocol_version,
            "tls_verification": if !self.opts.url.starts_with("https://") {
                "none"
            } else if self.opts.insecure {
                "off"
            } else {
                "on"
            },
        })
    }

    fn drain(&mut self, in_window: bool) {
        let rows = self.engine.drain();
        self.tally.add(&rows, in_window);
    }

    /// Sleep until `at` (or the deadline), draining the rows (outside the window) meanwhile.
    fn sleep_until(&mut self, at: Instant) {
        let at = at.min(self.deadline);
        loop {
            let now = Instant::now();
            if now >= at {
                return;
            }
            std::thread::sleep((at - now).min(Duration::from_millis(200)));
        }
    }

    /// Poll the engine's status until `done` says so or `limit`; false at the limit. The rows
    /// drained meanwhile count as the window's when `in_window`.
    fn wait_for(
        &mut self,
        limit: Instant,
        in_window: bool,
        mut done: impl FnMut(&Status, &Tally) -> bool,
    ) -> bool {
        let limit = limit.min(self.deadline);
        loop {
            self.drain(in_window);
            if done(&self.engine.status(), &self.tally) {
                return true;
            }
            if Instant::now() >= limit {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stop the engine (in-flight requests, and the DELETEs of its sessions, get `grace`) and
    /// drain the rest (outside the window).
    fn stop(&mut self, grace: Duration) {
        self.engine.stop(grace);
        self.drain(false);
    }

    /// The parts of every summary: requests, failures, latency, connections, versions.
    fn common(&self, summary: &mut Value) {
        let st = self.engine.status();
        let versions: serde_json::Map<String, Value> = self
            .engine
            .versions()
            .into_iter()
            .map(|(v, n)| (v, json!(n)))
            .collect();
        summary["requests"] = self.tally.requests_json();
        summary["failures"] = self.tally.failures_json(&self.engine.samples());
        summary["latency_us"] = self.tally.latency_json();
        summary["connections"] = json!({
            "opened": st.connects,
            "closed_by_server": st.server_closes,
            "closed_while_idle": st.idle_closes,
            "reconnects": st.connects.saturating_sub(st.connections),
        });
        summary["sse_messages_before_reply"] = json!(st.sse_other_messages);
        summary["sessions_reinitialized_after_404"] = json!(st.reinitialized);
        summary["protocol_versions_negotiated"] = Value::Object(versions);
        summary["engine"] = json!({
            "threads": self.opts.threads,
            "sent": st.sent,
            "completed": st.completed,
        });
    }

    /// The generator's CPU over the run and the window (`generator_cpu_seconds`, `generator_cpu`).
    fn cpu(&self, summary: &mut Value, window: Option<(Cpu, Cpu, Duration)>) {
        let (cpu, detail) = cpu_json(self.started, window);
        summary["generator_cpu_seconds"] = json!(cpu);
        summary["generator_cpu"] = detail;
    }

    /// Warm up, then the measured window: (window length, CPU at its edges, the server's CPU
    /// at its edges). Rows before and after the window are counted in the totals only.
    #[allow(clippy::type_complexity)]
    fn window(&mut self, from: Instant) -> (Duration, (Cpu, Cpu), (Option<f64>, Option<f64>)) {
        let pids = self.opts.server_pids.clone();
        self.sleep_until(from + self.opts.warmup);
        self.drain(false);
        let (t0, cpu0, srv0) = (Instant::now(), Cpu::now(), process_cpu(&pids));
        if t0 >= self.deadline {
            return (Duration::ZERO, (cpu0, cpu0), (srv0, srv0));
        }
        self.sleep_until(t0 + self.opts.duration);
        self.drain(true);
        let (t1, cpu1, srv1) = (Instant::now(), Cpu::now(), process_cpu(&pids));
        (t1 - t0, (cpu0, cpu1), (srv0, srv1))
    }

    /// `calls`: N sessions loop tools/call (closed model, or `--rate` arrivals/s).
    fn calls(mut self) -> Outcome {
        let n = self.opts.sessions;
        // 1. open every session; the engine's sessions start calling as soon as they are open
        let t_open = Instant::now();
        self.engine.set_users(n);
        // every session open, or each one tried at least once and failed
        let limit = t_open + self.opts.timeout * 2 + Duration::from_secs(1);
        self.wait_for(limit, false, |st, t| {
            st.established >= n as u64 || st.established + t.phases[0].failed_total >= n as u64
        });
        let open_seconds = t_open.elapsed().as_secs_f64();
        let opened = (self.engine.status().established as usize).min(n);
        // 2. warm up, then measure
        let (window, (c0, c1), (s0, s1)) = self.window(Instant::now());
        // 3. stop: every session DELETEs its own (the DELETEs count as the window's, the
        // calls that ended after it do not)
        self.engine.stop(self.opts.timeout);
        let rows = self.engine.drain();
        let (deletes, rest): (Vec<_>, Vec<_>) = rows
            .into_iter()
            .partition(|r| r.name == FixedRow::Delete.id());
        self.tally.add(&deletes, true);
        self.tally.add(&rest, false);
        let t = &self.tally;
        let call = &t.phases[3];
        let secs = window.as_secs_f64();
        let rate = if secs > 0.0 {
            call.ok as f64 / secs
        } else {
            0.0
        };
        let deleted = t.phases[4].ok_total;
        let cut_short = window + Duration::from_millis(1) < self.opts.duration;
        let mut s = self.header("summary");
        s["sessions"] = json!({"requested": n, "opened": opened, "deleted": deleted, "open_seconds": round3(open_seconds)});
        s["tool"] = json!(self.opts.tool);
        s["warmup_seconds"] = json!(self.opts.warmup.as_secs_f64());
        s["window_seconds"] = json!(round3(secs));
        s["calls"] = json!(call.ok);
        s["calls_per_second"] = json!(round1(rate));
        self.common(&mut s);
        if let Some(target) = self.opts.rate {
            let st = self.engine.status();
            s["open_model"] = json!({
                "target_rate": target,
                "latency_origin": "intended send time",
                "sent": st.sent,
                "late": st.late,
                "dropped": st.dropped,
                "behind": st.behind,
                "late_after_ms": self.engine.config().late_after.as_secs_f64() * 1000.0,
                "send_lag_us": summary(&call.lag),
                "service_time_us": summary(&call.service),
            });
        }
        self.cpu(&mut s, Some((c0, c1, window)));
        s["cut_short"] = json!(cut_short);
        if !self.opts.server_pids.is_empty() {
            s["server_cpu"] = server_cpu_json(&self.opts.server_pids, s0, s1, window, call.ok);
        }
        let lat = &s["latency_us"];
        let head = format!(
            "calls: {:.0} calls/s over {:.1} s ({} of {} sessions), p50 {} p99 {} max {}",
            rate,
            secs,
            opened,
            n,
            pct(lat, "tools/call", "p50"),
            pct(lat, "tools/call", "p99"),
            pct(lat, "tools/call", "max"),
        );
        let share = s["generator_cpu"]["window_share_of_one_core"]
            .as_f64()
            .unwrap_or(0.0);
        let note = format!(" ({:.0}% of a core in the window)", share * 100.0);
        self.outcome(s, head, &note, cut_short)
    }

    /// `handshakes`: each connection loops initialize, initialized, DELETE.
    fn handshakes(mut self) -> Outcome {
        let c = self.opts.connections;
        self.engine.set_users(c);
        let (window, (c0, c1), (s0, s1)) = self.window(Instant::now());
        self.stop(self.opts.timeout);
        let t = &self.tally;
        let secs = window.as_secs_f64();
        let cycles = t.cycle.ok;
        let rate = if secs > 0.0 {
            cycles as f64 / secs
        } else {
            0.0
        };
        let cut_short = window + Duration::from_millis(1) < self.opts.duration;
        let mut s = self.header("summary");
        s["connections_requested"] = json!(c);
        s["warmup_seconds"] = json!(self.opts.warmup.as_secs_f64());
        s["window_seconds"] = json!(round3(secs));
        s["handshakes"] = json!(cycles);
        s["handshakes_total"] = json!(t.cycle.ok_total);
        s["handshakes_per_second"] = json!(round1(rate));
        s["cycle_latency_us"] = summary(&t.cycle.latency);
        self.common(&mut s);
        self.cpu(&mut s, Some((c0, c1, window)));
        s["cut_short"] = json!(cut_short);
        if !self.opts.server_pids.is_empty() {
            s["server_cpu"] = server_cpu_json(&self.opts.server_pids, s0, s1, window, cycles);
        }
        let lat = &s["latency_us"];
        let head = format!(
            "handshakes: {:.0} cycles/s over {:.1} s ({} connections), initialize p50 {} p99 {}, DELETE p99 {}",
            rate,
            secs,
            c,
            pct(lat, "initialize", "p50"),
            pct(lat, "initialize", "p99"),
            pct(lat, "delete", "p99"),
        );
        self.outcome(s, head, "", cut_short)
    }

    /// `hold`: open N sessions over C connections, print a line, wait for stdin, DELETE them.
    fn hold(mut self) -> Outcome {
        let n = self.opts.sessions;
        let c = self.opts.connections;
        let t_open = Instant::now();
        self.engine.set_users(c);
        // no warm-up: every row of a hold is the window's
        self.wait_for(self.deadline, true, |st, _| st.iterations >= n as u64);
        let open_seconds = t_open.elapsed().as_secs_f64();
        let held = self.engine.status().held;
        let mut line = self.header("held");
        line["sessions_requested"] = json!(n);
        line["sessions_open"] = json!(held);
        line["open_seconds"] = json!(round3(open_seconds));
        line["opens_per_second"] = json!(round1(if open_seconds > 0.0 {
            held as f64 / open_seconds
        } else {
            0.0
        }));
        line["failures"] = self.tally.failures_json(&self.engine.samples());
        line["latency_us"] = self.tally.latency_json();
        self.cpu(&mut line, None);
        line["pid"] = json!(std::process::id());
        emit(&line);
        eprintln!("hold: {held} of {n} sessions open in {open_seconds:.2} s; waiting for a line or EOF on stdin");

        // wait for the driver (a line or EOF on stdin), or the hard deadline
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let _ = std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || {
                let mut buf = String::new();
                let _ = std::io::stdin().read_line(&mut buf);
                let _ = tx.send(());
            });
        let t_wait = Instant::now();
        let released = rx
            .recv_timeout(self.deadline.saturating_duration_since(t_wait))
            .is_ok();
        let held_seconds = t_wait.elapsed().as_secs_f64();

        // stop: each connection DELETEs its sessions one after the other
        let t_delete = Instant::now();
        let per_conn = n.div_ceil(c.max(1)) as u32;
        let grace = if self.opts.no_delete {
            Duration::from_millis(200)
        } else {
            (self.opts.timeout * 2).max(Duration::from_secs(60))
                + Duration::from_millis(10) * per_conn
        };
        self.engine.stop(grace);
        self.drain(true);
        let delete_seconds = t_delete.elapsed().as_secs_f64();
        let t = &self.tally;
        let deleted = t.phases[4].ok_total;
        let mut s = self.header("summary");
        s["sessions_requested"] = json!(n);
        s["sessions_open"] = json!(held);
        s["open_seconds"] = json!(round3(open_seconds));
        s["held_seconds"] = json!(round3(held_seconds));
        s["released_by"] = json!(if released { "stdin" } else { "max-time" });
        s["deleted"] = json!(deleted);
        s["delete_skipped"] = json!(self.opts.no_delete);
        s["delete_seconds"] = json!(round3(delete_seconds));
        self.common(&mut s);
        // the common block's connection counts, with how many were asked for
        s["connections"]["requested"] = json!(c);
        self.cpu(&mut s, None);
        let cut_short = !released;
        s["cut_short"] = json!(cut_short);
        let lat = &s["latency_us"];
        let head = format!(
            "hold: {held} of {n} sessions held {held_seconds:.1} s, {} deleted, initialize p50 {} p99 {}",
            if self.opts.no_delete { "none".to_string() } else { deleted.to_string() },
            pct(lat, "initialize", "p50"),
            pct(lat, "initialize", "p99"),
        );
        self.outcome(s, head, "", cut_short)
    }

    /// `churn`: create-and-delete cycles, a progress line every `--report-every`.
    fn churn(mut self) -> Outcome {
        let cycles = self.opts.cycles;
        let c = self.opts.connections;
        let t_start = Instant::now();
        self.engine.set_users(c);
        loop {
            self.drain(true);
            for (kind, msg) in self.engine.events() {
                if kind == "progress" {
                    let done: u64 = msg.parse().unwrap_or(0);
                    self.progress(done, t_start);
                }
            }
            if self.engine.status().iterations >= cycles || Instant::now() >= self.deadline {
                break;
            }
            std::thread::sleep(POLL);
        }
        let elapsed = t_start.elapsed().as_secs_f64();
        self.engine.stop(self.opts.timeout);
        self.drain(true);
        let attempted = self.engine.status().iterations;
        let t = &self.tally;
        let ok = t.cycle.ok_total;
        let rate = if elapsed > 0.0 {
            ok as f64 / elapsed
        } else {
            0.0
        };
        let mut s = self.header("summary");
        s["cycles_requested"] = json!(cycles);
        s["cycles_attempted"] = json!(attempted);
        s["cycles_ok"] = json!(ok);
        s["connections_requested"] = json!(c);
        s["elapsed_seconds"] = json!(round3(elapsed));
        s["cycles_per_second"] = json!(round1(rate));
        s["cycle_latency_us"] = summary(&t.cycle.latency);
        self.common(&mut s);
        self.cpu(&mut s, None);
        let cut_short = attempted < cycles;
        s["cut_short"] = json!(cut_short);
        let lat = &s["latency_us"];
        let head = format!(
            "churn: {} of {} cycles ok in {:.1} s ({:.0}/s, {} connections), initialize p99 {}, DELETE p99 {}",
            ok,
            cycles,
            elapsed,
            rate,
            c,
            pct(lat, "initialize", "p99"),
            pct(lat, "delete", "p99"),
        );
        self.outcome(s, head, "", cut_short)
    }

    /// A churn progress line: `done` cycles ended (the engine's own count at that moment).
    fn progress(&self, done: u64, t_start: Instant) {
        let elapsed = t_start.elapsed().as_secs_f64();
        let mut line = self.header("progress");
        line["cycles_done"] = json!(done);
        line["cycles_ok"] = json!(self.tally.cycle.ok_total);
        line["failures"] = json!(self.tally.failures_total());
        line["elapsed_seconds"] = json!(round3(elapsed));
        line["cycles_per_second"] = json!(round1(if elapsed > 0.0 {
            done as f64 / elapsed
        } else {
            0.0
        }));
        emit(&line);
    }
}

/// Write one JSON object as a line on stdout.
pub fn emit(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// A human-readable µs figure from a latency summary.
pub fn pct(latency: &Value, phase: &str, key: &str) -> String {
    match latency
        .get(phase)
        .and_then(|p| p.get(key))
        .and_then(Value::as_f64)
    {
        Some(us) if us >= 1000.0 => format!("{:.2} ms", us / 1000.0),
        Some(us) => format!("{us:.0} µs"),
        None => "-".into(),
    }
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
