//! For the unit tests of the HTTP session and families: a scripted server on 127.0.0.1 that
//! records every request and answers each as its script says (a reply, a reply then a close,
//! or a close without a reply), an MCP server's answers to build scripts from, and a [`Ctx`]
//! of thread 0 of an engine for given settings, with its rows and counters read back.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

use crate::config::Settings;
use crate::context::Ctx;
use crate::shared::{lock, Shared};
use crate::stats;

/// No test waits longer than this for anything (a hung exchange fails the test).
pub(crate) const BOUND: Duration = Duration::from_secs(10);

/// One request as the server read it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// The connection it came on (0, 1, ... in the order they were accepted).
    pub(crate) conn: usize,
    /// The address that connection came from.
    pub(crate) peer: std::net::IpAddr,
    /// `POST`, `DELETE`, `GET`.
    pub(crate) verb: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Value,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC method, or the verb for a request without a body (`DELETE`).
    pub(crate) fn what(&self) -> String {
        self.body
            .get("method")
            .and_then(Value::as_str)
            .map_or_else(|| self.verb.clone(), str::to_owned)
    }

    pub(crate) fn id(&self) -> Value {
        self.body.get("id").cloned().unwrap_or(Value::Null)
    }
}

/// What the server does with a request.
pub(crate) enum Answer {
    /// Write these bytes and keep the connection.
    Reply(Vec<u8>),
    /// Write these bytes and close the connection.
    ReplyClose(Vec<u8>),
    /// Close the connection without answering.
    Close,
}

/// A response with `status`, extra header lines (each ending in CRLF) and a JSON body (none
/// when empty).
pub(crate) fn response(status: u16, headers: &str, body: &str) -> Vec<u8> {
    let kind = if body.is_empty() {
        String::new()
    } else {
        "Content-Type: application/json\r\n".into()
    };
    format!(
        "HTTP/1.1 {status} X\r\n{kind}{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A JSON-RPC result for request `seen`.
pub(crate) fn result(seen: &Seen, result: Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": seen.id(), "result": result}).to_string()
}

/// How a well-behaved MCP server answers: initialize with session id `sid` (none when empty) in
/// the version asked for, notifications with 202, DELETE with 200, server/discover, and any
/// other request with an empty tool result.
pub(crate) fn mcp(seen: &Seen, sid: &str) -> Answer {
    let what = seen.what();
    let bytes = match what.as_str() {
        "initialize" => {
            let version = seen.body["params"]["protocolVersion"].clone();
            let headers = if sid.is_empty() {
                String::new()
            } else {
                format!("Mcp-Session-Id: {sid}\r\n")
            };
            let body = result(
                seen,
                serde_json::json!({"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}),
            );
            response(200, &headers, &body)
        }
        "DELETE" => response(200, "", ""),
        w if w.starts_with("notifications/") => response(202, "", ""),
        "server/discover" => response(
            200,
            "",
            &result(
                seen,
                serde_json::json!({"supportedVersions": ["2026-07-28"]}),
            ),
        ),
        _ => response(
            200,
            "",
            &result(seen, serde_json::json!({"content": [], "isError": false})),
        ),
    };
    Answer::Reply(bytes)
}

type Script = Box<dyn FnMut(&Seen) -> Answer + Send>;

/// A server on 127.0.0.1 that answers as its script says and keeps every request it read.
pub(crate) struct Server {
    pub(crate) port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start(script: impl FnMut(&Seen) -> Answer + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("address").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Mutex<Script>> = Arc::new(Mutex::new(Box::new(script)));
        let (s, st) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            let mut n = 0;
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, from)) => {
                        let (s, st, script) = (s.clone(), st.clone(), script.clone());
                        conns.push(std::thread::spawn(move || {
                            serve(stream, (n, from.ip()), &s, &st, &script);
                        }));
                        n += 1;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(_) => break,
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Server {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The requests read so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }

    /// What the requests read so far were (`initialize`, `tools/call`, `DELETE`...).
    pub(crate) fn whats(&self) -> Vec<String> {
        self.seen().iter().map(Seen::what).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Read requests on one connection and answer them, until the peer or the script closes it.
fn serve(
    mut stream: TcpStream,
    conn: (usize, std::net::IpAddr),
    seen: &Mutex<Vec<Seen>>,
    stop: &AtomicBool,
    script: &Mutex<Script>,
) {
    // bounded: a read wakes at least this often to look at the stop flag
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        if let Some((used, request)) = parse(&buf, conn) {
            buf.drain(..used);
            lock(seen).push(request.clone());
            let answer = {
                let mut answer_to = lock(script);
                (*answer_to)(&request)
            };
            match answer {
                Answer::Reply(bytes) => {
                    if stream.write_all(&bytes).is_err() {
                        return;
                    }
                }
                Answer::ReplyClose(bytes) => {
                    let _ = stream.write_all(&bytes);
                    return;
                }
                Answer::Close => return,
            }
            continue;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// A whole request at the start of `buf` (head and `Content-Length` body): its length and
/// what it says.
fn parse(buf: &[u8], (conn, peer): (usize, std::net::IpAddr)) -> Option<(usize, Seen)> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(head) = req.parse(buf).ok()? else {
        return None;
    };
    let headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    if buf.len() < head + len {
        return None;
    }
    let body = serde_json::from_slice(&buf[head..head + len]).unwrap_or(Value::Null);
    let seen = Seen {
        conn,
        peer,
        verb: req.method.unwrap_or("").to_string(),
        headers,
        body,
    };
    Some((head + len, seen))
}

/// The engine's settings for `server` (the defaults otherwise; a short request timeout).
pub(crate) fn settings(server: &Server) -> Settings {
    Settings {
        url: Some(server.url()),
        timeout_s: 2.0,
        ..Settings::default()
    }
}

/// The context of thread 0 of an engine for `settings`, running one user (slot 0).
pub(crate) fn ctx(settings: Settings) -> Rc<Ctx> {
    let cfg = settings.build().expect("valid settings");
    let shared = Arc::new(Shared::new(cfg).expect("engine state"));
    shared.set_users(1);
    let ctx = Ctx::new(shared, 0);
    ctx.set_target(1);
    Rc::new(ctx)
}

/// Run `f` on a current-thread runtime (local tasks allowed), within [`BOUND`].
pub(crate) fn run<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local
        .block_on(&rt, async { tokio::time::timeout(BOUND, f).await })
        .expect("the test ends within its bound")
}

/// A row recorded by a test's context.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) name: String,
    pub(crate) num: u64,
    pub(crate) failures: u64,
    /// (failure reason, count).
    pub(crate) errors: Vec<(String, u64)>,
    /// (µs, or the value recorded, count).
    pub(crate) buckets: Vec<(u64, u64)>,
}

/// The rows recorded since the last call, by name.
pub(crate) fn rows(ctx: &Ctx) -> Vec<Recorded> {
    let window = lock(&ctx.shared.stats[ctx.idx]).take_window();
    let mut out: Vec<Recorded> = stats::merge_windows(vec![window])
        .into_iter()
        .map(|r| Recorded {
            name: ctx.shared.names[r.name].clone(),
            num: r.num,
            failures: r.failures,
            errors: r.errors,
            buckets: r.buckets,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// (requests, failures) of row `name` in `rows`.
pub(crate) fn count(rows: &[Recorded], name: &str) -> (u64, u64) {
    rows.iter()
        .find(|r| r.name == name)
        .map_or((0, 0), |r| (r.num, r.failures))
}

/// The failure reasons of row `name` in `rows`.
pub(crate) fn reasons(rows: &[Recorded], name: &str) -> Vec<String> {
    rows.iter()
        .find(|r| r.name == name)
        .map_or_else(Vec::new, |r| r.errors.iter().map(|e| e.0.clone()).collect())
}
