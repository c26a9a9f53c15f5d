//! JSON-RPC 2.0 message envelopes: one pass over the bytes that validates the whole document,
//! classifies each message and records where `params`, `result` and `error` sit, without
//! building any of them.

use std::borrow::Cow;
use std::ops::Range;

use crate::json::{self, Reader, ValueKind};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;

/// The four kinds of JSON-RPC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Result,
    Error,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Request => "request",
            Kind::Notification => "notification",
            Kind::Result => "result",
            Kind::Error => "error",
        }
    }
}

/// A valid id, as it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Id<'a> {
    Int(i64),
    /// An integer literal outside `i64`: its exact decimal text.
    BigInt(&'a str),
    Str(Cow<'a, str>),
}

/// The id member as read, before the message is judged.
#[derive(Debug, Clone, PartialEq, Eq)]
enum IdSlot<'a> {
    Null,
    Valid(Id<'a>),
    Invalid,
}

/// Why a message is not valid JSON-RPC, with the code for the error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError<'a> {
    pub code: i64,
    pub message: Cow<'static, str>,
    /// The message's id when it could be read and is a valid id.
    pub id: Option<Id<'a>>,
}

impl<'a> RpcError<'a> {
    fn invalid(message: &'static str, id: Option<Id<'a>>) -> RpcError<'a> {
        RpcError {
            code: INVALID_REQUEST,
            message: Cow::Borrowed(message),
            id,
        }
    }
}

impl From<json::Error> for RpcError<'_> {
    fn from(e: json::Error) -> Self {
        RpcError {
            code: PARSE_ERROR,
            message: Cow::Owned(e.to_string()),
            id: None,
        }
    }
}

/// The error object of an error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorInfo {
    /// The code, which orjson would read as an int (64-bit signed or unsigned).
    pub code: i128,
}

/// The first members of an object `params`, recorded while the message is validated so that
/// one member can be read later without scanning params again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Members {
    len: u8,
    /// More members than fit: look them up by scanning.
    pub overflow: bool,
    /// (key start, key end, value start, value end): the key without its quotes, as written.
    items: [(u32, u32, u32, u32); Members::CAP],
}

impl Members {
    // tools/call carries name, arguments and _meta: four covers the hot path, and the struct
    // stays small enough to move around cheaply.
    pub const CAP: usize = 4;

    fn push(&mut self, key: Range<usize>, value: Range<usize>) {
        let (Ok(ks), Ok(ke), Ok(vs), Ok(ve)) = (
            u32::try_from(key.start),
            u32::try_from(key.end),
            u32::try_from(value.start),
            u32::try_from(value.end),
        ) else {
            self.overflow = true;
            return;
        };
        if usize::from(self.len) == Self::CAP {
            self.overflow = true;
            return;
        }
        self.items[usize::from(self.len)] = (ks, ke, vs, ve);
        self.len += 1;
    }

    /// The recorded members, in document order: (key as written, value).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (Range<usize>, Range<usize>)> + '_ {
        self.items[..usize::from(self.len)]
            .iter()
            .map(|&(ks, ke, vs, ve)| (ks as usize..ke as usize, vs as usize..ve as usize))
    }
}

/// One valid message: its kind, id, method and the spans of its parts in the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<'a> {
    pub kind: Kind,
    /// None for notifications and for error replies whose id is null.
    pub id: Option<Id<'a>>,
    pub method: Option<Cow<'a, str>>,
    /// The whole message.
    pub span: Range<usize>,
    pub params: Option<Range<usize>>,
    /// The members of an object params (see [`Members`]).
    pub members: Members,
    pub result: Option<Range<usize>>,
    pub error: Option<Range<usize>>,
    pub error_code: Option<i128>,
}

/// A decoded document: one message, or a batch with a verdict per element.
// A single message is by far the common case: it stays on the stack rather than in a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Decoded<'a> {
    Single(Envelope<'a>),
    Batch(Vec<Result<Envelope<'a>, RpcError<'a>>>),
}

#[derive(Default)]
struct Slots<'a> {
    jsonrpc_ok: bool,
    id: Option<IdSlot<'a>>,
    method: Option<Option<Cow<'a, str>>>, // Some(None): present but not a string
    params: Option<(Range<usize>, bool, Members)>, // span, structured, members
    result: Option<Range<usize>>,
    error: Option<(Range<usize>, Option<i128>)>, // span, code when the object is well formed
}

fn is_key(raw: &str, name: &str) -> bool {
    raw == name
}

/// Reads the id value at the cursor.
fn read_id<'a>(r: &mut Reader<'a>, depth: usize) -> Result<IdSlot<'a>, json::Error> {
    match r.value_kind()? {
        ValueKind::String => Ok(IdSlot::Valid(Id::Str(r.string()?))),
        ValueKind::Number => {
            let (text, is_int) = r.number_text()?;
            if !is_int {
                // Still a float that must not overflow, as for any number.
                if !text.parse::<f64>().is_ok_and(f64::is_finite) {
                    return Err(json::Error::Syntax {
                        msg: "number is infinity when parsed as double",
                        pos: r.pos(),
                    });
                }
                return Ok(IdSlot::Invalid);
            }
            match text.parse::<i64>() {
                Ok(v) => Ok(IdSlot::Valid(Id::Int(v))),
                Err(_) => {
                    if !text.parse::<f64>().is_ok_and(f64::is_finite) {
                        return Err(json::Error::Syntax {
                            msg: "number is infinity when parsed as double",
                            pos: r.pos(),
                        });
                    }
                    // "-0"-style forms never reach here; a big literal keeps its exact text.
                    Ok(IdSlot::Valid(Id::BigInt(text)))
                }
            }
        }
        ValueKind::Null => {
            r.skip_value(depth)?;
            Ok(IdSlot::Null)
        }
        _ => {
            r.skip_value(depth)?;
            Ok(IdSlot::Invalid)
        }
    }
}

/// Reads an error object, returning its code when it has an integer code and a string message.
fn read_error_object(r: &mut Reader<'_>, depth: usize) -> Result<Option<i128>, json::Error> {
    if r.value_kind()? != ValueKind::Object {
        r.skip_value(depth)?;
        return Ok(None);
    }
    let mut code: Option<Option<i128>> = None;
    let mut message_ok: Option<bool> = None;
    if !r.begin_object(depth)? {
        loop {
            let k = r.key()?;
            if is_key(&k, "code") {
                code = Some(if r.value_kind()? == ValueKind::Number {
                    let (text, is_int) = r.number_text()?;
                    let parsed = if is_int {
                        text.parse::<i64>()
                            .map(i128::from)
                            .ok()
                            .or_else(|| text.parse::<u64>().map(i128::from).ok())
                    } else {
                        None
                    };
                    if parsed.is_none() && !text.parse::<f64>().is_ok_and(f64::is_finite) {
                        return Err(json::Error::Syntax {
                            msg: "number is infinity when parsed as double",
                            pos: r.pos(),
                        });
                    }
                    parsed
                } else {
                    r.skip_value(depth + 1)?;
                    None
                });
            } else if is_key(&k, "message") {
                message_ok = Some(r.value_kind()? == ValueKind::String);
                r.skip_value(depth + 1)?;
            } else {
                r.skip_value(depth + 1)?;
            }
            if r.comma_or_end(b'}')? {
                break;
            }
        }
    }
    Ok(match (code, message_ok) {
        (Some(Some(c)), Some(true)) => Some(c),
        _ => None,
    })
}

/// Scans one message object at the cursor (its braces at `depth`).
fn read_slots<'a>(r: &mut Reader<'a>, depth: usize) -> Result<Slots<'a>, json::Error> {
    let mut s = Slots::default();
    if r.begin_object(depth)? {
        return Ok(s);
    }
    loop {
        let (raw, escaped) = r.key_raw()?;
        let unescaped;
        let key: &[u8] = if escaped {
            unescaped = json::unescape_key(raw).unwrap_or_default();
            unescaped.as_bytes()
        } else {
            raw
        };
        match key {
            b"jsonrpc" => {
                s.jsonrpc_ok = if r.value_kind()? == ValueKind::String {
                    r.string_is("2.0")?
                } else {
                    r.skip_value(depth + 1)?;
                    false
                };
            }
            b"id" => s.id = Some(read_id(r, depth + 1)?),
            b"method" => {
                s.method = Some(if r.value_kind()? == ValueKind::String {
                    Some(r.string()?)
                } else {
                    r.skip_value(depth + 1)?;
                    None
                });
            }
            b"params" => {
                let kind = r.value_kind()?;
                let start = r.pos();
                let mut members = Members::default();
                if kind == ValueKind::Object {
                    if !r.begin_object(depth + 1)? {
                        loop {
                            r.skip_ws();
                            if r.peek() != Some(b'"') {
                                return Err(json::Error::Syntax {
                                    msg: "expected a string key",
                                    pos: r.pos(),
                                });
                            }
                            let key_start = r.pos() + 1;
                            r.skip_string()?;
                            let key_end = r.pos() - 1;
                            r.colon()?;
                            r.skip_ws();
                            let value_start = r.pos();
                            r.skip_value(depth + 2)?;
                            members.push(key_start..key_end, value_start..r.pos());
                            if r.comma_or_end(b'}')? {
                                break;
                            }
                        }
                    }
                } else {
                    r.skip_value(depth + 1)?;
                }
                s.params = Some((
                    start..r.pos(),
                    matches!(kind, ValueKind::Object | ValueKind::Array),
                    members,
                ));
            }
            b"result" => {
                r.value_kind()?;
                let start = r.pos();
                r.skip_value(depth + 1)?;
                s.result = Some(start..r.pos());
            }
            b"error" => {
                r.value_kind()?;
                let start = r.pos();
                let code = read_error_object(r, depth + 1)?;
                s.error = Some((start..r.pos(), code));
            }
            _ => r.skip_value(depth + 1)?,
        }
        if r.comma_or_end(b'}')? {
            return Ok(s);
        }
    }
}

/// Judges the members of one message.
fn judge<'a>(s: Slots<'a>, span: Range<usize>) -> Result<Envelope<'a>, RpcError<'a>> {
    let id = match &s.id {
        Some(IdSlot::Valid(id)) => Some(id.clone()),
        _ => None,
    };
    if !s.jsonrpc_ok {
        return Err(RpcError::invalid("\"jsonrpc\" must be exactly \"2.0\"", id));
    }
    if let Some(method) = s.method {
        let Some(method) = method else {
            return Err(RpcError::invalid("\"method\" must be a string", id));
        };
        if s.result.is_some() || s.error.is_some() {
            return Err(RpcError::invalid(
                "a request must not carry \"result\" or \"error\"",
                id,
            ));
        }
        if let Some((_, false, _)) = s.params {
            return Err(RpcError::invalid(
                "\"params\" must be an object or an array",
                id,
            ));
        }
        let kind = match s.id {
            None => Kind::Notification,
            Some(IdSlot::Valid(_)) => Kind::Request,
            Some(IdSlot::Null) => {
                return Err(RpcError::invalid(
                    "\"id\" may be null only in an error reply",
                    id,
                ))
            }
            Some(_) => {
                return Err(RpcError::invalid(
                    "\"id\" must be a string or an integer",
                    id,
                ))
            }
        };
        return Ok(Envelope {
            kind,
            id,
            method: Some(method),
            span,
            params: s.params.as_ref().map(|(p, _, _)| p.clone()),
            members: s.params.map(|(_, _, m)| m).unwrap_or_default(),
            result: None,
            error: None,
            error_code: None,
        });
    }
    let Some(id_slot) = s.id else {
        return Err(RpcError::invalid("a reply must have an \"id\"", None));
    };
    match (s.result, s.error) {
        (Some(result), None) => match id_slot {
            IdSlot::Valid(_) => Ok(Envelope {
                kind: Kind::Result,
                id,
                method: None,
                span,
                params: None,
                members: Members::default(),
                result: Some(result),
                error: None,
                error_code: None,
            }),
            IdSlot::Null => Err(RpcError::invalid(
                "\"id\" may be null only in an error reply",
                None,
            )),
            _ => Err(RpcError::invalid(
                "\"id\" must be a string or an integer",
                None,
            )),
        },
        (None, Some((error, code))) => {
            let Some(code) = code else {
                return Err(RpcError::invalid(
                    "\"error\" must be an object with an integer \"code\" and a string \"message\"",
                    id,
                ));
            };
            match id_slot {
                IdSlot::Valid(_) | IdSlot::Null => Ok(Envelope {
                    kind: Kind::Error,
                    id,
                    method: None,
                    span,
                    params: None,
                    members: Members::default(),
                    result: None,
                    error: Some(error),
                    error_code: Some(code),
                }),
                _ => Err(RpcError::invalid(
                    "\"id\" must be a string or an integer",
                    None,
                )),
            }
        }
        _ => Err(RpcError::invalid(
            "a reply must have exactly one of \"result\" and \"error\"",
            id,
        )),
    }
}

/// Reads one element (at `depth`): a message, or why it is not one.
fn element<'a>(
    r: &mut Reader<'a>,
    depth: usize,
) -> Result<Result<Envelope<'a>, RpcError<'a>>, json::Error> {
    if r.value_kind()? != ValueKind::Object {
        r.skip_value(depth)?;
        return Ok(Err(RpcError::invalid(
            "a JSON-RPC message must be an object",
            None,
        )));
    }
    let start = r.pos();
    let slots = read_slots(r, depth)?;
    Ok(judge(slots, start..r.pos()))
}

/// Decodes a document: one message or a batch. Invalid JSON (including too deep) is a parse
/// error; a JSON document that is not a message is an invalid request; a batch reports each
/// element on its own.
pub fn decode(text: &str, max_depth: usize) -> Result<Decoded<'_>, RpcError<'_>> {
    let mut r = Reader::new(text, max_depth);
    if r.value_kind()? == ValueKind::Array {
        let mut items = Vec::new();
        if !r.begin_array(1)? {
            loop {
                items.push(element(&mut r, 2)?);
                if r.comma_or_end(b']')? {
                    break;
                }
            }
        }
        r.finish()?;
        if items.is_empty() {
            return Err(RpcError::invalid("empty batch", None));
        }
        return Ok(Decoded::Batch(items));
    }
    let one = element(&mut r, 1)?;
    r.finish()?;
    one.map(Decoded::Single)
}

/// Decodes bytes (checked to be UTF-8 first).
pub fn decode_bytes(data: &[u8], max_depth: usize) -> Result<Decoded<'_>, RpcError<'_>> {
    let text = json::utf8(data)?;
    if text.is_empty() {
        return Err(json::Error::Syntax {
            msg: "input is empty",
            pos: 0,
        }
        .into());
    }
    decode(text, max_depth)
}

/// The client's fast path: a single reply's id, whether it is an error, and the error code.
pub fn scan_reply(
    data: &[u8],
    max_depth: usize,
) -> Result<(Option<Id<'_>>, bool, Option<i128>), RpcError<'_>> {
    match decode_bytes(data, max_depth)? {
        Decoded::Batch(_) => Err(RpcError::invalid(
            "expected a single reply, got a batch",
            None,
        )),
        Decoded::Single(env) => match env.kind {
            Kind::Result => Ok((env.id, false, None)),
            Kind::Error => Ok((env.id, true, env.error_code)),
            Kind::Request | Kind::Notification => Err(RpcError::invalid(
                "expected a reply, got a request or notification",
                env.id,
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Result<Envelope<'_>, RpcError<'_>> {
        match decode_bytes(s.as_bytes(), 128)? {
            Decoded::Single(e) => Ok(e),
            Decoded::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn request_spans() {
        let s = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#;
        let e = one(s).expect("valid");
        assert_eq!(e.kind, Kind::Request);
        assert_eq!(e.id, Some(Id::Int(7)));
        assert_eq!(e.method.as_deref(), Some("tools/call"));
        assert_eq!(&s[e.params.expect("params")], r#"{"name":"echo"}"#);
        let (key, value) = e.members.iter().next().expect("one member");
        assert_eq!((&s[key], &s[value]), ("name", "\"echo\""));
    }

    #[test]
    fn kinds_and_ids() {
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","method":"x"}"#).map(|e| e.kind),
            Ok(Kind::Notification)
        );
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","id":"a","result":null}"#).map(|e| e.kind),
            Ok(Kind::Result)
        );
        let e =
            one(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}"#).expect("valid");
        assert_eq!((e.kind, e.id, e.error_code), (Kind::Error, None, Some(-1)));
        let big = one(r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":1}"#)
            .expect("valid");
        assert_eq!(big.id, Some(Id::BigInt("123456789012345678901234567890")));
    }

    #[test]
    fn invalid_requests_keep_the_id() {
        let e = one(r#"{"jsonrpc":"1.0","id":5,"method":"x"}"#).expect_err("invalid");
        assert_eq!((e.code, e.id), (INVALID_REQUEST, Some(Id::Int(5))));
        for s in [
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":3}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":3}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1.0,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","result":1}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":1}"#,
            r#"{"jsonrpc":"2.0","method":"a","method":1}"#,
            "1",
        ] {
            assert_eq!(
                one(s).map_err(|e| e.code).err(),
                Some(INVALID_REQUEST),
                "{s}"
            );
        }
    }

    #[test]
    fn parse_errors_win() {
        for s in [
            "",
            "{",
            r#"[{"jsonrpc":"1.0"},]"#,
            r#"{"jsonrpc":"2.0","id":1e999,"method":"x"}"#,
        ] {
            let e = decode_bytes(s.as_bytes(), 128).expect_err("parse error");
            assert_eq!(e.code, PARSE_ERROR, "{s}");
        }
        assert_eq!(
            decode_bytes(b"[]", 128).expect_err("empty").code,
            INVALID_REQUEST
        );
    }

    #[test]
    fn batches_judge_each_element() {
        let Ok(Decoded::Batch(items)) = decode_bytes(
            br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, 5, {"jsonrpc":"2.0","method":"b"}]"#,
            128,
        ) else {
            panic!("batch expected")
        };
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_err() && items[2].is_ok());
    }

    #[test]
    fn scan_reply_reads_codes() {
        let s = br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"nope"}}"#;
        assert_eq!(
            scan_reply(s, 128),
            Ok((Some(Id::Str(Cow::Borrowed("x"))), true, Some(-32601)))
        );
        assert_eq!(
            scan_reply(br#"{"jsonrpc":"2.0","method":"a"}"#, 128).map_err(|e| e.code),
            Err(INVALID_REQUEST)
        );
    }
}
