//! The replies a server's short path writes itself: the HTTP framing around them (a head
//! rendered once by the server, then `content-length`, the `date` line and the end of the
//! head) and the JSON-RPC bodies it writes without its full path.

use crate::envelope::Id;
use crate::write;

/// After a reply's id: its result follows.
pub const RESULT: &[u8] = b",\"result\":";

/// Around the text of a result of one text content, as the result object is encoded.
pub const TEXT_RESULT: (&[u8], &[u8]) = (b"{\"content\":[{\"type\":\"text\",\"text\":", b"}]}");

/// Starts the JSON-RPC reply to `id` in `reply` (emptied first): `{"jsonrpc":"2.0","id":…`.
pub fn begin(reply: &mut Vec<u8>, id: &Id<'_>) {
    reply.clear();
    reply.extend_from_slice(write::HEAD);
    reply.extend_from_slice(b",\"id\":");
    write::write_id(reply, id);
}

/// Appends `,"error":{"code":…,"message":…[,"data":…]}}`, the end of an error reply: `code`
/// and `data` write their values (the first failure stops it, and is returned).
pub fn error<E>(
    out: &mut Vec<u8>,
    code: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    message: &str,
    data: Option<impl FnOnce(&mut Vec<u8>) -> Result<(), E>>,
) -> Result<(), E> {
    out.extend_from_slice(b",\"error\":{\"code\":");
    code(out)?;
    out.extend_from_slice(b",\"message\":");
    write::write_str(out, message);
    if let Some(data) = data {
        out.extend_from_slice(b",\"data\":");
        data(out)?;
    }
    out.extend_from_slice(b"}}");
    Ok(())
}

/// The HTTP side of the replies: the head of a JSON reply (up to its length) and the current
/// `date` line, which the caller renews when the second changes.
#[derive(Debug)]
pub struct Framing {
    json_head: Vec<u8>,
    date: Vec<u8>,
    date_second: u64,
}

impl Framing {
    /// `json_head`: the status line and headers of a 200 JSON reply, before its length.
    pub fn new(json_head: Vec<u8>) -> Self {
        Framing {
            json_head,
            date: Vec::new(),
            date_second: 0,
        }
    }

    /// Whether the `date` line must be made again at `second` (a Unix time): it never was,
    /// or it was for another second.
    pub fn date_is_stale(&self, second: u64) -> bool {
        second != self.date_second || self.date.is_empty()
    }

    /// The `date` line (with its CRLF) for `second`.
    pub fn set_date(&mut self, second: u64, line: &[u8]) {
        self.date = line.to_vec();
        self.date_second = second;
    }

    /// `content-length`, the `date` line and the blank line that ends the head.
    fn end_head(&self, out: &mut Vec<u8>, length: usize) {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.date);
        out.extend_from_slice(b"\r\n");
    }

    /// A reply of `head` (up to its length) and `body`.
    pub fn with_body(&self, out: &mut Vec<u8>, head: &[u8], body: &[u8]) {
        out.extend_from_slice(head);
        self.end_head(out, body.len());
        out.extend_from_slice(body);
    }

    /// A 200 JSON reply.
    pub fn json(&self, out: &mut Vec<u8>, body: &[u8]) {
        self.with_body(out, &self.json_head, body);
    }

    /// A reply without a body.
    pub fn empty(&self, out: &mut Vec<u8>, head: &[u8]) {
        out.extend_from_slice(head);
        self.end_head(out, 0);
    }

    /// A reply whose head holds `value` between `head.0` and `head.1` (a header value known
    /// only now), and `body`.
    pub fn with_value(
        &self,
        out: &mut Vec<u8>,
        head: &(Vec<u8>, Vec<u8>),
        value: &[u8],
        body: &[u8],
    ) {
        out.extend_from_slice(&head.0);
        out.extend_from_slice(value);
        out.extend_from_slice(&head.1);
        self.end_head(out, body.len());
        out.extend_from_slice(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8] = b"date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";

    fn framing() -> Framing {
        let mut f = Framing::new(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n".to_vec());
        f.set_date(784_111_777, DATE);
        f
    }

    #[test]
    fn the_date_is_made_again_for_another_second_only() {
        let mut f = Framing::new(Vec::new());
        assert!(f.date_is_stale(0), "never made");
        f.set_date(5, DATE);
        assert!(!f.date_is_stale(5));
        assert!(f.date_is_stale(6));
        assert!(f.date_is_stale(4));
    }

    #[test]
    fn replies_end_their_head_with_length_and_date() {
        let f = framing();
        let mut out = Vec::new();
        f.json(&mut out, b"{}");
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n{}"
        );
        out.clear();
        f.empty(&mut out, b"HTTP/1.1 202 Accepted\r\n");
        assert_eq!(
            out,
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
        );
        out.clear();
        f.with_body(&mut out, b"H\r\n", b"abc");
        assert_eq!(
            out,
            b"H\r\ncontent-length: 3\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\nabc"
        );
        out.clear();
        f.with_value(
            &mut out,
            &(b"H\r\nid: ".to_vec(), b"\r\n".to_vec()),
            b"xyz",
            b"[]",
        );
        assert_eq!(
            out,
            b"H\r\nid: xyz\r\ncontent-length: 2\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n[]"
        );
    }

    #[test]
    fn a_reply_begins_with_its_id_as_received() {
        let mut reply = b"left over".to_vec();
        begin(&mut reply, &Id::Int(-3));
        assert_eq!(reply, br#"{"jsonrpc":"2.0","id":-3"#);
        begin(&mut reply, &Id::BigInt("123456789012345678901234567890"));
        assert_eq!(
            reply,
            br#"{"jsonrpc":"2.0","id":123456789012345678901234567890"#
        );
        begin(&mut reply, &Id::Str("a\"b".into()));
        reply.extend_from_slice(RESULT);
        reply.extend_from_slice(TEXT_RESULT.0);
        reply.extend_from_slice(br#""hi""#);
        reply.extend_from_slice(TEXT_RESULT.1);
        reply.push(b'}');
        assert_eq!(
            reply,
            br#"{"jsonrpc":"2.0","id":"a\"b","result":{"content":[{"type":"text","text":"hi"}]}}"#
        );
    }

    type Part = fn(&mut Vec<u8>) -> Result<(), &'static str>;

    #[test]
    fn an_error_object_has_code_message_and_maybe_data() {
        let mut out = Vec::new();
        let code: Part = |o| {
            o.extend_from_slice(b"-32602");
            Ok(())
        };
        let data: Part = |o| {
            o.extend_from_slice(b"[1]");
            Ok(())
        };
        assert_eq!(error(&mut out, code, "bad \"x\"", None::<Part>), Ok(()));
        assert_eq!(out, br#","error":{"code":-32602,"message":"bad \"x\""}}"#);
        out.clear();
        assert_eq!(error(&mut out, code, "m", Some(data)), Ok(()));
        assert_eq!(
            out,
            br#","error":{"code":-32602,"message":"m","data":[1]}}"#
        );
        let refused: Part = |_| Err("no");
        assert_eq!(error(&mut out, refused, "m", Some(data)), Err("no"));
        assert_eq!(error(&mut out, code, "m", Some(refused)), Err("no"));
    }
}
