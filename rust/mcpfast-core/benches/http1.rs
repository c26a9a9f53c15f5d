//! `cargo bench -p mcpfast-core --bench http1`: the strict head parser (`http1::parse_request`,
//! on httparse) against the hand-written fast-path parser it replaced (kept here, as it was, as
//! the baseline), on the heads MCP clients send. Both run in the same process, one after the
//! other: the ratio is what counts.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcpfast_core::http1::{parse_request, Parse, DEFAULT_MAX_HEAD};

/// The replaced parser (the one mcpfast used before the strict parser), verbatim but for the module wrapper.
#[allow(dead_code, clippy::all)]
mod baseline {
    #[derive(Debug, PartialEq, Eq)]
    pub struct Head<'a> {
        pub method: &'a [u8],
        pub target: &'a [u8],
        pub headers: Vec<(&'a [u8], &'a [u8])>,
        pub head_len: usize,
        pub content_length: usize,
        pub keep_alive: bool,
    }

    #[derive(Debug, PartialEq, Eq)]
    pub enum Parse<'a> {
        Head(Head<'a>),
        Partial,
        Fallback,
    }

    #[inline]
    fn is_tchar(b: u8) -> bool {
        matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        ) || b.is_ascii_alphanumeric()
    }

    #[inline]
    fn is_value_byte(b: u8) -> bool {
        b == b'\t' || (b >= 0x20 && b != 0x7f)
    }

    fn trim_ows(mut v: &[u8]) -> &[u8] {
        while let [b' ' | b'\t', rest @ ..] = v {
            v = rest;
        }
        while let [rest @ .., b' ' | b'\t'] = v {
            v = rest;
        }
        v
    }

    fn find_head_end(buf: &[u8], max_head: usize) -> Option<usize> {
        let limit = buf.len().min(max_head);
        let mut i = 0;
        while i + 3 < limit {
            match buf[i + 3] {
                b'\n' => {
                    if buf[i] == b'\r' && buf[i + 1] == b'\n' && buf[i + 2] == b'\r' {
                        return Some(i + 4);
                    }
                    i += 1;
                }
                b'\r' => i += 1,
                _ => i += 4,
            }
        }
        None
    }

    /// Parse the head at the start of `buf` (see the module doc). `max_head`: heads longer than
    /// this fall back (the full parser applies its own limit and answers 431).
    pub fn parse_request(buf: &[u8], max_head: usize) -> Parse<'_> {
        let Some(head_len) = find_head_end(buf, max_head) else {
            return if buf.len() >= max_head {
                Parse::Fallback
            } else {
                Parse::Partial
            };
        };
        let head = &buf[..head_len - 2]; // every line keeps its CRLF; the blank line is dropped
        let mut lines = head[..head.len() - 1].split(|&b| b == b'\n');
        let Some(first) = lines.next() else {
            return Parse::Fallback;
        };
        let Some(first) = first.strip_suffix(b"\r") else {
            return Parse::Fallback;
        };
        let mut parts = first.splitn(3, |&b| b == b' ');
        let (Some(method), Some(target), Some(version)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Parse::Fallback;
        };
        if version != b"HTTP/1.1" || method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
            return Parse::Fallback;
        }
        if target.is_empty() || !target.iter().all(|&b| b > 0x20 && b < 0x7f) {
            return Parse::Fallback;
        }
        let mut headers = Vec::with_capacity(12);
        let mut content_length: Option<usize> = None;
        let mut keep_alive = true;
        for line in lines {
            let Some(line) = line.strip_suffix(b"\r") else {
                return Parse::Fallback;
            };
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                return Parse::Fallback;
            };
            let name = &line[..colon];
            if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
                return Parse::Fallback; // also catches obs-fold (a line starting with SP/HTAB)
            }
            let raw = &line[colon + 1..];
            if !raw.iter().all(|&b| is_value_byte(b)) {
                return Parse::Fallback;
            }
            let value = trim_ows(raw);
            match name.len() {
                14 if name.eq_ignore_ascii_case(b"content-length") => {
                    if content_length.is_some()
                        || value.is_empty()
                        || value.len() > 15
                        || !value.iter().all(u8::is_ascii_digit)
                    {
                        return Parse::Fallback;
                    }
                    content_length = Some(
                        value
                            .iter()
                            .fold(0usize, |n, &d| n * 10 + (d - b'0') as usize),
                    );
                }
                17 if name.eq_ignore_ascii_case(b"transfer-encoding") => return Parse::Fallback,
                6 if name.eq_ignore_ascii_case(b"expect") => return Parse::Fallback,
                7 if name.eq_ignore_ascii_case(b"upgrade") => return Parse::Fallback,
                10 if name.eq_ignore_ascii_case(b"connection") => {
                    if value.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if !value.eq_ignore_ascii_case(b"keep-alive") {
                        return Parse::Fallback;
                    }
                }
                _ => {}
            }
            headers.push((name, value));
        }
        Parse::Head(Head {
            method,
            target,
            headers,
            head_len,
            content_length: content_length.unwrap_or(0),
            keep_alive,
        })
    }
}

const CALL: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: 6f1c2d0e9a8b4c7d9e0f1a2b3c4d5e6f\r\nMCP-Protocol-Version: 2025-11-25\r\nUser-Agent: mcpfast-load/0.1\r\nContent-Length: 120\r\n\r\n";

fn browser_like() -> Vec<u8> {
    let mut head = b"POST /mcp?trace=1 HTTP/1.1\r\nHost: localhost:8000\r\n".to_vec();
    for (name, value) in [
        ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"),
        ("Accept", "application/json, text/event-stream"),
        ("Accept-Language", "en-US,en;q=0.9"),
        ("Accept-Encoding", "gzip, deflate, br"),
        ("Content-Type", "application/json"),
        ("Origin", "http://localhost:5173"),
        ("Referer", "http://localhost:5173/inspector"),
        ("Authorization", "Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0ZXN0LXVzZXIiLCJhdWQiOiJodHRwOi8vMTI3LjAuMC4xOjgwMDAvbWNwIn0.c2lnbmF0dXJl"),
        ("Mcp-Session-Id", "6f1c2d0e9a8b4c7d9e0f1a2b3c4d5e6f"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Cache-Control", "no-cache"),
        ("Connection", "keep-alive"),
        ("Sec-Fetch-Mode", "cors"),
        ("Content-Length", "120"),
    ] {
        head.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

fn bench(c: &mut Criterion) {
    let browser = browser_like();
    for (label, head) in [
        ("mcp client head (8 fields)", CALL),
        ("browser-like head (15 fields)", browser.as_slice()),
    ] {
        assert!(matches!(
            parse_request(head, DEFAULT_MAX_HEAD, 1 << 22),
            Parse::Head(_)
        ));
        assert!(matches!(
            baseline::parse_request(head, DEFAULT_MAX_HEAD),
            baseline::Parse::Head(_)
        ));
        let mut g = c.benchmark_group(label);
        g.throughput(Throughput::Bytes(head.len() as u64));
        g.bench_function("baseline (hand-written, replaced)", |b| {
            b.iter(|| {
                matches!(
                    baseline::parse_request(black_box(head), DEFAULT_MAX_HEAD),
                    baseline::Parse::Head(_)
                )
            })
        });
        g.bench_function("strict (httparse)", |b| {
            b.iter(|| {
                matches!(
                    parse_request(black_box(head), DEFAULT_MAX_HEAD, 1 << 22),
                    Parse::Head(_)
                )
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
