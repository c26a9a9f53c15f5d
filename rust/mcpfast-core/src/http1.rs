//! HTTP/1.1 request framing for the server: the one parser that judges a connection's bytes.
//!
//! `parse_request` reads one request head from the start of a buffer with the `httparse` crate
//! (the strict, incremental parser hyper uses): a byte that cannot belong to a request line or
//! a header field is refused as soon as it arrives, not once a blank line shows up. On top of
//! it come the message-framing rules of RFC 9112 (§6): at most one `Content-Length`, digits
//! only; `Transfer-Encoding` only as `chunked`, never with `Content-Length`, never in HTTP/1.0;
//! the head limit while the head is still arriving. `Upgrade` is not acted on (the request is
//! answered as a request), `Expect: 100-continue` is reported to the caller. Every refusal is
//! an HTTP status and a reason; after one the caller answers once and closes.
//!
//! Bare LF line ends are accepted in the head and in chunk lines (RFC 9112 §2.2 allows a
//! recipient to); a CR not followed by LF is refused.

/// Header fields per head (or per trailer section) at most; more is 431.
pub const MAX_HEADERS: usize = 128;
/// The default head limit in bytes (request line + header fields + blank line).
pub const DEFAULT_MAX_HEAD: usize = 64 * 1024;

/// A request refused: answer `status` with `reason`, then close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: &'static str,
}

const fn refuse(status: u16, reason: &'static str) -> Refusal {
    Refusal { status, reason }
}

/// How the body after the head is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `Content-Length` (0 when absent).
    Length(usize),
    /// `Transfer-Encoding: chunked`: decode with [`decode_chunked`].
    Chunked,
}

/// One parsed request head; slices point into the caller's buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Head<'a> {
    pub method: &'a [u8],
    pub target: &'a [u8],
    /// `(name, value)`, names as sent (the binding lower-cases them), values without OWS.
    pub headers: Vec<(&'a [u8], &'a [u8])>,
    /// Bytes of the head, including the blank line (and any empty lines before the request line).
    pub head_len: usize,
    pub body: Body,
    /// False for `Connection: close`, and for HTTP/1.0 without `Connection: keep-alive`.
    pub keep_alive: bool,
    /// The client sent `Expect: 100-continue`.
    pub expect_continue: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parse<'a> {
    /// A head (the body may still be incomplete).
    Head(Head<'a>),
    /// Every byte so far can begin a request: wait for more.
    Partial,
    /// Not a request this server serves: answer and close.
    Refused(Refusal),
}

fn head_too_large(buf: &[u8]) -> Refusal {
    if memchr::memchr(b'\n', buf).is_none() {
        refuse(414, "request line too long")
    } else {
        refuse(431, "request head too large")
    }
}

fn bad_framing(err: httparse::Error) -> Refusal {
    match err {
        httparse::Error::Version => refuse(400, "not an HTTP/1.x request line (no valid version)"),
        httparse::Error::Token => refuse(400, "invalid request line"),
        httparse::Error::HeaderName => refuse(400, "invalid header field name"),
        httparse::Error::HeaderValue => refuse(400, "invalid header field value"),
        httparse::Error::NewLine => refuse(400, "invalid line ending"),
        httparse::Error::TooManyHeaders => refuse(431, "too many header fields"),
        httparse::Error::Status => refuse(400, "invalid request"),
    }
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

/// Parse the head at the start of `buf` (see the module doc). `max_head` bounds the head even
/// while it arrives; `max_body` bounds a declared `Content-Length` (413 above).
pub fn parse_request(buf: &[u8], max_head: usize, max_body: usize) -> Parse<'_> {
    // Uninitialised: zeroing 128 slots for the few headers a request carries costs more than
    // the parse itself.
    let mut slots =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let head_len = match req.parse_with_uninit_headers(buf, &mut slots) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > max_head {
                Parse::Refused(head_too_large(&buf[..max_head]))
            } else {
                Parse::Partial
            };
        }
        Err(err) => return Parse::Refused(bad_framing(err)),
    };
    if head_len > max_head {
        return Parse::Refused(head_too_large(&buf[..max_head]));
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Parse::Refused(refuse(400, "invalid request line"));
    };
    // httparse lets UTF-8 through in the target; RFC 9112 targets are ASCII.
    if !target.bytes().all(|b| b > 0x20 && b < 0x7f) {
        return Parse::Refused(refuse(400, "invalid request target"));
    }
    let http10 = version == 0;
    let mut headers = Vec::with_capacity(req.headers.len());
    let mut content_length: Option<usize> = None;
    // Transfer-Encoding, over every field of it (RFC 9112 §6.1: one list): whether any was
    // sent, how often `chunked` appears, whether it is the final coding, and any other coding.
    let mut transfer_encoding = false;
    let mut te_chunked = 0usize;
    let mut te_final_chunked = false;
    let mut te_other = false;
    let mut keep_alive = !http10;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let value = trim_ows(h.value);
        match name.len() {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                if content_length.is_some() {
                    return Parse::Refused(refuse(400, "more than one Content-Length"));
                }
                if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
                    return Parse::Refused(refuse(400, "invalid Content-Length"));
                }
                if value.len() > 15 {
                    return Parse::Refused(refuse(413, "request body too large"));
                }
                content_length = Some(
                    value
                        .iter()
                        .fold(0usize, |n, &d| n * 10 + (d - b'0') as usize),
                );
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                transfer_encoding = true;
                for coding in value.split(|&b| b == b',') {
                    let coding = trim_ows(coding);
                    if coding.is_empty() {
                        continue; // empty list elements do not count (RFC 9110 §5.6.1)
                    }
                    te_final_chunked = coding.eq_ignore_ascii_case(b"chunked");
                    if te_final_chunked {
                        te_chunked += 1;
                    } else {
                        te_other = true;
                    }
                }
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in value.split(|&b| b == b',') {
                    let token = trim_ows(token);
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                        keep_alive = true;
                    }
                }
            }
            6 if name.eq_ignore_ascii_case(b"expect") => {
                if !value.eq_ignore_ascii_case(b"100-continue") {
                    return Parse::Refused(refuse(417, "unsupported expectation"));
                }
                expect_continue = true;
            }
            _ => {}
        }
        headers.push((name, value));
    }
    if transfer_encoding && http10 {
        return Parse::Refused(refuse(400, "Transfer-Encoding in an HTTP/1.0 request"));
    }
    if transfer_encoding && content_length.is_some() {
        return Parse::Refused(refuse(400, "both Content-Length and Transfer-Encoding"));
    }
    if transfer_encoding && (!te_final_chunked || te_chunked > 1) {
        // The body's length cannot be known (RFC 9112 §6.3): 400, and the connection closes.
        return Parse::Refused(refuse(
            400,
            "chunked must be the final transfer coding, once",
        ));
    }
    if te_other {
        // `gzip, chunked`: framed, but with a coding this server does not decode (§6.1).
        return Parse::Refused(refuse(501, "unsupported transfer coding"));
    }
    let chunked = transfer_encoding;
    let length = content_length.unwrap_or(0);
    if length > max_body {
        return Parse::Refused(refuse(413, "request body too large"));
    }
    Parse::Head(Head {
        method: method.as_bytes(),
        target: target.as_bytes(),
        headers,
        head_len,
        body: if chunked {
            Body::Chunked
        } else {
            Body::Length(length)
        },
        keep_alive,
        expect_continue,
    })
}

/// A chunked body decoded from the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunked {
    /// The body and the encoded length (last chunk and trailer section included).
    Complete {
        body: Vec<u8>,
        len: usize,
    },
    Partial,
    Refused(Refusal),
}

/// The end of the line starting at `at`: `(content end, next line start)`; `None`: not yet.
fn line_end(buf: &[u8], at: usize) -> Option<Result<(usize, usize), Refusal>> {
    let nl = at + memchr::memchr(b'\n', &buf[at..])?;
    let end = if nl > at && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    if buf[at..end].contains(&b'\r') {
        return Some(Err(refuse(400, "invalid line ending in a chunked body")));
    }
    Some(Ok((end, nl + 1)))
}

/// Decode `Transfer-Encoding: chunked` (RFC 9112 §7.1): chunk sizes of 1 to 16 hex digits,
/// extensions skipped, trailer fields parsed and dropped. `max_body` bounds the decoded
/// body (413); `max_overhead` bounds the framing bytes around it (chunk lines, trailers).
pub fn decode_chunked(buf: &[u8], max_body: usize, max_overhead: usize) -> Chunked {
    let mut body = Vec::new();
    let mut at = 0usize;
    loop {
        if at - body.len() > max_overhead {
            return Chunked::Refused(refuse(431, "chunked framing too large"));
        }
        let (end, next) = match line_end(buf, at) {
            None => {
                return if buf.len() - at > max_overhead {
                    Chunked::Refused(refuse(431, "chunk line too long"))
                } else {
                    Chunked::Partial
                };
            }
            Some(Err(r)) => return Chunked::Refused(r),
            Some(Ok(span)) => span,
        };
        let line = &buf[at..end];
        let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        let rest = &line[digits..];
        let ext_ok = rest.is_empty()
            || (matches!(rest[0], b';' | b' ' | b'\t')
                && trim_ows(rest).first().is_none_or(|&b| b == b';')
                && rest.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f)));
        if digits == 0 || digits > 16 || !ext_ok {
            return Chunked::Refused(refuse(400, "invalid chunk size line"));
        }
        let size = line[..digits].iter().fold(0u64, |n, &d| {
            n * 16 + (d as char).to_digit(16).unwrap_or(0) as u64
        });
        if size > (max_body - body.len()) as u64 {
            return Chunked::Refused(refuse(413, "request body too large"));
        }
        let size = size as usize;
        at = next;
        if size == 0 {
            // Trailer section: header fields up to an empty line, dropped.
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            return match httparse::parse_headers(&buf[at..], &mut slots) {
                Ok(httparse::Status::Complete((n, _))) => Chunked::Complete { body, len: at + n },
                Ok(httparse::Status::Partial) => {
                    if buf.len() - at > max_overhead {
                        Chunked::Refused(refuse(431, "trailer section too large"))
                    } else {
                        Chunked::Partial
                    }
                }
                Err(err) => Chunked::Refused(bad_framing(err)),
            };
        }
        if buf.len() < at + size + 1 {
            return Chunked::Partial;
        }
        body.extend_from_slice(&buf[at..at + size]);
        at += size;
        match &buf[at..] {
            [b'\n', ..] => at += 1,
            [b'\r', b'\n', ..] => at += 2,
            [b'\r'] => return Chunked::Partial,
            _ => return Chunked::Refused(refuse(400, "chunk data not followed by a line end")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_BODY: usize = 4 * 1024 * 1024;

    fn head(buf: &[u8]) -> Head<'_> {
        match parse_request(buf, DEFAULT_MAX_HEAD, MAX_BODY) {
            Parse::Head(h) => h,
            other => panic!("expected a head, got {other:?}"),
        }
    }

    fn refused(buf: &[u8]) -> u16 {
        match parse_request(buf, DEFAULT_MAX_HEAD, MAX_BODY) {
            Parse::Refused(r) => r.status,
            other => panic!(
                "expected a refusal for {:?}, got {other:?}",
                String::from_utf8_lossy(buf)
            ),
        }
    }

    #[test]
    fn post_with_body() {
        let req = b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type:  application/json \r\nContent-Length: 2\r\n\r\n{}";
        let h = head(req);
        assert_eq!(h.method, b"POST");
        assert_eq!(h.target, b"/mcp?x=1");
        assert_eq!(h.body, Body::Length(2));
        assert_eq!(h.head_len + 2, req.len());
        assert_eq!(
            h.headers[1],
            (&b"Content-Type"[..], &b"application/json"[..])
        );
        assert!(h.keep_alive && !h.expect_continue);
    }

    #[test]
    fn refused_at_the_first_bad_byte() {
        // A TLS ClientHello, binary junk, a bad method: refused before any line end arrives.
        assert_eq!(
            refused(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
            400
        );
        assert_eq!(refused(b"\x00\x01\x02"), 400);
        assert_eq!(refused(b"G(T /"), 400);
        assert_eq!(refused(b"POST /mcp\r\nHost: a\r\n\r\n"), 400); // no version
        assert_eq!(refused(b"POST /mcp HTTP/2.0\r\n"), 400);
        assert_eq!(refused(b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), 400);
        assert_eq!(refused(b"GET / HTTP/1.1\r\nBad Name: b\r\n"), 400);
        assert_eq!(refused(b"GET / HTTP/1.1\r\nA: b\x01"), 400);
        assert_eq!(refused(b"GET / HTTP/1.1\rX"), 400);
        assert_eq!(refused(b"GET /\xc3\xa9 HTTP/1.1\r\n\r\n"), 400);
    }

    #[test]
    fn framing_rules() {
        assert_eq!(
            refused(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(
            refused(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
            400
        );
        assert_eq!(
            refused(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            501
        );
        // chunked not final, or twice: the length cannot be known (RFC 9112 §6.3)
        for te in [
            &b"gzip"[..],
            b"chunked, identity",
            b"chunked, chunked",
            b"",
            b"chunked\r\nTransfer-Encoding: chunked",
            b"chunked\r\nTransfer-Encoding: gzip",
        ] {
            let mut req = b"POST / HTTP/1.1\r\nTransfer-Encoding: ".to_vec();
            req.extend_from_slice(te);
            req.extend_from_slice(b"\r\n\r\n");
            assert_eq!(refused(&req), 400, "{}", String::from_utf8_lossy(te));
        }
        assert_eq!(
            refused(
                b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
            ),
            501
        );
        assert!(matches!(
            head(b"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked ,\r\n\r\n").body,
            Body::Chunked
        ));
        assert_eq!(
            refused(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
            400
        );
        assert_eq!(
            refused(b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n"),
            400
        );
        assert_eq!(
            refused(b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999\r\n\r\n"),
            413
        );
        assert_eq!(refused(b"POST / HTTP/1.1\r\nExpect: magic\r\n\r\n"), 417);
        let h =
            head(b"GET / HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n");
        assert!(h.keep_alive); // the upgrade is ignored: a plain request
        assert!(!head(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(head(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
        assert!(!head(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
        assert_eq!(
            head(b"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n").body,
            Body::Chunked
        );
        assert!(
            head(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n")
                .expect_continue
        );
        // Bare LF accepted throughout, leading empty lines skipped.
        let h = head(b"\r\nGET /a HTTP/1.1\nHost: x\n\n");
        assert_eq!((h.target, h.head_len), (&b"/a"[..], 27));
    }

    #[test]
    fn head_limit_holds_while_the_head_arrives() {
        let long_target = [b"GET /".as_slice(), &[b'a'; 100]].concat();
        assert_eq!(
            parse_request(&long_target, 64, 10),
            Parse::Refused(refuse(414, "request line too long"))
        );
        let long_field = [b"GET / HTTP/1.1\r\nA: ".as_slice(), &[b'x'; 100]].concat();
        assert_eq!(
            parse_request(&long_field, 64, 10),
            Parse::Refused(refuse(431, "request head too large"))
        );
        assert_eq!(parse_request(&long_field, 4096, 10), Parse::Partial);
        let many: Vec<u8> = [
            b"GET / HTTP/1.1\r\n".to_vec(),
            b"a: b\r\n".repeat(MAX_HEADERS + 1),
            b"\r\n".to_vec(),
        ]
        .concat();
        assert_eq!(refused(&many), 431);
    }

    #[test]
    fn every_split_point_is_partial_until_complete() {
        let req = b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}";
        let end = req.len() - 2;
        for cut in 0..end {
            assert_eq!(
                parse_request(&req[..cut], DEFAULT_MAX_HEAD, MAX_BODY),
                Parse::Partial,
                "cut {cut}"
            );
        }
        assert!(matches!(
            parse_request(&req[..end], DEFAULT_MAX_HEAD, MAX_BODY),
            Parse::Head(_)
        ));
    }

    #[test]
    fn chunked_bodies() {
        let enc = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Trailer: y\r\n\r\nNEXT";
        let whole = enc.len() - 4;
        assert_eq!(
            decode_chunked(enc, 100, 1000),
            Chunked::Complete {
                body: b"Wikipedia".to_vec(),
                len: whole
            }
        );
        for cut in 0..whole {
            assert_eq!(
                decode_chunked(&enc[..cut], 100, 1000),
                Chunked::Partial,
                "cut {cut}"
            );
        }
        assert_eq!(
            decode_chunked(b"4\nWiki\n0\n\n", 100, 1000),
            Chunked::Complete {
                body: b"Wiki".to_vec(),
                len: 10
            }
        );
        for bad in [
            &b"\r\n"[..],
            b"x\r\n",
            b"4\r\nWikiX",
            b"4 x\r\n",
            b"11111111111111111\r\n",
            b"4\rx\n",
        ] {
            assert!(
                matches!(decode_chunked(bad, 100, 1000), Chunked::Refused(r) if r.status == 400),
                "{bad:?}"
            );
        }
        assert!(
            matches!(decode_chunked(b"65\r\n", 100, 1000), Chunked::Refused(r) if r.status == 413)
        );
        assert!(
            matches!(decode_chunked(&b"1;".repeat(600), 100, 1000), Chunked::Refused(r) if r.status == 431)
        );
    }
}
