//! A small HTTP/1.1 client: one request at a time on a keep-alive TCP connection.
//!
//! [`ResponseParser`] is sans-IO: it is fed whatever bytes have arrived, in any split, and says
//! how many it consumed and whether the response is complete. It reads the head with `httparse`
//! and the body framed by `Content-Length`, by `Transfer-Encoding: chunked`, or by the connection
//! closing; 1xx interim responses are skipped. [`Conn`] drives it over a TCP or TLS stream to
//! an [`Endpoint`], and keeps how each new connection was opened for the caller to report.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;

use crate::net::Endpoint;

/// Largest response head, and largest chunk-size or trailer line.
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;
/// The read buffer a connection starts with (it grows for a longer head or chunk line).
const READ_BUFFER: usize = 4 * 1024;
/// A connection idle longer than this is checked for a close by the server before reuse.
const IDLE_CHECK: Duration = Duration::from_millis(500);
/// Largest response body accepted.
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentType {
    None,
    Json,
    EventStream,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HttpError {
    Head(String),
    HeadTooLarge,
    BadContentLength,
    BadChunk,
    BodyTooLarge,
    /// Bytes after the end of the response, before the next request.
    ExtraBytes,
    /// The connection closed before a complete response; `started` if any byte of it came.
    Closed {
        started: bool,
    },
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Head(e) => write!(f, "bad response head ({e})"),
            HttpError::HeadTooLarge => f.write_str("response head too large"),
            HttpError::BadContentLength => f.write_str("bad Content-Length"),
            HttpError::BadChunk => f.write_str("bad chunked encoding"),
            HttpError::BodyTooLarge => f.write_str("response body too large"),
            HttpError::ExtraBytes => f.write_str("bytes after the end of the response"),
            HttpError::Closed { started: false } => f.write_str("connection closed by server"),
            HttpError::Closed { started: true } => f.write_str("connection closed mid-response"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Waiting for a chunk-size line.
    Size,
    /// Inside chunk data; bytes left.
    Data(usize),
    /// The CRLF after chunk data.
    DataEnd,
    /// Trailer lines after the last chunk, until an empty line.
    Trailers,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body(Framing),
    Done,
}

/// Incremental parser of one HTTP/1.1 response; reset and reused for the next.
#[derive(Debug)]
pub(crate) struct ResponseParser {
    state: State,
    started: bool,
    capture_session: bool,
    pub(crate) status: u16,
    pub(crate) content_type: ContentType,
    /// The connection may carry another request after this response.
    keep_alive: bool,
    /// The `Mcp-Session-Id` header, when asked for with `reset(true)`.
    pub(crate) session_id: Option<String>,
    /// More than one `Mcp-Session-Id` header, or a value outside visible ASCII.
    pub(crate) session_id_invalid: bool,
    /// A refusal's `WWW-Authenticate` and `Retry-After` values (statuses of 400 and above only).
    pub(crate) www_authenticate: Option<Vec<u8>>,
    pub(crate) retry_after: Option<Vec<u8>>,
    /// Keep the `Set-Cookie` values (a user with a cookie jar).
    pub(crate) capture_cookies: bool,
    pub(crate) set_cookies: Vec<Vec<u8>>,
    pub(crate) body: Vec<u8>,
    /// Largest body accepted (default [`MAX_BODY`]).
    max_body: usize,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

struct Fed {
    consumed: usize,
    done: bool,
}

impl ResponseParser {
    pub(crate) fn new() -> Self {
        ResponseParser {
            state: State::Head,
            started: false,
            capture_session: false,
            status: 0,
            content_type: ContentType::None,
            keep_alive: true,
            session_id: None,
            session_id_invalid: false,
            www_authenticate: None,
            retry_after: None,
            capture_cookies: false,
            set_cookies: Vec::new(),
            body: Vec::new(),
            max_body: MAX_BODY,
        }
    }

    /// Get ready for the next response; `capture_session` keeps its `Mcp-Session-Id`.
    pub(crate) fn reset(&mut self, capture_session: bool) {
        self.state = State::Head;
        self.started = false;
        self.capture_session = capture_session;
        self.status = 0;
        self.content_type = ContentType::None;
        self.keep_alive = true;
        self.session_id = None;
        self.session_id_invalid = false;
        self.www_authenticate = None;
        self.retry_after = None;
        self.set_cookies.clear();
        if self.body.capacity() > 64 * 1024 {
            self.body = Vec::new(); // a large reply does not pin its memory to the connection
        } else {
            self.body.clear();
        }
    }

    /// Feed the bytes received so far (not yet consumed). Consumes what it can.
    fn feed(&mut self, input: &[u8]) -> Result<Fed, HttpError> {
        if !input.is_empty() {
            self.started = true;
        }
        let mut pos = 0;
        loop {
            match self.state {
                State::Done => {
                    return Ok(Fed {
                        consumed: pos,
                        done: true,
                    })
                }
                State::Head => match self.head(&input[pos..])? {
                    Some(n) => pos += n,
                    None => {
                        return Ok(Fed {
                            consumed: pos,
                            done: false,
                        })
                    }
                },
                State::Body(framing) => {
                    let rest = &input[pos..];
                    match framing {
                        Framing::Length(left) => {
                            let take = left.min(rest.len());
                            self.body.extend_from_slice(&rest[..take]);
                            pos += take;
                            if take == left {
                                self.state = State::Done;
                            } else {
                                self.state = State::Body(Framing::Length(left - take));
                                return Ok(Fed {
                                    consumed: pos,
                                    done: false,
                                });
                            }
                        }
                        Framing::UntilClose => {
                            if self.body.len() + rest.len() > self.max_body {
                                return Err(HttpError::BodyTooLarge);
                            }
                            self.body.extend_from_slice(rest);
                            return Ok(Fed {
                                consumed: input.len(),
                                done: false,
                            });
                        }
                        Framing::Chunked(chunk) => match self.chunked(chunk, rest)? {
                            Some(n) => pos += n,
                            None => {
                                return Ok(Fed {
                                    consumed: pos,
                                    done: false,
                                })
                            }
                        },
                    }
                }
            }
        }
    }

    /// The connection reached end of file. Completes a close-delimited body; anything else
    /// unfinished is an error.
    fn eof(&mut self) -> Result<(), HttpError> {
        match self.state {
            State::Done => Ok(()),
            State::Body(Framing::UntilClose) => {
                self.state = State::Done;
                self.keep_alive = false;
                Ok(())
            }
            _ => Err(HttpError::Closed {
                started: self.started,
            }),
        }
    }

    /// Parse a head from `input`; `None` if incomplete. Skips 1xx interim responses.
    fn head(&mut self, input: &[u8]) -> Result<Option<usize>, HttpError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(input) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                return if input.len() > MAX_HEAD {
                    Err(HttpError::HeadTooLarge)
                } else {
                    Ok(None)
                };
            }
            Err(e) => return Err(HttpError::Head(e.to_string())),
        };
        let status = resp.code.unwrap_or(0);
        if (100..200).contains(&status) {
            if status == 101 {
                return Err(HttpError::Head("unexpected 101 Switching Protocols".into()));
            }
            return Ok(Some(n)); // interim: the real head follows
        }
        self.status = status;
        self.keep_alive = resp.version == Some(1);
        let mut length: Option<usize> = None;
        let mut chunked = false;
        let mut transfer_encoding = false;
        let refused = status >= 400;
        for h in resp.headers.iter() {
            let name = h.name;
            if refused && name.eq_ignore_ascii_case("www-authenticate") {
                // several challenges: joined as one list (RFC 9110 §5.3)
                let v = self.www_authenticate.get_or_insert_with(Vec::new);
                if !v.is_empty() {
                    v.extend_from_slice(b", ");
                }
                v.extend_from_slice(h.value);
            } else if refused && name.eq_ignore_ascii_case("retry-after") {
                self.retry_after = Some(h.value.to_vec());
            } else if self.capture_cookies && name.eq_ignore_ascii_case("set-cookie") {
                self.set_cookies.push(h.value.to_vec());
            } else if name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value).map_err(|_| HttpError::BadContentLength)?;
                let v: usize = v.trim().parse().map_err(|_| HttpError::BadContentLength)?;
                if length.is_some_and(|l| l != v) {
                    return Err(HttpError::BadContentLength);
                }
                length = Some(v);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                transfer_encoding = true;
                // chunked must be the last coding
                let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(b"");
                chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
            } else if name.eq_ignore_ascii_case("content-type") {
                let v = h.value.trim_ascii_start();
                self.content_type = if starts_with_ci(v, b"application/json") {
                    ContentType::Json
                } else if starts_with_ci(v, b"text/event-stream") {
                    ContentType::EventStream
                } else {
                    ContentType::Other
                };
            } else if name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        self.keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && resp.version == Some(0) {
                        self.keep_alive = true;
                    }
                }
            } else if self.capture_session && name.eq_ignore_ascii_case("mcp-session-id") {
                let valid =
                    !h.value.is_empty() && h.value.iter().all(|&b| (0x21..=0x7e).contains(&b));
                if self.session_id.is_some() || !valid {
                    self.session_id_invalid = true;
                } else {
                    // visible ASCII is UTF-8
                    self.session_id = std::str::from_utf8(h.value).ok().map(str::to_owned);
                }
            }
        }
        let framing = if status == 204 || status == 304 {
            None
        } else if transfer_encoding {
            Some(if chunked {
                Framing::Chunked(Chunk::Size)
            } else {
                Framing::UntilClose
            })
        } else if let Some(len) = length {
            if len > self.max_body {
                return Err(HttpError::BodyTooLarge);
            }
            (len > 0).then_some(Framing::Length(len))
        } else {
            Some(Framing::UntilClose)
        };
        if framing == Some(Framing::UntilClose) {
            self.keep_alive = false;
        }
        self.state = framing.map_or(State::Done, State::Body);
        Ok(Some(n))
    }

    /// Advance the chunked decoder; `None` when more input is needed.
    fn chunked(&mut self, chunk: Chunk, input: &[u8]) -> Result<Option<usize>, HttpError> {
        match chunk {
            Chunk::Size => {
                let Some(eol) = memchr::memchr(b'\n', input) else {
                    return if input.len() > MAX_HEAD {
                        Err(HttpError::BadChunk)
                    } else {
                        Ok(None)
                    };
                };
                let line = input[..eol].strip_suffix(b"\r").unwrap_or(&input[..eol]);
                let digits = line
                    .split(|&b| b == b';')
                    .next()
                    .unwrap_or(b"")
                    .trim_ascii();
                if digits.is_empty() || digits.len() > 15 {
                    return Err(HttpError::BadChunk);
                }
                let mut size = 0usize;
                for &d in digits {
                    let v = (d as char).to_digit(16).ok_or(HttpError::BadChunk)?;
                    size = size * 16 + v as usize;
                }
                if size == 0 {
                    self.state = State::Body(Framing::Chunked(Chunk::Trailers));
                } else {
                    if self.body.len() + size > self.max_body {
                        return Err(HttpError::BodyTooLarge);
                    }
                    self.state = State::Body(Framing::Chunked(Chunk::Data(size)));
                }
                Ok(Some(eol + 1))
            }
            Chunk::Data(left) => {
                if input.is_empty() {
                    return Ok(None);
                }
                let take = left.min(input.len());
                self.body.extend_from_slice(&input[..take]);
                self.state = State::Body(Framing::Chunked(if take == left {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left - take)
                }));
                Ok(Some(take))
            }
            Chunk::DataEnd => match input {
                [] | [b'\r'] => Ok(None),
                [b'\r', b'\n', ..] => {
                    self.state = State::Body(Framing::Chunked(Chunk::Size));
                    Ok(Some(2))
                }
                [b'\n', ..] => {
                    self.state = State::Body(Framing::Chunked(Chunk::Size));
                    Ok(Some(1))
                }
                _ => Err(HttpError::BadChunk),
            },
            Chunk::Trailers => {
                let Some(eol) = memchr::memchr(b'\n', input) else {
                    return if input.len() > MAX_HEAD {
                        Err(HttpError::BadChunk)
                    } else {
                        Ok(None)
                    };
                };
                let line = input[..eol].strip_suffix(b"\r").unwrap_or(&input[..eol]);
                if line.is_empty() {
                    self.state = State::Done;
                }
                Ok(Some(eol + 1))
            }
        }
    }
}

fn starts_with_ci(v: &[u8], prefix: &[u8]) -> bool {
    v.len() >= prefix.len() && v[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum ExchangeError {
    Connect(io::Error),
    /// The TLS handshake failed (the reason as rustls gives it).
    Tls(io::Error),
    Io(io::Error),
    Http(HttpError),
    Timeout,
}

impl ExchangeError {
    /// A short, stable name for counting.
    pub(crate) fn kind(&self) -> String {
        match self {
            ExchangeError::Connect(e) => format!("connect failed ({})", connect_cause(e)),
            ExchangeError::Tls(e) => format!("tls handshake failed: {}", crate::net::tls_reason(e)),
            ExchangeError::Io(e) => format!("io error ({:?})", e.kind()),
            ExchangeError::Http(e) => e.to_string(),
            ExchangeError::Timeout => "timeout".into(),
        }
    }

    /// Nothing could be connected (TCP or TLS): the caller pauses before trying again.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, ExchangeError::Connect(_) | ExchangeError::Tls(_))
    }
}

/// How a new connection was opened: the TCP connect (start, end, failure) and, over TLS, the
/// handshake (end, failure). Reported as rows of their own, never inside a request's latency.
#[derive(Debug, Clone)]
pub(crate) struct Opening {
    pub(crate) began: Instant,
    pub(crate) connected: Instant,
    pub(crate) connect_failure: Option<String>,
    pub(crate) tls: Option<(Instant, Option<String>)>,
}

impl Opening {
    /// Time spent opening, from the connect's start to the last phase's end.
    pub(crate) fn spent(&self) -> Duration {
        let end = self.tls.as_ref().map_or(self.connected, |t| t.0);
        end.saturating_duration_since(self.began)
    }
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(data).await,
            Stream::Tls(s) => {
                s.write_all(data).await?;
                s.flush().await
            }
        }
    }

    async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf).await,
            // servers often close without close_notify; the HTTP framing tells a cut reply
            Stream::Tls(s) => match s.read(buf).await {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }

    /// Whether the peer closed (or sent something unasked-for) while the connection sat idle,
    /// without waiting. Over TLS, records that carry no data (session tickets) are taken in.
    fn closed_while_idle(&mut self, scratch: &mut [u8]) -> bool {
        match self {
            Stream::Plain(s) => {
                !matches!(s.try_read(scratch), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            Stream::Tls(s) => {
                let mut cx = Context::from_waker(std::task::Waker::noop());
                let mut rb = ReadBuf::new(scratch);
                !Pin::new(s.as_mut())
                    .poll_read(&mut cx, &mut rb)
                    .is_pending()
            }
        }
    }
}

/// A TCP connection to the endpoint's next address, from its next source address when it has
/// some: bound before it connects, the port left to the connect (`IP_BIND_ADDRESS_NO_PORT`), so
/// that each source address has the whole ephemeral port range to each server address.
async fn tcp_connect(endpoint: &Endpoint) -> io::Result<TcpStream> {
    let addr = endpoint.pick();
    let Some(source) = endpoint.pick_source() else {
        return TcpStream::connect(addr).await;
    };
    let socket = if source.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // without it the bind would take a port of its own for every destination at once
    let _ = nix::sys::socket::setsockopt(
        &socket,
        nix::sys::socket::sockopt::IpBindAddressNoPort,
        &true,
    );
    socket.bind(std::net::SocketAddr::new(source, 0))?;
    socket.connect(addr).await
}

/// Why a connect failed, in few words: the kernel's resource limits by name, other errors by
/// their kind.
fn connect_cause(e: &io::Error) -> String {
    use nix::errno::Errno;
    match e.raw_os_error().map(Errno::from_raw) {
        Some(Errno::EMFILE | Errno::ENFILE) => "too many open files".into(),
        Some(Errno::EADDRNOTAVAIL) => "no free local port (EADDRNOTAVAIL)".into(),
        _ => format!("{:?}", e.kind()),
    }
}

/// One keep-alive connection to the server, reconnected on demand.
pub(crate) struct Conn {
    endpoint: Arc<Endpoint>,
    stream: Option<Stream>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    pub(crate) parser: ResponseParser,
    /// Connections opened, and those the server closed (an error, a `Connection: close`, or EOF).
    pub(crate) connects: u64,
    pub(crate) server_closes: u64,
    /// Idle connections found closed by the server before reuse (then reopened; not failures).
    pub(crate) idle_closes: u64,
    /// Server requests and notifications seen on SSE replies before the reply itself.
    pub(crate) sse_other_messages: u64,
    last_used: Option<Instant>,
    /// The connection the last exchange opened, if it opened one ([`Conn::take_opening`]).
    opening: Option<Opening>,
}

impl Conn {
    pub(crate) fn new(endpoint: Arc<Endpoint>) -> Self {
        Conn {
            endpoint,
            stream: None,
            // made at the first exchange: a connection made long before its first request (an
            // agent resting before its first session) holds no buffer
            buf: Vec::new(),
            start: 0,
            end: 0,
            parser: ResponseParser::new(),
            connects: 0,
            server_closes: 0,
            idle_closes: 0,
            sse_other_messages: 0,
            last_used: None,
            opening: None,
        }
    }

    /// Largest reply body accepted on this connection.
    pub(crate) fn set_max_body(&mut self, max: usize) {
        self.parser.max_body = max;
    }

    /// Give the read buffer and the last reply's body back while the connection sits idle (an
    /// agent thinking for seconds keeps its connection, not 4 KiB of buffer); the next exchange
    /// makes them again.
    pub(crate) fn shrink(&mut self) {
        if self.start == self.end {
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
        }
        self.parser.body = Vec::new();
    }

    pub(crate) fn close(&mut self) {
        self.stream = None;
        self.start = 0;
        self.end = 0;
        self.last_used = None;
    }

    /// How the connection made by the last exchange was opened (taken once).
    pub(crate) fn take_opening(&mut self) -> Option<Opening> {
        self.opening.take()
    }

    /// Servers close idle keep-alive connections (uvicorn after 5 s). Before reusing one that
    /// sat idle, look for the close (or for anything unasked-for, such as a 408) and reconnect
    /// instead of losing the request to it. Costs nothing on a busy connection.
    fn drop_if_closed_while_idle(&mut self, now: Instant) {
        let Some(stream) = &mut self.stream else {
            return;
        };
        if self
            .last_used
            .is_none_or(|t| now.saturating_duration_since(t) <= IDLE_CHECK)
            || self.end >= self.buf.len()
        {
            return;
        }
        if stream.closed_while_idle(&mut self.buf[self.end..]) {
            self.idle_closes += 1;
            self.close();
        }
    }

    /// Open a new connection to the endpoint's next address (TLS over it for `https`); how it
    /// went is kept for [`Conn::take_opening`].
    pub(crate) async fn connect(&mut self) -> Result<(), ExchangeError> {
        self.close();
        let began = Instant::now();
        let tcp = tcp_connect(&self.endpoint)
            .await
            .and_then(|s| s.set_nodelay(true).map(|()| s));
        let connected = Instant::now();
        let tcp = match tcp {
            Ok(s) => s,
            Err(e) => {
                let e = ExchangeError::Connect(e);
                self.opening = Some(Opening {
                    began,
                    connected,
                    connect_failure: Some(e.kind()),
                    tls: None,
                });
                return Err(e);
            }
        };
        let stream = match self.endpoint.tls() {
            None => {
                self.opening = Some(Opening {
                    began,
                    connected,
                    connect_failure: None,
                    tls: None,
                });
                Stream::Plain(tcp)
            }
            Some((connector, name)) => {
                let r = connector.connect(name.clone(), tcp).await;
                let secured = Instant::now();
                match r {
                    Ok(s) => {
                        self.opening = Some(Opening {
                            began,
                            connected,
                            connect_failure: None,
                            tls: Some((secured, None)),
                        });
                        Stream::Tls(Box::new(s))
                    }
                    Err(e) => {
                        let e = ExchangeError::Tls(e);
                        self.opening = Some(Opening {
                            began,
                            connected,
                            connect_failure: None,
                            tls: Some((secured, Some(e.kind()))),
                        });
                        return Err(e);
                    }
                }
            }
        };
        self.stream = Some(stream);
        self.connects += 1;
        Ok(())
    }

    /// Send `request` (a whole HTTP request) and read the response into `self.parser`,
    /// within `timeout`. On any error the connection is dropped; the next exchange reconnects.
    pub(crate) async fn exchange(
        &mut self,
        request: &[u8],
        capture_session: bool,
        timeout: Duration,
    ) -> Result<(), ExchangeError> {
        self.exchange_observed(request, capture_session, timeout, &mut |_| {})
            .await
    }

    /// [`Conn::exchange`], handing each piece of the body to `observe` as it arrives (for
    /// streaming replies: event arrival times).
    pub(crate) async fn exchange_observed(
        &mut self,
        request: &[u8],
        capture_session: bool,
        timeout: Duration,
        observe: &mut dyn FnMut(&[u8]),
    ) -> Result<(), ExchangeError> {
        self.exchange_with(
            request,
            capture_session,
            Some(timeout),
            true,
            &mut |_, chunk| {
                observe(chunk);
            },
        )
        .await
    }

    /// Send `request` and read a response that may last as long as its reader wants (a held
    /// SSE stream): no timeout, and each piece of a 200 body goes to `observe`, with the parsed
    /// head, and is not kept (a refusal's body is, for its sample). `observe` also gets an empty
    /// piece once, as soon as the head is read (the stream is open). Dropping the future leaves
    /// the connection mid-response: close it before reusing it.
    pub(crate) async fn stream(
        &mut self,
        request: &[u8],
        observe: &mut dyn FnMut(&ResponseParser, &[u8]),
    ) -> Result<(), ExchangeError> {
        self.exchange_with(request, false, None, false, observe)
            .await
    }

    async fn exchange_with(
        &mut self,
        request: &[u8],
        capture_session: bool,
        timeout: Option<Duration>,
        keep_body: bool,
        observe: &mut dyn FnMut(&ResponseParser, &[u8]),
    ) -> Result<(), ExchangeError> {
        // one clock read for the idle check and the deadline
        let now = Instant::now();
        self.opening = None;
        if self.buf.is_empty() {
            self.buf = vec![0; READ_BUFFER];
        }
        let inner = self.exchange_inner(now, request, capture_session, keep_body, observe);
        let r = match timeout {
            Some(timeout) => {
                tokio::time::timeout_at(tokio::time::Instant::from_std(now + timeout), inner)
                    .await
                    .unwrap_or(Err(ExchangeError::Timeout))
            }
            None => inner.await,
        };
        match r {
            Ok(()) => {
                if self.parser.keep_alive {
                    self.last_used = Some(Instant::now());
                } else {
                    self.server_closes += 1;
                    self.close();
                }
                Ok(())
            }
            Err(e) => {
                if matches!(
                    e,
                    ExchangeError::Http(HttpError::Closed { .. }) | ExchangeError::Io(_)
                ) {
                    self.server_closes += 1;
                }
                self.close();
                Err(e)
            }
        }
    }

    async fn exchange_inner(
        &mut self,
        now: Instant,
        request: &[u8],
        capture_session: bool,
        keep_body: bool,
        observe: &mut dyn FnMut(&ResponseParser, &[u8]),
    ) -> Result<(), ExchangeError> {
        self.drop_if_closed_while_idle(now);
        if self.stream.is_none() {
            self.connect().await?;
        }
        self.parser.reset(capture_session);
        let Some(stream) = self.stream.as_mut() else {
            return Err(ExchangeError::Io(io::ErrorKind::NotConnected.into()));
        };
        stream.write_all(request).await.map_err(ExchangeError::Io)?;
        let mut head_seen = false;
        loop {
            if self.start < self.end {
                let before = self.parser.body.len();
                let fed = self
                    .parser
                    .feed(&self.buf[self.start..self.end])
                    .map_err(ExchangeError::Http)?;
                if !keep_body && !head_seen && self.parser.status != 0 {
                    head_seen = true;
                    observe(&self.parser, &[]);
                }
                if self.parser.body.len() > before {
                    observe(&self.parser, &self.parser.body[before..]);
                    if !keep_body && self.parser.status == 200 {
                        self.parser.body.clear();
                    }
                }
                self.start += fed.consumed;
                if fed.done {
                    if self.start < self.end {
                        // one request, one response: anything more is the server's mistake
                        return Err(ExchangeError::Http(HttpError::ExtraBytes));
                    }
                    self.start = 0;
                    self.end = 0;
                    return Ok(());
                }
            }
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.end == self.buf.len() {
                if self.start > 0 {
                    self.buf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                } else {
                    // a head or chunk line longer than the buffer; the parser bounds it
                    let len = self.buf.len() * 2;
                    self.buf.resize(len, 0);
                }
            }
            let n = stream
                .read(&mut self.buf[self.end..])
                .await
                .map_err(ExchangeError::Io)?;
            if n == 0 {
                self.parser.eof().map_err(ExchangeError::Http)?;
                self.parser.keep_alive = false;
                return Ok(());
            }
            self.end += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `data` split at the given cut points, as a connection would; then EOF if `eof`.
    fn run(data: &[u8], cuts: &[usize], eof: bool) -> Result<(ResponseParser, usize), HttpError> {
        let mut p = ResponseParser::new();
        p.reset(true);
        let mut pending: Vec<u8> = Vec::new();
        let mut last = 0;
        let mut points = cuts.to_vec();
        points.push(data.len());
        for &cut in &points {
            pending.extend_from_slice(&data[last..cut]);
            last = cut;
            let fed = p.feed(&pending)?;
            pending.drain(..fed.consumed);
            if fed.done {
                return Ok((p, pending.len() + data.len() - last));
            }
        }
        if eof {
            p.eof()?;
            return Ok((p, pending.len()));
        }
        Err(HttpError::Closed { started: true })
    }

    const LENGTH: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: abc-123\r\ncontent-length: 36\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";

    #[test]
    fn content_length_in_one_piece() {
        let (p, left) = run(LENGTH, &[], false).expect("parsed");
        assert_eq!(p.status, 200);
        assert_eq!(p.content_type, ContentType::Json);
        assert_eq!(p.session_id.as_deref(), Some("abc-123"));
        assert!(p.keep_alive);
        assert_eq!(p.body, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(left, 0);
    }

    #[test]
    fn content_length_split_everywhere() {
        for cut in 1..LENGTH.len() {
            let (p, _) = run(LENGTH, &[cut], false).expect("parsed");
            assert_eq!(
                p.body, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
                "cut at {cut}"
            );
        }
        let every: Vec<usize> = (1..LENGTH.len()).collect();
        let (p, _) = run(LENGTH, &every, false).expect("parsed byte by byte");
        assert_eq!(p.body.len(), 36);
    }

    #[test]
    fn next_response_bytes_are_left_alone() {
        let mut two = LENGTH.to_vec();
        two.extend_from_slice(LENGTH);
        let mut p = ResponseParser::new();
        let fed = p.feed(&two).expect("parsed");
        assert!(fed.done);
        assert_eq!(fed.consumed, LENGTH.len());
    }

    const SSE_BODY: &[u8] = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n";

    fn chunked_response() -> Vec<u8> {
        let mut r = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        // three chunks of uneven sizes, one with an extension, then trailers
        let (a, rest) = SSE_BODY.split_at(7);
        let (b, c) = rest.split_at(60);
        r.extend_from_slice(format!("{:x}\r\n", a.len()).as_bytes());
        r.extend_from_slice(a);
        r.extend_from_slice(format!("\r\n{:X};name=value\r\n", b.len()).as_bytes());
        r.extend_from_slice(b);
        r.extend_from_slice(format!("\r\n{:x}\r\n", c.len()).as_bytes());
        r.extend_from_slice(c);
        r.extend_from_slice(b"\r\n0\r\nX-Trailer: yes\r\n\r\n");
        r
    }

    #[test]
    fn chunked_split_at_every_point_and_pair_of_points() {
        let data = chunked_response();
        let (p, left) = run(&data, &[], false).expect("parsed");
        assert_eq!(p.body, SSE_BODY);
        assert_eq!(p.content_type, ContentType::EventStream);
        assert_eq!(left, 0);
        for i in 1..data.len() {
            let (p, _) = run(&data, &[i], false).expect("parsed");
            assert_eq!(p.body, SSE_BODY, "cut at {i}");
            for j in (i + 1..data.len()).step_by(7) {
                let (p, _) = run(&data, &[i, j], false).expect("parsed");
                assert_eq!(p.body, SSE_BODY, "cuts at {i}, {j}");
            }
        }
        let every: Vec<usize> = (1..data.len()).collect();
        let (p, _) = run(&data, &every, false).expect("parsed byte by byte");
        assert_eq!(p.body, SSE_BODY);
    }

    #[test]
    fn chunked_with_bare_lf_lines() {
        let data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n";
        let (p, _) = run(data, &[], false).expect("parsed");
        assert_eq!(p.body, b"abc");
    }

    #[test]
    fn bad_chunks_are_errors() {
        let data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n";
        assert_eq!(run(data, &[], false).err(), Some(HttpError::BadChunk));
        let data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n";
        assert_eq!(run(data, &[], false).err(), Some(HttpError::BadChunk));
    }

    #[test]
    fn interim_responses_are_skipped() {
        let data =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        for cut in 0..data.len() {
            let (p, _) = run(data, &[cut], false).expect("parsed");
            assert_eq!(p.status, 202);
            assert!(p.body.is_empty());
        }
    }

    #[test]
    fn no_body_statuses() {
        let data = b"HTTP/1.1 204 No Content\r\n\r\n";
        let (p, _) = run(data, &[], false).expect("parsed");
        assert_eq!(p.status, 204);
        assert!(p.keep_alive);
        // 202 without Content-Length would be close-delimited; with 0 it is empty
        let data = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        let (p, _) = run(data, &[], false).expect("parsed");
        assert_eq!(p.status, 202);
    }

    #[test]
    fn close_delimited_body() {
        let data = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"a\":1}";
        let (p, _) = run(data, &[20, 52], true).expect("parsed");
        assert_eq!(p.body, b"{\"a\":1}");
        assert!(!p.keep_alive);
        // without EOF it never completes
        assert!(run(data, &[], false).is_err());
    }

    #[test]
    fn connection_close_and_http10() {
        let data = b"HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 2\r\n\r\n{}";
        assert!(!run(data, &[], false).expect("parsed").0.keep_alive);
        let data = b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert!(!run(data, &[], false).expect("parsed").0.keep_alive);
        let data = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\ncontent-length: 2\r\n\r\n{}";
        assert!(run(data, &[], false).expect("parsed").0.keep_alive);
    }

    #[test]
    fn eof_cases() {
        let mut p = ResponseParser::new();
        assert_eq!(p.eof(), Err(HttpError::Closed { started: false }));
        let mut p = ResponseParser::new();
        let fed = p
            .feed(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{}")
            .expect("fed");
        assert!(!fed.done);
        assert_eq!(p.eof(), Err(HttpError::Closed { started: true }));
    }

    #[test]
    fn session_id_checks() {
        let data = b"HTTP/1.1 200 OK\r\nMcp-Session-Id: bad id\r\ncontent-length: 0\r\n\r\n";
        let (p, _) = run(data, &[], false).expect("parsed");
        assert!(p.session_id_invalid);
        let data = b"HTTP/1.1 200 OK\r\nMcp-Session-Id: a\r\nmcp-session-id: b\r\ncontent-length: 0\r\n\r\n";
        let (p, _) = run(data, &[], false).expect("parsed");
        assert!(p.session_id_invalid);
        let mut p = ResponseParser::new();
        p.reset(false);
        p.feed(b"HTTP/1.1 200 OK\r\nMcp-Session-Id: a\r\ncontent-length: 0\r\n\r\n")
            .expect("fed");
        assert_eq!(p.session_id, None);
    }

    #[test]
    fn header_errors() {
        assert!(matches!(
            run(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n", &[], false),
            Err(HttpError::BadContentLength)
        ));
        assert!(matches!(
            run(b"garbage\r\n\r\n", &[], false),
            Err(HttpError::Head(_))
        ));
    }
}
