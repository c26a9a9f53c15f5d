//! A minimal, fast MCP Streamable HTTP server (handshake era) for testing the engine and mcpfast-load: it
//! answers as fast as one thread can, so a run against it shows what the generator itself can
//! do, and it can misbehave on purpose (close connections, stall, answer with the wrong id).
//!
//!   cargo run --release -p mcpfast-engine --example mock_server -- --port 18600 [--sse]
//!       [--close-every N] [--reset-every N] [--stall-every N] [--wrong-id-every N]
//!       [--idle-close-ms MS] [--delay-us US]
//!
//! Replies are JSON with Content-Length, or with `--sse` an SSE stream in chunked encoding (a
//! priming event, a notification, then the reply, split over several chunks). Only for tests:
//! it trusts its input far more than a real server may.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::io::Write;
use std::net::TcpListener as StdListener;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use mcpfast_engine::check;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Default)]
pub struct MockOptions {
    /// Answer requests with an SSE stream (chunked) instead of JSON.
    pub sse: bool,
    /// Send `Connection: close` and close after every N responses on a connection.
    pub close_every: u64,
    /// Close the connection without answering every Nth request (server-wide count).
    pub reset_every: u64,
    /// Never answer every Nth tools/call (server-wide count).
    pub stall_every: u64,
    /// Answer every Nth tools/call with the id plus one.
    pub wrong_id_every: u64,
    /// Close connections idle (between requests) for this many milliseconds.
    pub idle_close_ms: u64,
    /// Answer every tools/call this many µs late (a tool that sleeps).
    pub delay_us: u64,
    /// Serve GET (the standalone SSE stream): a priming event, then this many events 20 ms
    /// apart, then hold the stream open (0: GET is answered 405).
    pub get_events: u64,
    /// End the GET stream after its events instead of holding it (a server that ends streams).
    pub get_ends: bool,
    /// While set, the server is "down": it closes every connection without answering.
    pub down: Arc<AtomicBool>,
    /// tools/call requests answered.
    pub answered: Arc<AtomicUsize>,
}

struct Shared {
    opts: MockOptions,
    sessions: RefCell<HashSet<String>>,
    minted: Cell<u64>,
    requests: Cell<u64>,
    calls: Cell<u64>,
    open: Arc<AtomicUsize>,
}

/// Serve on `listener` forever (in the calling thread). `open` tracks the live sessions.
pub fn serve(
    listener: StdListener,
    opts: MockOptions,
    open: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = TcpListener::from_std(listener)?;
        let shared = Rc::new(Shared {
            opts,
            sessions: RefCell::new(HashSet::new()),
            minted: Cell::new(0),
            requests: Cell::new(0),
            calls: Cell::new(0),
            open,
        });
        loop {
            let (stream, _) = listener.accept().await?;
            if shared.opts.down.load(Ordering::Relaxed) {
                drop(stream);
                continue;
            }
            let _ = stream.set_nodelay(true);
            let shared = shared.clone();
            tokio::task::spawn_local(async move {
                let _ = connection(stream, &shared).await;
            });
        }
    })
}

/// Start a mock on an ephemeral port in its own thread; returns the port and the session gauge.
pub fn spawn(opts: MockOptions) -> (u16, Arc<AtomicUsize>) {
    let listener = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("local addr").port();
    let open = Arc::new(AtomicUsize::new(0));
    let gauge = open.clone();
    std::thread::spawn(move || serve(listener, opts, gauge));
    (port, open)
}

async fn connection(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut len = 0;
    let mut out = Vec::with_capacity(4096);
    let mut served = 0u64;
    let mut timer: Option<mcpfast_engine::Timer> = None;
    loop {
        // read one whole request (head + Content-Length body)
        let (head_len, method, session, body_len) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            if let Ok(httparse::Status::Complete(n)) = req.parse(&buf[..len]) {
                let mut body_len = 0;
                let mut session = None;
                for h in req.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        body_len = std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                    } else if h.name.eq_ignore_ascii_case("mcp-session-id") {
                        session = Some(String::from_utf8_lossy(h.value).into_owned());
                    }
                }
                if len >= n + body_len {
                    break (n, req.method.unwrap_or("").to_string(), session, body_len);
                }
            }
            if len == buf.len() {
                return Ok(());
            }
            let got = if len == 0 && shared.opts.idle_close_ms > 0 {
                let idle = std::time::Duration::from_millis(shared.opts.idle_close_ms);
                match tokio::time::timeout(idle, stream.read(&mut buf[len..])).await {
                    Ok(r) => r?,
                    Err(_) => return Ok(()),
                }
            } else {
                stream.read(&mut buf[len..]).await?
            };
            if got == 0 {
                return Ok(());
            }
            len += got;
        };
        let body = buf[head_len..head_len + body_len].to_vec();
        buf.copy_within(head_len + body_len..len, 0);
        len -= head_len + body_len;

        let count = shared.requests.get() + 1;
        shared.requests.set(count);
        if shared.opts.reset_every > 0 && count % shared.opts.reset_every == 0 {
            return Ok(());
        }
        if shared.opts.down.load(Ordering::Relaxed) {
            return Ok(());
        }
        served += 1;
        let close = shared.opts.close_every > 0 && served % shared.opts.close_every == 0;
        out.clear();
        if method == "GET" && shared.opts.get_events > 0 {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                .await?;
            let chunk = |data: &str| format!("{:x}\r\n{data}\r\n", data.len()).into_bytes();
            stream.write_all(&chunk("id: 0\r\ndata: \r\n\r\n")).await?;
            for i in 0..shared.opts.get_events {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                let ev = format!("event: message\r\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":{i}}}}}\r\n\r\n");
                stream.write_all(&chunk(&ev)).await?;
            }
            if shared.opts.get_ends {
                stream.write_all(b"0\r\n\r\n").await?;
                continue;
            }
            // held open until the client goes (bounded)
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut buf))
                .await;
            return Ok(());
        }
        let calls_before = shared.calls.get();
        if !respond(shared, &method, session.as_deref(), &body, close, &mut out) {
            // stall: hold the connection open without answering
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            return Ok(());
        }
        if shared.opts.delay_us > 0 && shared.calls.get() != calls_before {
            // a tools/call: answer after the delay (a timerfd: µs resolution, not tokio's ms)
            timer
                .get_or_insert_with(mcpfast_engine::Timer::new)
                .sleep(std::time::Duration::from_micros(shared.opts.delay_us))
                .await;
        }
        stream.write_all(&out).await?;
        if close {
            return Ok(());
        }
    }
}

fn simple(out: &mut Vec<u8>, status: &str, close: bool, extra: &str, body: &[u8]) {
    let conn = if close { "Connection: close\r\n" } else { "" };
    let ctype = if body.is_empty() {
        ""
    } else {
        "Content-Type: application/json\r\n"
    };
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\n{ctype}{extra}{conn}Content-Length: {}\r\n\r\n",
        body.len()
    );
    out.extend_from_slice(body);
}

/// Build the response into `out`; `false` means: do not answer at all.
fn respond(
    shared: &Shared,
    method: &str,
    session: Option<&str>,
    body: &[u8],
    close: bool,
    out: &mut Vec<u8>,
) -> bool {
    let known = session.is_some_and(|s| shared.sessions.borrow().contains(s));
    if method == "DELETE" {
        match session {
            Some(s) if shared.sessions.borrow_mut().remove(s) => {
                shared.open.fetch_sub(1, Ordering::Relaxed);
                simple(out, "200 OK", close, "", b"");
            }
            Some(_) => simple(out, "404 Not Found", close, "", b""),
            None => simple(out, "400 Bad Request", close, "", b""),
        }
        return true;
    }
    if method != "POST" {
        simple(out, "405 Method Not Allowed", close, "", b"");
        return true;
    }
    let rpc_method = check::string_member(body, "method").unwrap_or_default();
    let id = check::member(body, "id").map(<[u8]>::to_vec);
    if rpc_method == "initialize" {
        let n = shared.minted.get() + 1;
        shared.minted.set(n);
        let sid = format!("mock-{n:08x}");
        shared.sessions.borrow_mut().insert(sid.clone());
        shared.open.fetch_add(1, Ordering::Relaxed);
        let params = check::member(body, "params").unwrap_or(b"{}");
        let asked = check::string_member(params, "protocolVersion");
        let version = asked
            .filter(|v| mcpfast_engine::versions::HANDSHAKE.contains(&v.as_str()))
            .unwrap_or("2025-06-18".into());
        let result = format!(
            r#"{{"protocolVersion":"{version}","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"mock","version":"0"}}}}"#
        );
        reply_with(
            shared,
            out,
            id.as_deref().unwrap_or(b"null"),
            &result,
            close,
            &format!("Mcp-Session-Id: {sid}\r\n"),
        );
        return true;
    }
    if !known {
        if session.is_some() {
            simple(out, "404 Not Found", close, "", br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}"#);
        } else {
            simple(
                out,
                "400 Bad Request",
                close,
                "",
                br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no session"}}"#,
            );
        }
        return true;
    }
    let Some(id) = id else {
        simple(out, "202 Accepted", close, "", b"");
        return true;
    };
    if rpc_method == "tools/call" {
        let calls = shared.calls.get() + 1;
        shared.calls.set(calls);
        if shared.opts.stall_every > 0 && calls % shared.opts.stall_every == 0 {
            return false;
        }
        let id = if shared.opts.wrong_id_every > 0 && calls % shared.opts.wrong_id_every == 0 {
            let n: i64 = std::str::from_utf8(&id)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            (n + 1).to_string().into_bytes()
        } else {
            id
        };
        let params = check::member(body, "params").unwrap_or(b"{}");
        let args = check::member(params, "arguments").unwrap_or(b"{}");
        let text = check::member(args, "text").unwrap_or(b"\"\"");
        let result = format!(
            r#"{{"content":[{{"type":"text","text":{}}}]}}"#,
            String::from_utf8_lossy(text)
        );
        shared.opts.answered.fetch_add(1, Ordering::Relaxed);
        reply_with(shared, out, &id, &result, close, "");
        return true;
    }
    let error = format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32601,"message":"Method not found"}}}}"#,
        String::from_utf8_lossy(&id)
    );
    simple(out, "200 OK", close, "", error.as_bytes());
    true
}

fn reply_with(
    shared: &Shared,
    out: &mut Vec<u8>,
    id: &[u8],
    result: &str,
    close: bool,
    extra: &str,
) {
    let msg = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
        String::from_utf8_lossy(id)
    );
    if !shared.opts.sse {
        simple(out, "200 OK", close, extra, msg.as_bytes());
        return;
    }
    let conn = if close { "Connection: close\r\n" } else { "" };
    let _ = write!(out, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{extra}{conn}Transfer-Encoding: chunked\r\n\r\n");
    let events = format!(
        "id: 0\r\ndata: \r\n\r\nevent: message\r\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":\"id\\\":{}\"}}}}\r\n\r\nevent: message\r\ndata: {msg}\r\n\r\n",
        String::from_utf8_lossy(id)
    );
    // three chunks, cut inside the lines
    let b = events.as_bytes();
    let cuts = [0, b.len() / 3, b.len() * 2 / 3, b.len()];
    for w in cuts.windows(2) {
        let _ = write!(out, "{:x}\r\n", w[1] - w[0]);
        out.extend_from_slice(&b[w[0]..w[1]]);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
}

#[allow(dead_code)]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut port = 0u16;
    let mut opts = MockOptions::default();
    let mut i = 0;
    while i < args.len() {
        let value = || {
            args.get(i + 1)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        match args[i].as_str() {
            "--port" => port = u16::try_from(value()).unwrap_or(0),
            "--sse" => {
                opts.sse = true;
                i += 1;
                continue;
            }
            "--close-every" => opts.close_every = value(),
            "--reset-every" => opts.reset_every = value(),
            "--stall-every" => opts.stall_every = value(),
            "--wrong-id-every" => opts.wrong_id_every = value(),
            "--idle-close-ms" => opts.idle_close_ms = value(),
            "--delay-us" => opts.delay_us = value(),
            other => {
                eprintln!("mock_server: unknown argument {other}");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    let listener = match StdListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mock_server: cannot bind 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    eprintln!(
        "mock_server: http://{addr}/mcp ({})",
        if opts.sse {
            "SSE replies"
        } else {
            "JSON replies"
        }
    );
    if let Err(e) = serve(listener, opts, Arc::new(AtomicUsize::new(0))) {
        eprintln!("mock_server: {e}");
        std::process::exit(1);
    }
}
