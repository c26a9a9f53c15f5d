//! HTTP/1.1 request framing for the server's fast path.
//!
//! `parse_request` reads one request head from the start of a buffer and says how long the
//! whole request (head + `Content-Length` body) is. It accepts a strict, common subset:
//! `HTTP/1.1`, token method, a target of visible ASCII, header names that are tokens, values
//! without control characters, at most one `Content-Length`, and no `Transfer-Encoding`,
//! `Expect`, `Upgrade` or `Connection` other than `keep-alive`/`close`. Anything else is
//! [`Parse::Fallback`]: the caller hands the bytes to a complete HTTP parser (which also gives
//! the precise error), so the fast path never has to be right about the rare cases.

/// One parsed request head; slices point into the caller's buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Head<'a> {
    pub method: &'a [u8],
    pub target: &'a [u8],
    /// `(name, value)`, names as sent (the binding lower-cases them), values without OWS.
    pub headers: Vec<(&'a [u8], &'a [u8])>,
    /// Bytes of the head, including the blank line.
    pub head_len: usize,
    pub content_length: usize,
    /// False when the client sent `Connection: close`.
    pub keep_alive: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parse<'a> {
    /// A head (the body may still be incomplete: `head_len + content_length` is the whole).
    Head(Head<'a>),
    /// Not enough bytes for a head yet.
    Partial,
    /// Outside the fast subset (or malformed): use the full parser from here on.
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
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn head(buf: &[u8]) -> Head<'_> {
        match parse_request(buf, 65536) {
            Parse::Head(h) => h,
            other => panic!("expected a head, got {other:?}"),
        }
    }

    #[test]
    fn post_with_body() {
        let req = b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type:  application/json \r\nContent-Length: 2\r\n\r\n{}";
        let h = head(req);
        assert_eq!(h.method, b"POST");
        assert_eq!(h.target, b"/mcp?x=1");
        assert_eq!(h.content_length, 2);
        assert_eq!(h.head_len + h.content_length, req.len());
        assert_eq!(
            h.headers[1],
            (&b"Content-Type"[..], &b"application/json"[..])
        );
        assert!(h.keep_alive);
    }

    #[test]
    fn partial_and_fallbacks() {
        assert_eq!(
            parse_request(b"POST /mcp HTTP/1.1\r\nHost: a\r\n", 65536),
            Parse::Partial
        );
        assert_eq!(parse_request(b"", 65536), Parse::Partial);
        for bad in [
            &b"GET / HTTP/1.0\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            b"GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
            b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
            b"GET / HTTP/1.1\r\nBad Name: b\r\n\r\n",
            b"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",
            b"GET /a b HTTP/1.1\r\n\r\n",
            b"G(T / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\nA: b\r\n\r\n",
        ] {
            assert_eq!(
                parse_request(bad, 65536),
                Parse::Fallback,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // A head longer than the limit falls back (the full parser answers 431).
        let long = [b"GET / HTTP/1.1\r\nA: ".as_slice(), &[b'x'; 100]].concat();
        assert_eq!(parse_request(&long, 64), Parse::Fallback);
    }

    #[test]
    fn connection_close_and_no_body() {
        let h = head(b"DELETE /mcp HTTP/1.1\r\nConnection: close\r\n\r\nGET");
        assert!(!h.keep_alive);
        assert_eq!(h.content_length, 0);
        assert_eq!(h.head_len, 43);
    }

    #[test]
    fn every_split_point_is_partial_until_complete() {
        let req = b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}";
        let end = req.len() - 2;
        for cut in 0..end {
            assert_eq!(
                parse_request(&req[..cut], 65536),
                Parse::Partial,
                "cut {cut}"
            );
        }
        assert!(matches!(parse_request(&req[..end], 65536), Parse::Head(_)));
    }
}
