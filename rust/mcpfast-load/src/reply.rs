//! Checking JSON-RPC replies without building them.
//!
//! A reply is checked with one pass over its top-level members: string and nested values are
//! skipped structurally (quotes, escapes and brackets), so an `"id":5` inside the result can never
//! be taken for the reply's own id, and nothing is allocated. Server-sent-event bodies are split
//! into events as the SSE specification says (any of CRLF, LF, CR ends a line; `data:` lines are
//! joined with LF; an event is dispatched at a blank line; an unterminated last event is dropped).

use std::ops::Range;

use memchr::memchr2;

/// The `id` member of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Id {
    Absent,
    Null,
    Int(i64),
    /// A string, a fraction or an integer outside i64: never one of ours.
    Other,
}

/// What a top-level scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scanned {
    pub id: Id,
    /// `"jsonrpc":"2.0"` was present.
    pub jsonrpc: bool,
    /// The span of the `result` value, if any.
    pub result: Option<Range<usize>>,
    /// The span of the `error` value, if any.
    pub error: Option<Range<usize>>,
    /// A `method` member: a request or notification from the server, not a reply.
    pub method: bool,
}

/// The outcome of checking a reply body against the id we sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A result for our id. `result` is the span of the result value inside `payload`.
    Ok,
    /// A JSON-RPC error for our id (or with a null id); the code when it could be read.
    RpcError(Option<i64>),
    /// A reply for another id (and none for ours).
    IdMismatch,
    /// Valid JSON object without `"jsonrpc":"2.0"`, or neither result nor error.
    NotJsonRpc,
    /// Not a JSON object we could read.
    Malformed,
    /// An SSE stream that ended without any reply.
    NoReply,
    /// A JSON body holding a server request or notification instead of a reply.
    NotAReply,
}

impl Verdict {
    pub fn describe(self) -> String {
        match self {
            Verdict::Ok => "ok".into(),
            Verdict::RpcError(Some(code)) => format!("jsonrpc error {code}"),
            Verdict::RpcError(None) => "jsonrpc error (no code)".into(),
            Verdict::IdMismatch => "reply id mismatch".into(),
            Verdict::NotJsonRpc => "not a JSON-RPC 2.0 reply".into(),
            Verdict::Malformed => "malformed JSON".into(),
            Verdict::NoReply => "SSE stream ended without the reply".into(),
            Verdict::NotAReply => "JSON body is not a reply".into(),
        }
    }
}

/// A checked reply: the verdict and, for `Ok`, where the JSON message and its result are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub verdict: Verdict,
    /// Span of the matching JSON message inside the body (the SSE data may be copied into
    /// `scratch` when it spans several `data:` lines; then `in_scratch` is true).
    pub message: Range<usize>,
    pub result: Range<usize>,
    pub in_scratch: bool,
    /// Server requests and notifications seen before the reply (SSE only).
    pub other_messages: u32,
}

impl Checked {
    fn new(verdict: Verdict) -> Self {
        Checked {
            verdict,
            message: 0..0,
            result: 0..0,
            in_scratch: false,
            other_messages: 0,
        }
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

const MAX_DEPTH: u32 = 128;

impl<'a> Cursor<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// At a `"`: skip the string; returns the span of its raw content and whether it has escapes.
    #[inline]
    fn string(&mut self) -> Option<(Range<usize>, bool)> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.i;
        let mut escaped = false;
        loop {
            let off = memchr2(b'"', b'\\', &self.b[self.i..])?;
            let at = self.i + off;
            if self.b[at] == b'"' {
                self.i = at + 1;
                return Some((start..at, escaped));
            }
            escaped = true;
            // a backslash and the byte it escapes (the \uXXXX digits are plain bytes)
            if at + 1 >= self.b.len() {
                return None;
            }
            self.i = at + 2;
        }
    }

    /// Skip a scalar (number, true, false, null); returns its span.
    #[inline]
    fn scalar(&mut self) -> Option<Range<usize>> {
        let start = self.i;
        while let Some(&c) = self.b.get(self.i) {
            if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.') {
                self.i += 1;
            } else {
                break;
            }
        }
        let text = &self.b[start..self.i];
        let ok = match text.first() {
            None => false,
            Some(b't') => text == b"true",
            Some(b'f') => text == b"false",
            Some(b'n') => text == b"null",
            Some(c) => {
                (c.is_ascii_digit() || *c == b'-')
                    && text
                        .iter()
                        .all(|c| c.is_ascii_digit() || b"-+.eE".contains(c))
            }
        };
        ok.then_some(start..self.i)
    }

    /// Skip an object or array (at its opening bracket), matching bracket kinds.
    fn nested(&mut self) -> Option<()> {
        // one bit per open level: 1 = object, 0 = array
        let mut stack: u128 = 0;
        let mut depth: u32 = 0;
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'"' => {
                    self.string()?;
                }
                b'{' | b'[' => {
                    if depth >= MAX_DEPTH {
                        return None;
                    }
                    stack = (stack << 1) | u128::from(c == b'{');
                    depth += 1;
                    self.i += 1;
                }
                b'}' | b']' => {
                    if depth == 0 || (stack & 1 == 1) != (c == b'}') {
                        return None;
                    }
                    stack >>= 1;
                    depth -= 1;
                    self.i += 1;
                    if depth == 0 {
                        return Some(());
                    }
                }
                _ => self.i += 1,
            }
        }
        None
    }

    /// Skip any value; returns its span.
    #[inline]
    fn value(&mut self) -> Option<Range<usize>> {
        let start = self.i;
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => self.nested()?,
            _ => {
                self.scalar()?;
            }
        }
        Some(start..self.i)
    }

    /// Iterate the members of the object starting here; `f(key, key_has_escapes, value_span)`.
    fn members(&mut self, mut f: impl FnMut(&'a [u8], bool, Range<usize>)) -> Option<()> {
        self.ws();
        if !self.eat(b'{') {
            return None;
        }
        self.ws();
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            self.ws();
            let (key, escaped) = self.string()?;
            self.ws();
            if !self.eat(b':') {
                return None;
            }
            self.ws();
            let value = self.value()?;
            f(&self.b[key], escaped, value);
            self.ws();
            if self.eat(b',') {
                continue;
            }
            if self.eat(b'}') {
                return Some(());
            }
            return None;
        }
    }
}

/// The key as written, or unescaped when it has escapes (rare; allocates).
fn key_is(key: &[u8], escaped: bool, want: &str) -> bool {
    if !escaped {
        return key == want.as_bytes();
    }
    let mut quoted = Vec::with_capacity(key.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(key);
    quoted.push(b'"');
    serde_json::from_slice::<String>(&quoted).is_ok_and(|k| k == want)
}

fn parse_id(text: &[u8]) -> Id {
    match text.first() {
        Some(b'n') => Id::Null,
        Some(b'"') => Id::Other,
        Some(_) => {
            let (neg, digits) = match text.split_first() {
                Some((b'-', rest)) => (true, rest),
                _ => (false, text),
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Id::Other;
            }
            let mut v: i64 = 0;
            for &d in digits {
                let Some(next) = v
                    .checked_mul(10)
                    .and_then(|v| v.checked_sub(i64::from(d - b'0')))
                else {
                    return Id::Other;
                };
                v = next;
            }
            if neg {
                Id::Int(v)
            } else {
                v.checked_neg().map_or(Id::Other, Id::Int)
            }
        }
        None => Id::Other,
    }
}

/// Scan the top level of one JSON-RPC message. `None` when it is not a well-formed JSON object
/// (as far as the structural scan sees) or has trailing bytes other than whitespace.
pub fn scan(msg: &[u8]) -> Option<Scanned> {
    let mut out = Scanned {
        id: Id::Absent,
        jsonrpc: false,
        result: None,
        error: None,
        method: false,
    };
    let mut c = Cursor { b: msg, i: 0 };
    c.members(|key, escaped, value| {
        let v = &msg[value.clone()];
        if key_is(key, escaped, "id") {
            out.id = parse_id(v);
        } else if key_is(key, escaped, "result") {
            out.result = Some(value);
        } else if key_is(key, escaped, "error") {
            out.error = Some(value);
        } else if key_is(key, escaped, "jsonrpc") {
            out.jsonrpc = v == b"\"2.0\"";
        } else if key_is(key, escaped, "method") {
            out.method = true;
        }
    })?;
    c.ws();
    (c.i == msg.len()).then_some(out)
}

/// The span of a top-level member's value in a JSON object.
pub fn member(obj: &[u8], name: &str) -> Option<Range<usize>> {
    let mut found = None;
    let mut c = Cursor { b: obj, i: 0 };
    c.members(|key, escaped, value| {
        if found.is_none() && key_is(key, escaped, name) {
            found = Some(value);
        }
    })?;
    found
}

/// A JSON string value's content (unescaped when needed).
pub fn string_value(v: &[u8]) -> Option<String> {
    if v.len() < 2 || v[0] != b'"' {
        return None;
    }
    let inner = &v[1..v.len() - 1];
    if !inner.contains(&b'\\') {
        return std::str::from_utf8(inner).ok().map(str::to_owned);
    }
    serde_json::from_slice::<String>(v).ok()
}

/// `"isError": true` at the top level of a tools/call result.
pub fn is_tool_error(result: &[u8]) -> bool {
    member(result, "isError").is_some_and(|v| &result[v] == b"true")
}

fn error_code(error: &[u8]) -> Option<i64> {
    let v = member(error, "code")?;
    match parse_id(&error[v]) {
        Id::Int(code) => Some(code),
        _ => None,
    }
}

/// How one message relates to the request we sent.
enum Match {
    Mine(Verdict, Range<usize>),
    OtherReply,
    ServerMessage,
    NotJsonRpc,
    Malformed,
}

fn classify(msg: &[u8], want: i64) -> Match {
    let Some(s) = scan(msg) else {
        return Match::Malformed;
    };
    if s.method {
        return if s.jsonrpc {
            Match::ServerMessage
        } else {
            Match::NotJsonRpc
        };
    }
    if !s.jsonrpc {
        return Match::NotJsonRpc;
    }
    match (s.result, s.error) {
        (Some(result), None) => {
            if s.id == Id::Int(want) {
                Match::Mine(Verdict::Ok, result)
            } else {
                Match::OtherReply
            }
        }
        (None, Some(error)) => match s.id {
            Id::Int(id) if id != want => Match::OtherReply,
            Id::Other => Match::OtherReply,
            _ => Match::Mine(Verdict::RpcError(error_code(&msg[error])), 0..0),
        },
        _ => Match::NotJsonRpc,
    }
}

/// Check an `application/json` body: one JSON-RPC reply for id `want`.
pub fn check_json(body: &[u8], want: i64) -> Checked {
    match classify(body, want) {
        Match::Mine(verdict, result) => Checked {
            verdict,
            message: 0..body.len(),
            result,
            ..Checked::new(verdict)
        },
        Match::OtherReply => Checked::new(Verdict::IdMismatch),
        Match::ServerMessage => Checked::new(Verdict::NotAReply),
        Match::NotJsonRpc => Checked::new(Verdict::NotJsonRpc),
        Match::Malformed => Checked::new(Verdict::Malformed),
    }
}

/// Call `f` with the data of every dispatched event in an SSE body, until it returns `true`.
/// Data spread over several `data:` lines is joined into `scratch`; `f` gets
/// `(data, data_span, in_scratch)`.
pub fn for_each_event(
    body: &[u8],
    scratch: &mut Vec<u8>,
    mut f: impl FnMut(&[u8], Range<usize>, bool) -> bool,
) {
    let mut i = if body.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    // data of the event being read: none yet, one line in `body`, or several joined in `scratch`
    let mut lines = 0u32;
    let mut first: Range<usize> = 0..0;
    while i < body.len() {
        let Some(off) = memchr2(b'\r', b'\n', &body[i..]) else {
            return; // a last line without its terminator: the incomplete event is dropped
        };
        let end = i + off;
        let next = if body[end] == b'\r' && body.get(end + 1) == Some(&b'\n') {
            end + 2
        } else {
            end + 1
        };
        let line = i..end;
        i = next;
        if line.is_empty() {
            // dispatch; an empty data buffer dispatches nothing
            let stop = match lines {
                0 => false,
                1 if first.is_empty() => false,
                1 => f(&body[first.clone()], first.clone(), false),
                _ => {
                    let len = scratch.len();
                    f(&scratch[..], 0..len, true)
                }
            };
            if stop {
                return;
            }
            lines = 0;
            first = 0..0;
            scratch.clear();
            continue;
        }
        let text = &body[line.clone()];
        if text[0] == b':' {
            continue; // comment
        }
        let (name, value) = match memchr::memchr(b':', text) {
            Some(colon) => {
                let vstart = if text.get(colon + 1) == Some(&b' ') {
                    colon + 2
                } else {
                    colon + 1
                };
                (&text[..colon], line.start + vstart..line.end)
            }
            None => (text, line.end..line.end),
        };
        if name != b"data" {
            continue; // event, id, retry and unknown fields do not matter here
        }
        lines += 1;
        if lines == 1 {
            first = value;
        } else {
            if lines == 2 {
                scratch.clear();
                scratch.extend_from_slice(&body[first.clone()]);
            }
            scratch.push(b'\n');
            scratch.extend_from_slice(&body[value]);
        }
    }
}

/// Check a `text/event-stream` body: find the reply for id `want` among its events.
pub fn check_sse(body: &[u8], want: i64, scratch: &mut Vec<u8>) -> Checked {
    let mut found: Option<Checked> = None;
    let mut others = 0u32;
    let mut mismatch = false;
    let mut bad: Option<Verdict> = None;
    for_each_event(body, scratch, |data, span, in_scratch| {
        match classify(data, want) {
            Match::Mine(verdict, result) => {
                let base = span.start;
                found = Some(Checked {
                    verdict,
                    message: span,
                    result: result.start + base..result.end + base,
                    in_scratch,
                    other_messages: 0,
                });
                true
            }
            Match::ServerMessage => {
                others += 1;
                false
            }
            Match::OtherReply => {
                mismatch = true;
                false
            }
            Match::NotJsonRpc => {
                bad.get_or_insert(Verdict::NotJsonRpc);
                false
            }
            Match::Malformed => {
                bad.get_or_insert(Verdict::Malformed);
                false
            }
        }
    });
    let mut checked = found.unwrap_or_else(|| {
        Checked::new(if mismatch {
            Verdict::IdMismatch
        } else {
            bad.unwrap_or(Verdict::NoReply)
        })
    });
    checked.other_messages = others;
    checked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_result_for_our_id() {
        let body =
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
        let c = check_json(body, 7);
        assert_eq!(c.verdict, Verdict::Ok);
        assert_eq!(
            &body[c.result.clone()],
            br#"{"content":[{"type":"text","text":"hi"}]}"#
        );
        assert!(!is_tool_error(&body[c.result]));
    }

    #[test]
    fn id_prefixes_do_not_match() {
        let body = br#"{"jsonrpc":"2.0","id":10,"result":{}}"#;
        assert_eq!(check_json(body, 1).verdict, Verdict::IdMismatch);
        let body = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert_eq!(check_json(body, 10).verdict, Verdict::IdMismatch);
        assert_eq!(check_json(body, 1).verdict, Verdict::Ok);
    }

    #[test]
    fn nested_id_is_not_the_reply_id() {
        // the reply is for 3; the result holds "id":5 in several disguises
        let body = br#"{"result":{"id":5,"t":"\"id\":5","a":[{"id":5}]},"jsonrpc":"2.0","id":3}"#;
        assert_eq!(check_json(body, 5).verdict, Verdict::IdMismatch);
        assert_eq!(check_json(body, 3).verdict, Verdict::Ok);
        // and an error-looking string inside the result is not an error
        let body = br#"{"jsonrpc":"2.0","id":4,"result":{"text":"\"error\":{\"code\":1}"}}"#;
        assert_eq!(check_json(body, 4).verdict, Verdict::Ok);
    }

    #[test]
    fn whitespace_and_key_order() {
        let body = b"{ \"id\" : 12 ,\n \"result\" : { } , \"jsonrpc\" : \"2.0\" }\n";
        assert_eq!(check_json(body, 12).verdict, Verdict::Ok);
    }

    #[test]
    fn string_and_fraction_ids_never_match() {
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","id":"5","result":{}}"#, 5).verdict,
            Verdict::IdMismatch
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","id":5.0,"result":{}}"#, 5).verdict,
            Verdict::IdMismatch
        );
        assert_eq!(
            check_json(
                br#"{"jsonrpc":"2.0","id":99999999999999999999,"result":{}}"#,
                5
            )
            .verdict,
            Verdict::IdMismatch
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","id":-5,"result":{}}"#, -5).verdict,
            Verdict::Ok
        );
    }

    #[test]
    fn errors_carry_their_code() {
        let body = br#"{"jsonrpc":"2.0","id":2,"error":{"message":"x","code":-32602}}"#;
        assert_eq!(check_json(body, 2).verdict, Verdict::RpcError(Some(-32602)));
        let body =
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#;
        assert_eq!(check_json(body, 2).verdict, Verdict::RpcError(Some(-32700)));
        let body = br#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"no id"}}"#;
        assert_eq!(check_json(body, 2).verdict, Verdict::RpcError(Some(-32600)));
        let body = br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"other"}}"#;
        assert_eq!(check_json(body, 2).verdict, Verdict::IdMismatch);
    }

    #[test]
    fn not_json_rpc_or_malformed() {
        assert_eq!(
            check_json(br#"{"id":1,"result":{}}"#, 1).verdict,
            Verdict::NotJsonRpc
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"1.0","id":1,"result":{}}"#, 1).verdict,
            Verdict::NotJsonRpc
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","id":1}"#, 1).verdict,
            Verdict::NotJsonRpc
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","id":1,"result":{}"#, 1).verdict,
            Verdict::Malformed
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","id":1,"result":{]}"#, 1).verdict,
            Verdict::Malformed
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","id":1,"result":{}} x"#, 1).verdict,
            Verdict::Malformed
        );
        assert_eq!(check_json(b"", 1).verdict, Verdict::Malformed);
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","id":1,"result":tru}"#, 1).verdict,
            Verdict::Malformed
        );
        assert_eq!(
            check_json(
                br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
                1
            )
            .verdict,
            Verdict::NotAReply
        );
    }

    #[test]
    fn escaped_keys_are_read() {
        let body = br#"{"jsonrpc":"2.0","\u0069d":4,"result":{}}"#;
        assert_eq!(check_json(body, 4).verdict, Verdict::Ok);
    }

    #[test]
    fn tool_errors_are_seen() {
        let body = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"bad"}],"isError":true}}"#;
        let c = check_json(body, 1);
        assert_eq!(c.verdict, Verdict::Ok);
        assert!(is_tool_error(&body[c.result]));
    }

    #[test]
    fn members_and_strings() {
        let obj = br#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"x":"a\"b"}"#;
        let v = member(obj, "protocolVersion").expect("present");
        assert_eq!(string_value(&obj[v]).as_deref(), Some("2025-06-18"));
        let v = member(obj, "x").expect("present");
        assert_eq!(string_value(&obj[v]).as_deref(), Some("a\"b"));
        assert!(member(obj, "tools").is_none());
    }

    #[test]
    fn sse_reply_after_notifications() {
        let body = b": keep-alive\r\n\
id: 0\r\ndata: \r\n\r\n\
event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n\r\n\
event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"id\":9}}\n\n\
event: message\rid: abc\rdata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"ok\":true}}\r\r";
        let mut scratch = Vec::new();
        let c = check_sse(body, 9, &mut scratch);
        assert_eq!(c.verdict, Verdict::Ok);
        assert_eq!(c.other_messages, 2);
        assert!(!c.in_scratch);
        assert_eq!(&body[c.result], br#"{"ok":true}"#);
    }

    #[test]
    fn sse_multi_line_data_is_joined() {
        let body = b"data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":3,\ndata:\"result\":{\"a\":1}}\n\n";
        let mut scratch = Vec::new();
        let c = check_sse(body, 3, &mut scratch);
        assert_eq!(c.verdict, Verdict::Ok);
        assert!(c.in_scratch);
        assert_eq!(&scratch[c.result], br#"{"a":1}"#);
    }

    #[test]
    fn sse_without_our_reply() {
        let mut scratch = Vec::new();
        let only_note = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n";
        assert_eq!(
            check_sse(only_note, 1, &mut scratch).verdict,
            Verdict::NoReply
        );
        let other = b"data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n";
        assert_eq!(
            check_sse(other, 1, &mut scratch).verdict,
            Verdict::IdMismatch
        );
        // the reply's event is not terminated by a blank line: dropped, as the SSE rules say
        let cut = b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
        assert_eq!(check_sse(cut, 1, &mut scratch).verdict, Verdict::NoReply);
        let garbage = b"data: not json\n\n";
        assert_eq!(
            check_sse(garbage, 1, &mut scratch).verdict,
            Verdict::Malformed
        );
        assert_eq!(check_sse(b"", 1, &mut scratch).verdict, Verdict::NoReply);
    }

    #[test]
    fn sse_error_reply() {
        let body = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32601,\"message\":\"m\"}}\n\n";
        let mut scratch = Vec::new();
        assert_eq!(
            check_sse(body, 4, &mut scratch).verdict,
            Verdict::RpcError(Some(-32601))
        );
    }

    #[test]
    fn sse_field_without_space_and_bom() {
        let body = b"\xEF\xBB\xBFdata:{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        let mut scratch = Vec::new();
        assert_eq!(check_sse(body, 1, &mut scratch).verdict, Verdict::Ok);
    }
}
