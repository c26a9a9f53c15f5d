//! Checking a reply against the request sent, on `mcpfast-core`'s envelope scanner and SSE
//! decoder: one validating pass per message, nothing built. Outside the crate only [`member`]
//! and [`string_member`] are seen (the mock server of `examples/` reads requests with them).

use mcpfast_core::envelope::{self, Decoded, Id, Kind};
use mcpfast_core::json;
use mcpfast_core::sse::{SseDecoder, SseItem};
use mcpfast_core::DEFAULT_MAX_DEPTH;

/// The outcome of checking a reply body against the id we sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A result for our id.
    Ok,
    /// A JSON-RPC error for our id (or with a null id); the code when it is an integer.
    RpcError(Option<i64>),
    /// A reply for another id (and none for ours).
    IdMismatch,
    /// Valid JSON that is not a JSON-RPC 2.0 message.
    NotJsonRpc,
    /// Not JSON.
    Malformed,
    /// An SSE stream that ended without any reply.
    NoReply,
    /// A JSON body holding a server request or notification instead of a reply.
    NotAReply,
    /// An SSE event over the size limit.
    EventTooLarge,
    /// A stdio reply line over the size limit.
    LineTooLarge,
}

impl Verdict {
    /// A short, low-cardinality reason.
    pub(crate) fn describe(self) -> String {
        match self {
            Verdict::Ok => "ok".into(),
            Verdict::RpcError(Some(code)) => format!("jsonrpc error {code}"),
            Verdict::RpcError(None) => "jsonrpc error (no code)".into(),
            Verdict::IdMismatch => "reply id mismatch".into(),
            Verdict::NotJsonRpc => "not a JSON-RPC 2.0 reply".into(),
            Verdict::Malformed => "malformed JSON".into(),
            Verdict::NoReply => "SSE stream ended without the reply".into(),
            Verdict::NotAReply => "JSON body is not a reply".into(),
            Verdict::EventTooLarge => "SSE event too large".into(),
            Verdict::LineTooLarge => "reply line too large".into(),
        }
    }
}

/// The integer `id` of a JSON-RPC message from the first bytes of it (the head of a line too
/// large to keep): the top-level members before `id` must be complete in `head`, and the id
/// followed by `,` or `}` (so a cut through its digits reads as unknown, never as another id).
pub(crate) fn head_id(head: &[u8]) -> Option<i64> {
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).ok()?,
    };
    let mut r = json::Reader::new(text, DEFAULT_MAX_DEPTH);
    if r.begin_object(1).ok()? {
        return None;
    }
    loop {
        let (key, escaped) = r.key_raw().ok()?;
        if key == b"id" && !escaped {
            let json::Number::Int(id) = r.number().ok()? else {
                return None;
            };
            r.comma_or_end(b'}').ok()?;
            return Some(id);
        }
        r.skip_value(2).ok()?;
        if r.comma_or_end(b'}').ok()? {
            return None;
        }
    }
}

/// What the caller wants read out of a successful result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Only the verdict.
    Plain,
    /// tools/call: also whether `isError` is true.
    ToolCall,
    /// initialize: also `protocolVersion`.
    Initialize,
}

/// A checked reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Checked {
    pub(crate) verdict: Option<Verdict>,
    /// `result.isError` was `true` (Want::ToolCall).
    pub(crate) tool_error: bool,
    /// `result.protocolVersion` (Want::Initialize).
    pub(crate) version: Option<String>,
    /// Server requests and notifications seen before the reply (SSE only).
    pub(crate) other_messages: u32,
}

impl Checked {
    pub(crate) fn verdict(&self) -> Verdict {
        self.verdict.unwrap_or(Verdict::NoReply)
    }
}

/// How one message relates to the request we sent.
enum Match {
    Mine(Verdict),
    OtherReply,
    ServerMessage,
    NotJsonRpc,
    Malformed,
}

fn is_ours(id: &Option<Id<'_>>, want: i64) -> bool {
    matches!(id, Some(Id::Int(v)) if *v == want)
}

/// The value of member `key` of the JSON object `obj` (validated already).
pub fn member<'a>(obj: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let text = std::str::from_utf8(obj).ok()?;
    let start = json::find_member(text, key).ok()??;
    let mut r = json::Reader::at(text, start, usize::MAX);
    r.skip_trusted();
    Some(&obj[start..r.pos()])
}

/// `"isError": true` at the top level of a tools/call result.
pub(crate) fn is_tool_error(result: &[u8]) -> bool {
    member(result, "isError") == Some(b"true")
}

/// A JSON string member's value (unescaped).
pub fn string_member(obj: &[u8], key: &str) -> Option<String> {
    let v = member(obj, key)?;
    let text = std::str::from_utf8(v).ok()?;
    let mut r = json::Reader::new(text, 1);
    r.string().ok().map(std::borrow::Cow::into_owned)
}

fn classify(msg: &[u8], want: i64, what: Want, out: &mut Checked) -> Match {
    let env = match envelope::decode_bytes(msg, DEFAULT_MAX_DEPTH) {
        Ok(Decoded::Single(env)) => env,
        Ok(Decoded::Batch(_)) => return Match::NotJsonRpc,
        Err(e) if e.code == envelope::PARSE_ERROR => return Match::Malformed,
        Err(_) => return Match::NotJsonRpc,
    };
    match env.kind {
        Kind::Request | Kind::Notification => Match::ServerMessage,
        Kind::Result => {
            if !is_ours(&env.id, want) {
                return Match::OtherReply;
            }
            if let Some(r) = env.result() {
                let result = &msg[r];
                match what {
                    Want::Plain => {}
                    Want::ToolCall => out.tool_error = is_tool_error(result),
                    Want::Initialize => out.version = string_member(result, "protocolVersion"),
                }
            }
            Match::Mine(Verdict::Ok)
        }
        Kind::Error => {
            if env.id.is_some() && !is_ours(&env.id, want) {
                return Match::OtherReply;
            }
            let code = env.error_code.and_then(|c| i64::try_from(c.value()).ok());
            Match::Mine(Verdict::RpcError(code))
        }
    }
}

/// Check an `application/json` body: one JSON-RPC reply for id `want`.
pub(crate) fn check_json(body: &[u8], want: i64, what: Want) -> Checked {
    let mut out = Checked::default();
    out.verdict = Some(match classify(body, want, what, &mut out) {
        Match::Mine(v) => v,
        Match::OtherReply => Verdict::IdMismatch,
        Match::ServerMessage => Verdict::NotAReply,
        Match::NotJsonRpc => Verdict::NotJsonRpc,
        Match::Malformed => Verdict::Malformed,
    });
    out
}

/// The `result` of the reply to request `want` in a whole body (`sse`: a `text/event-stream`,
/// whose events are searched for it), for reading values out of it; None when there is none.
pub(crate) fn reply_result(body: &[u8], sse: bool, want: i64) -> Option<Vec<u8>> {
    fn result_of(msg: &[u8], want: i64) -> Option<Vec<u8>> {
        let Ok(Decoded::Single(env)) = envelope::decode_bytes(msg, DEFAULT_MAX_DEPTH) else {
            return None;
        };
        if env.kind != Kind::Result || !is_ours(&env.id, want) {
            return None;
        }
        env.result().map(|r| msg[r].to_vec())
    }
    if !sse {
        return result_of(body, want);
    }
    let mut found = None;
    let mut decoder = SseDecoder::new(body.len().max(1));
    let mut take = |item: SseItem<'_>| {
        if let SseItem::Event { data, .. } = item {
            if found.is_none() {
                found = result_of(data.as_bytes(), want);
            }
        }
    };
    decoder.feed(body, &mut take);
    decoder.close(&mut take);
    found
}

/// Incremental check of a `text/event-stream` reply: feed body bytes as they arrive; the
/// verdict is set once the event carrying the reply has been seen.
#[derive(Debug)]
pub(crate) struct SseCheck {
    decoder: SseDecoder,
    want: i64,
    what: Want,
    pub(crate) out: Checked,
    mismatch: bool,
    bad: Option<Verdict>,
    /// Events dispatched so far (any kind).
    pub(crate) events: u32,
}

impl SseCheck {
    pub(crate) fn new(max_event: usize) -> SseCheck {
        SseCheck {
            decoder: SseDecoder::new(max_event),
            want: 0,
            what: Want::Plain,
            out: Checked::default(),
            mismatch: false,
            bad: None,
            events: 0,
        }
    }

    /// Get ready for the reply to request `want`.
    pub(crate) fn reset(&mut self, want: i64, what: Want) {
        self.decoder.close(|_| {});
        self.decoder = SseDecoder::new(self.decoder.max_event_size());
        self.want = want;
        self.what = what;
        self.out = Checked::default();
        self.mismatch = false;
        self.bad = None;
        self.events = 0;
    }

    /// Feed bytes; returns the number of events (with data) dispatched by this chunk.
    pub(crate) fn feed(&mut self, data: &[u8]) -> u32 {
        let (want, what) = (self.want, self.what);
        let out = &mut self.out;
        let mismatch = &mut self.mismatch;
        let bad = &mut self.bad;
        let mut n = 0;
        self.decoder.feed(data, |item| match item {
            SseItem::Event { data, .. } => {
                if data.is_empty() {
                    return;
                }
                n += 1;
                if out.verdict.is_some() {
                    return;
                }
                match classify(data.as_bytes(), want, what, out) {
                    Match::Mine(v) => out.verdict = Some(v),
                    Match::ServerMessage => out.other_messages += 1,
                    Match::OtherReply => *mismatch = true,
                    Match::NotJsonRpc => {
                        bad.get_or_insert(Verdict::NotJsonRpc);
                    }
                    Match::Malformed => {
                        bad.get_or_insert(Verdict::Malformed);
                    }
                }
            }
            SseItem::TooLarge { .. } => {
                bad.get_or_insert(Verdict::EventTooLarge);
            }
        });
        self.events += n;
        n
    }

    /// The body is complete: the verdict, NoReply (or what went wrong) if none was found.
    pub(crate) fn finish(&mut self) -> Checked {
        if self.out.verdict.is_none() {
            let bad = &mut self.bad;
            self.decoder.close(|item| {
                if let SseItem::TooLarge { .. } = item {
                    bad.get_or_insert(Verdict::EventTooLarge);
                }
            });
            self.out.verdict = Some(if self.mismatch {
                Verdict::IdMismatch
            } else {
                self.bad.unwrap_or(Verdict::NoReply)
            });
        }
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    /// Check a whole `text/event-stream` body.
    fn check_sse(body: &[u8], want: i64, what: Want, max_event: usize) -> Checked {
        let mut c = SseCheck::new(max_event);
        c.reset(want, what);
        c.feed(body);
        c.finish()
    }

    #[test]
    fn the_id_of_a_reply_from_its_head() {
        let line = br#"{"jsonrpc":"2.0","id":1234,"result":{"content":[{"type":"text","text":"xxxxxxxx"}]}}"#;
        for cut in 0..=line.len() {
            let got = head_id(&line[..cut]);
            // known once the digits are followed by the comma, unknown before: never another id
            let want = (cut >= 27).then_some(1234);
            assert_eq!(got, want, "cut at {cut}");
        }
        assert_eq!(
            head_id(br#"{"result":{"a":[1,2,{"b":"}"}]},"id":-7}"#),
            Some(-7)
        );
        assert_eq!(head_id(br#"{"result":{"a":"long..."#), None);
        assert_eq!(head_id(br#"{"jsonrpc":"2.0","id":"abc","result":1}"#), None);
        assert_eq!(head_id(br#"{"i\u0064":5,"result":1}"#), None);
        assert_eq!(head_id(b"[1,2]"), None);
        assert_eq!(head_id(b"{}"), None);
        assert_eq!(head_id("{\"text\":\"\u{e9}\u{e9}".as_bytes()), None);
    }

    #[test]
    fn json_replies() {
        let ok = br#"{"jsonrpc":"2.0","id":5,"result":{"content":[],"isError":false}}"#;
        assert_eq!(check_json(ok, 5, Want::ToolCall).verdict(), Verdict::Ok);
        assert!(!check_json(ok, 5, Want::ToolCall).tool_error);
        let tool_err = br#"{"jsonrpc":"2.0","id":5,"result":{"content":[],"isError":true}}"#;
        assert!(check_json(tool_err, 5, Want::ToolCall).tool_error);
        assert_eq!(
            check_json(ok, 6, Want::Plain).verdict(),
            Verdict::IdMismatch
        );
        // an id nested in the result or inside a string is not the reply's id
        let nested = br#"{"jsonrpc":"2.0","id":7,"result":{"id":5,"s":"\"id\":5"}}"#;
        assert_eq!(
            check_json(nested, 5, Want::Plain).verdict(),
            Verdict::IdMismatch
        );
        let err = br#"{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"bad"}}"#;
        assert_eq!(
            check_json(err, 5, Want::Plain).verdict(),
            Verdict::RpcError(Some(-32602))
        );
        let err_null = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#;
        assert_eq!(
            check_json(err_null, 5, Want::Plain).verdict(),
            Verdict::RpcError(Some(-32700))
        );
        assert_eq!(
            check_json(b"{nope", 5, Want::Plain).verdict(),
            Verdict::Malformed
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"1.0","id":5,"result":1}"#, 5, Want::Plain).verdict(),
            Verdict::NotJsonRpc
        );
        assert_eq!(
            check_json(br#"{"jsonrpc":"2.0","method":"x"}"#, 5, Want::Plain).verdict(),
            Verdict::NotAReply
        );
        let string_id = br#"{"jsonrpc":"2.0","id":"5","result":{}}"#;
        assert_eq!(
            check_json(string_id, 5, Want::Plain).verdict(),
            Verdict::IdMismatch
        );
    }

    #[test]
    fn initialize_version() {
        let init = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}"#;
        let c = check_json(init, 1, Want::Initialize);
        assert_eq!(c.version.as_deref(), Some("2025-06-18"));
    }

    #[test]
    fn sse_replies_split_anywhere() {
        let body = b"id: 1\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\r\ndata: \"result\":{\"isError\":true}}\r\r";
        let whole = check_sse(body, 3, Want::ToolCall, MAX);
        assert_eq!(whole.verdict(), Verdict::Ok);
        assert!(whole.tool_error);
        assert_eq!(whole.other_messages, 1);
        for cut in 0..body.len() {
            let mut c = SseCheck::new(MAX);
            c.reset(3, Want::ToolCall);
            c.feed(&body[..cut]);
            c.feed(&body[cut..]);
            assert_eq!(c.finish(), whole, "cut at {cut}");
        }
        let no_reply = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n";
        assert_eq!(
            check_sse(no_reply, 3, Want::Plain, MAX).verdict(),
            Verdict::NoReply
        );
        let other = b"data: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n\n";
        assert_eq!(
            check_sse(other, 3, Want::Plain, MAX).verdict(),
            Verdict::IdMismatch
        );
        let unterminated = b"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}";
        assert_eq!(
            check_sse(unterminated, 3, Want::Plain, MAX).verdict(),
            Verdict::NoReply
        );
        let big = format!("data: {}\n\n", "x".repeat(200));
        assert_eq!(
            check_sse(big.as_bytes(), 3, Want::Plain, 100).verdict(),
            Verdict::EventTooLarge
        );
    }
}
