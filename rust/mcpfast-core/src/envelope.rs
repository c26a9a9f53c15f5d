//! JSON-RPC 2.0 message envelopes: one pass over the bytes that validates the whole document,
//! classifies each message and records where `params`, `result` and `error` sit, without
//! building any of them.

use std::borrow::Cow;
use std::ops::Range;

use crate::json;

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

/// The value of a JSON string of the document, as UTF-8 bytes already validated by the scan:
/// a caller that only compares it (a method name looked up in a table) never pays for a
/// second UTF-8 check; [`Text::as_str`] gives the `str`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<'a>(Cow<'a, [u8]>);

impl<'a> Text<'a> {
    /// The UTF-8 bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The text (checked again: the safe way to a `str`).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The text as a `Cow`, borrowed from the document when the string had no escapes.
    pub fn into_cow(self) -> Cow<'a, str> {
        match self.0 {
            Cow::Borrowed(b) => Cow::Borrowed(std::str::from_utf8(b).unwrap_or_default()),
            Cow::Owned(v) => Cow::Owned(String::from_utf8(v).unwrap_or_default()),
        }
    }
}

impl PartialEq<str> for Text<'_> {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other.as_bytes()
    }
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

/// The code of an error reply: an integer orjson reads as an int (64-bit signed or unsigned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    Int(i64),
    UInt(u64),
}

impl ErrorCode {
    fn of(code: i128) -> ErrorCode {
        match i64::try_from(code) {
            Ok(v) => ErrorCode::Int(v),
            Err(_) => ErrorCode::UInt(u64::try_from(code).unwrap_or(u64::MAX)),
        }
    }

    pub fn value(self) -> i128 {
        match self {
            ErrorCode::Int(v) => i128::from(v),
            ErrorCode::UInt(v) => i128::from(v),
        }
    }
}

/// One valid message: its kind, id, method and the spans of its parts in the document.
// Kept small (no 16-byte-aligned field, one span for the part): it is returned and moved on
// every decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<'a> {
    pub kind: Kind,
    /// None for notifications and for error replies whose id is null.
    pub id: Option<Id<'a>>,
    pub method: Option<Text<'a>>,
    /// The whole message.
    pub span: Range<usize>,
    /// The part the kind carries: params (requests and notifications, when present), result
    /// or error.
    pub part: Option<Range<usize>>,
    /// The members of an object params (see [`Members`]).
    pub members: Members,
    /// The code of an error reply.
    pub error_code: Option<ErrorCode>,
}

impl Envelope<'_> {
    /// The span of params (requests and notifications).
    pub fn params(&self) -> Option<Range<usize>> {
        self.part
            .clone()
            .filter(|_| matches!(self.kind, Kind::Request | Kind::Notification))
    }

    /// The span of the result (result replies).
    pub fn result(&self) -> Option<Range<usize>> {
        self.part.clone().filter(|_| self.kind == Kind::Result)
    }

    /// The span of the error object (error replies).
    pub fn error(&self) -> Option<Range<usize>> {
        self.part.clone().filter(|_| self.kind == Kind::Error)
    }
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
    method: Option<Option<Text<'a>>>, // Some(None): present but not a string
    params: Option<(Range<usize>, bool, Members)>, // span, structured, members
    result: Option<Range<usize>>,
    error: Option<(Range<usize>, Option<i128>)>, // span, code when the object is well formed
}

// The reader below works on the raw bytes with the cursor in a local: whitespace is only looked
// for where a structural byte was expected and not found, strings are checked to be UTF-8 as
// they are scanned (a non-ASCII byte anywhere else is a syntax error anyway), and the member
// names of an envelope are recognised by comparing a few bytes in place.

/// The members of a message object that JSON-RPC gives a meaning to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

/// The text of a span already validated (UTF-8 checked by the scan).
#[inline]
fn str_at(buf: &[u8], range: Range<usize>) -> &str {
    buf.get(range)
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or_default()
}

/// The value of the validated string whose quotes span `range`.
fn string_text(buf: &[u8], range: Range<usize>, escaped: bool) -> Text<'_> {
    if !escaped {
        return Text(Cow::Borrowed(
            buf.get(range.start + 1..range.end - 1).unwrap_or_default(),
        ));
    }
    Text(Cow::Owned(
        json::Reader::new(str_at(buf, range), 1)
            .string()
            .map(|s| s.into_owned().into_bytes())
            .unwrap_or_default(),
    ))
}

/// The value of the validated string whose quotes span `range`, as text.
fn string_value(buf: &[u8], range: Range<usize>, escaped: bool) -> Cow<'_, str> {
    string_text(buf, range, escaped).into_cow()
}

/// Where the next non-whitespace byte is, and that byte.
#[inline(always)]
fn token(buf: &[u8], pos: usize) -> (usize, Option<u8>) {
    match buf.get(pos) {
        Some(&b) if json::is_ws(b) => {
            let pos = json::skip_ws_at(buf, pos);
            (pos, buf.get(pos).copied())
        }
        b => (pos, b.copied()),
    }
}

/// Reads the member name whose opening quote is at `pos`, and the colon after it: the name
/// and where the value starts. The usual names, written plainly and followed by the colon,
/// are recognised by one comparison each.
#[inline(always)]
fn member_key(buf: &[u8], pos: usize) -> Result<(Key, usize), json::Error> {
    let fast = |lit: &[u8], key: Key| {
        (buf.get(pos..pos + lit.len()) == Some(lit)).then_some((key, pos + lit.len()))
    };
    let hit = match buf.get(pos + 1) {
        Some(b'j') => fast(b"\"jsonrpc\":", Key::Jsonrpc),
        Some(b'i') => fast(b"\"id\":", Key::Id),
        Some(b'm') => fast(b"\"method\":", Key::Method),
        Some(b'p') => fast(b"\"params\":", Key::Params),
        Some(b'r') => fast(b"\"result\":", Key::Result),
        Some(b'e') => fast(b"\"error\":", Key::Error),
        _ => None,
    };
    match hit {
        Some(hit) => Ok(hit),
        None => member_key_slow(buf, pos),
    }
}

/// [`member_key`] for any name: scanned, unescaped when it has escapes, then matched.
fn member_key_slow(buf: &[u8], pos: usize) -> Result<(Key, usize), json::Error> {
    let (end, escaped) = json::string_span(buf, pos)?;
    let name = string_value(buf, pos..end, escaped);
    let key = match name.as_ref() {
        "jsonrpc" => Key::Jsonrpc,
        "id" => Key::Id,
        "method" => Key::Method,
        "params" => Key::Params,
        "result" => Key::Result,
        "error" => Key::Error,
        _ => Key::Other,
    };
    let value = if buf.get(end) == Some(&b':') {
        end + 1
    } else {
        json::colon_slow(buf, end)?
    };
    Ok((key, value))
}

/// After a member or element: the position after a comma (false) or after the closing bracket
/// (true).
#[inline(always)]
fn comma_or_end(buf: &[u8], pos: usize, close: u8) -> Result<(usize, bool), json::Error> {
    let (pos, b) = token(buf, pos);
    match b {
        Some(b',') => Ok((pos + 1, false)),
        Some(c) if c == close => Ok((pos + 1, true)),
        None => json::syntax("unexpected end of data", pos),
        Some(_) if close == b'}' => json::syntax("expected ',' or '}'", pos),
        Some(_) => json::syntax("expected ',' or ']'", pos),
    }
}

/// At the start of the next member of an object (after `{` or `,`): the position of the key's
/// opening quote, or None for the closing brace of an empty object (`first` only).
#[inline(always)]
fn next_key(buf: &[u8], pos: usize, first: bool) -> Result<Option<usize>, json::Error> {
    match token(buf, pos) {
        (pos, Some(b'"')) => Ok(Some(pos)),
        (_, Some(b'}')) if first => Ok(None),
        (pos, Some(b'}')) => json::syntax("trailing comma", pos),
        (pos, _) => json::syntax("expected a string key", pos),
    }
}

/// Opens the container at `pos` whose brackets sit at `depth`.
#[inline(always)]
fn enter(depth: usize, max_depth: usize) -> Result<(), json::Error> {
    if depth > max_depth {
        return Err(json::Error::TooDeep { max_depth });
    }
    Ok(())
}

/// A number literal that cannot overflow a double, or the error saying it does.
fn finite(text: &str, pos: usize) -> Result<(), json::Error> {
    if text.parse::<f64>().is_ok_and(f64::is_finite) {
        Ok(())
    } else {
        json::syntax("number is infinity when parsed as double", pos)
    }
}

/// An integer literal of up to 18 digits (and a sign), without a parse.
#[inline(always)]
fn small_int(text: &[u8]) -> Option<i64> {
    let (neg, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        v = v * 10 + i64::from(d - b'0');
    }
    Some(if neg { -v } else { v })
}

/// Reads the id value at `pos` (a value start, whitespace allowed).
fn read_id<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    depth: usize,
    max_depth: usize,
) -> Result<IdSlot<'a>, json::Error> {
    let (start, b) = token(buf, *pos);
    match b {
        Some(b'"') => {
            let (end, escaped) = json::string_span(buf, start)?;
            *pos = end;
            Ok(IdSlot::Valid(Id::Str(string_value(
                buf,
                start..end,
                escaped,
            ))))
        }
        Some(b'-' | b'0'..=b'9') => {
            let (end, is_int) = json::number_span(buf, start)?;
            *pos = end;
            let digits = buf.get(start..end).unwrap_or_default();
            if is_int {
                if let Some(v) = small_int(digits) {
                    return Ok(IdSlot::Valid(Id::Int(v)));
                }
            }
            let text = str_at(buf, start..end);
            // Still a number that must not overflow a double, as any number.
            if !is_int {
                finite(text, end)?;
                return Ok(IdSlot::Invalid);
            }
            match text.parse::<i64>() {
                Ok(v) => Ok(IdSlot::Valid(Id::Int(v))),
                Err(_) => {
                    finite(text, end)?;
                    // A big literal keeps its exact text.
                    Ok(IdSlot::Valid(Id::BigInt(text)))
                }
            }
        }
        Some(b'n') => {
            *pos = json::literal_end_at(buf, start, b"null")?;
            Ok(IdSlot::Null)
        }
        _ => {
            *pos = json::skip_value_at(buf, start, depth, max_depth)?;
            Ok(IdSlot::Invalid)
        }
    }
}

/// Reads an error object at `pos` (a value start; its braces at `depth`): its span, and its
/// code when it has an integer code and a string message.
fn read_error_object(
    buf: &[u8],
    pos: &mut usize,
    depth: usize,
    max_depth: usize,
) -> Result<(Range<usize>, Option<i128>), json::Error> {
    let (start, b) = token(buf, *pos);
    if b != Some(b'{') {
        *pos = json::skip_value_at(buf, start, depth, max_depth)?;
        return Ok((start..*pos, None));
    }
    enter(depth, max_depth)?;
    let mut code: Option<Option<i128>> = None;
    let mut message_ok: Option<bool> = None;
    let mut p = start + 1;
    let mut first = true;
    while let Some(k) = next_key(buf, p, first)? {
        first = false;
        let (end, escaped) = json::string_span(buf, k)?;
        let name = string_value(buf, k..end, escaped);
        p = if buf.get(end) == Some(&b':') {
            end + 1
        } else {
            json::colon_slow(buf, end)?
        };
        let (v, b) = token(buf, p);
        if name == "code" {
            code = Some(if let Some(b'-' | b'0'..=b'9') = b {
                let (vend, is_int) = json::number_span(buf, v)?;
                let text = str_at(buf, v..vend);
                let parsed = if is_int {
                    text.parse::<i64>()
                        .map(i128::from)
                        .ok()
                        .or_else(|| text.parse::<u64>().map(i128::from).ok())
                } else {
                    None
                };
                if parsed.is_none() {
                    finite(text, vend)?;
                }
                p = vend;
                parsed
            } else {
                p = json::skip_value_at(buf, v, depth + 1, max_depth)?;
                None
            });
        } else {
            if name == "message" {
                message_ok = Some(b == Some(b'"'));
            }
            p = json::skip_value_at(buf, v, depth + 1, max_depth)?;
        }
        let (next, end) = comma_or_end(buf, p, b'}')?;
        p = next;
        if end {
            break;
        }
    }
    if first {
        // The empty object: `next_key` stopped at its closing brace.
        p = token(buf, p).0 + 1;
    }
    *pos = p;
    Ok((
        start..p,
        match (code, message_ok) {
            (Some(Some(c)), Some(true)) => Some(c),
            _ => None,
        },
    ))
}

/// Reads `params` at `pos` (a value start; its brackets at `depth`), recording the members of
/// an object: its span, whether it is an object or an array, and the members.
#[inline(always)]
fn read_params(
    buf: &[u8],
    pos: &mut usize,
    depth: usize,
    max_depth: usize,
) -> Result<(Range<usize>, bool, Members), json::Error> {
    let (start, b) = token(buf, *pos);
    let mut members = Members::default();
    if b != Some(b'{') {
        *pos = json::skip_value_at(buf, start, depth, max_depth)?;
        return Ok((start..*pos, b == Some(b'['), members));
    }
    enter(depth, max_depth)?;
    let mut p = start + 1;
    let mut first = true;
    while let Some(k) = next_key(buf, p, first)? {
        first = false;
        let key_end = json::string_end_at(buf, k)?;
        let colon = if buf.get(key_end) == Some(&b':') {
            key_end + 1
        } else {
            json::colon_slow(buf, key_end)?
        };
        let value = token(buf, colon).0;
        p = json::skip_value_at(buf, value, depth + 1, max_depth)?;
        members.push(k + 1..key_end - 1, value..p);
        let (next, end) = comma_or_end(buf, p, b'}')?;
        p = next;
        if end {
            break;
        }
    }
    if first {
        p = token(buf, p).0 + 1;
    }
    *pos = p;
    Ok((start..p, true, members))
}

/// Reads the members of the message object whose opening brace is at `start` (at `depth`):
/// the members JSON-RPC gives a meaning to, and the position after the closing brace.
fn read_slots<'a>(
    buf: &'a [u8],
    start: usize,
    depth: usize,
    max_depth: usize,
) -> Result<(Slots<'a>, usize), json::Error> {
    enter(depth, max_depth)?;
    let mut s = Slots::default();
    let mut p = start + 1;
    let mut first = true;
    while let Some(k) = next_key(buf, p, first)? {
        first = false;
        let (key, value) = member_key(buf, k)?;
        p = value;
        match key {
            Key::Jsonrpc => {
                if buf.get(p..p + 5) == Some(b"\"2.0\"") {
                    s.jsonrpc_ok = true;
                    p += 5;
                } else {
                    let (v, b) = token(buf, p);
                    if b == Some(b'"') {
                        let (end, escaped) = json::string_span(buf, v)?;
                        s.jsonrpc_ok = string_value(buf, v..end, escaped) == "2.0";
                        p = end;
                    } else {
                        p = json::skip_value_at(buf, v, depth + 1, max_depth)?;
                        s.jsonrpc_ok = false;
                    }
                }
            }
            Key::Id => s.id = Some(read_id(buf, &mut p, depth + 1, max_depth)?),
            Key::Method => {
                let (v, b) = token(buf, p);
                s.method = Some(if b == Some(b'"') {
                    let (end, escaped) = json::string_span(buf, v)?;
                    p = end;
                    Some(string_text(buf, v..end, escaped))
                } else {
                    p = json::skip_value_at(buf, v, depth + 1, max_depth)?;
                    None
                });
            }
            Key::Params => s.params = Some(read_params(buf, &mut p, depth + 1, max_depth)?),
            Key::Result => {
                let v = token(buf, p).0;
                p = json::skip_value_at(buf, v, depth + 1, max_depth)?;
                s.result = Some(v..p);
            }
            Key::Error => s.error = Some(read_error_object(buf, &mut p, depth + 1, max_depth)?),
            Key::Other => p = json::skip_value_at(buf, p, depth + 1, max_depth)?,
        }
        let (next, end) = comma_or_end(buf, p, b'}')?;
        p = next;
        if end {
            return Ok((s, p));
        }
    }
    // The empty object.
    Ok((s, token(buf, p).0 + 1))
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
            part: s.params.as_ref().map(|(p, _, _)| p.clone()),
            members: s.params.map(|(_, _, m)| m).unwrap_or_default(),
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
                part: Some(result),
                members: Members::default(),
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
                    part: Some(error),
                    members: Members::default(),
                    error_code: Some(ErrorCode::of(code)),
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

/// Reads one element at `*pos` (a value start; at `depth`): a message, or why it is not one.
#[inline]
fn element<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    depth: usize,
    max_depth: usize,
) -> Result<Result<Envelope<'a>, RpcError<'a>>, json::Error> {
    let (start, b) = token(buf, *pos);
    if b != Some(b'{') {
        *pos = json::skip_value_at(buf, start, depth, max_depth)?;
        return Ok(Err(RpcError::invalid(
            "a JSON-RPC message must be an object",
            None,
        )));
    }
    let (slots, end) = read_slots(buf, start, depth, max_depth)?;
    *pos = end;
    Ok(judge(slots, start..end))
}

/// Decodes a document: one message or a batch. Invalid JSON (including too deep) is a parse
/// error; a JSON document that is not a message is an invalid request; a batch reports each
/// element on its own.
pub fn decode(text: &str, max_depth: usize) -> Result<Decoded<'_>, RpcError<'_>> {
    decode_bytes(text.as_bytes(), max_depth)
}

/// Decodes bytes; UTF-8 is checked as strings are scanned (outside strings only ASCII is JSON).
pub fn decode_bytes(data: &[u8], max_depth: usize) -> Result<Decoded<'_>, RpcError<'_>> {
    if data.is_empty() {
        return Err(json::Error::Syntax {
            msg: "input is empty",
            pos: 0,
        }
        .into());
    }
    let mut pos = 0;
    let decoded = if token(data, 0).1 == Some(b'[') {
        let start = token(data, 0).0;
        enter(1, max_depth)?;
        let mut items = Vec::new();
        pos = start + 1;
        if token(data, pos).1 == Some(b']') {
            pos = token(data, pos).0 + 1;
        } else {
            loop {
                items.push(element(data, &mut pos, 2, max_depth)?);
                let (next, end) = comma_or_end(data, pos, b']')?;
                pos = next;
                if end {
                    break;
                }
                if token(data, pos).1 == Some(b']') {
                    return Err(json::Error::Syntax {
                        msg: "trailing comma",
                        pos,
                    }
                    .into());
                }
            }
        }
        if items.is_empty() {
            finish(data, pos)?;
            return Err(RpcError::invalid("empty batch", None));
        }
        Ok(Decoded::Batch(items))
    } else {
        element(data, &mut pos, 1, max_depth)?.map(Decoded::Single)
    };
    finish(data, pos)?;
    decoded
}

/// After the top-level value: only whitespace may follow.
#[inline]
fn finish(data: &[u8], pos: usize) -> Result<(), json::Error> {
    if pos == data.len() || json::skip_ws_at(data, pos) == data.len() {
        return Ok(());
    }
    json::syntax("trailing characters after the JSON value", pos)
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
            Kind::Error => Ok((env.id, true, env.error_code.map(ErrorCode::value))),
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
        assert_eq!(e.method.as_ref().map(Text::as_str), Some("tools/call"));
        assert_eq!(&s[e.params().expect("params")], r#"{"name":"echo"}"#);
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
        assert_eq!(
            (e.kind, e.id, e.error_code),
            (Kind::Error, None, Some(ErrorCode::Int(-1)))
        );
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

    #[test]
    fn whitespace_and_spelling_do_not_change_the_verdict() {
        let compact = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,{"b":null}]}}}"#;
        let spaced = " {\t\"jsonrpc\" :\r\n \"2.0\" , \"id\"\n: 7 ,\"method\" : \"tools/call\" , \"params\" : { \"name\" : \"echo\" , \"arguments\" : { \"a\" : [ 1 , { \"b\" : null } ] } } }\n";
        let escaped = r#"{"json\u0072pc":"2\u002e0","\u0069d":7,"meth\u006fd":"tools\/call","p\u0061rams":{"name":"echo","arguments":{"a":[1,{"b":null}]}}}"#;
        for s in [compact, spaced, escaped] {
            let e = one(s).expect("valid");
            assert_eq!(e.kind, Kind::Request, "{s}");
            assert_eq!(e.id, Some(Id::Int(7)), "{s}");
            assert_eq!(
                e.method.as_ref().map(Text::as_str),
                Some("tools/call"),
                "{s}"
            );
            let params = &s[e.params().expect("params")];
            assert!(params.starts_with('{') && params.ends_with('}'), "{s}");
            let keys: Vec<&str> = e.members.iter().map(|(k, _)| &s[k]).collect();
            assert_eq!(keys, ["name", "arguments"], "{s}");
            assert_eq!(
                e.span,
                s.find('{').unwrap_or(0)..s.rfind('}').map_or(0, |i| i + 1)
            );
        }
        for s in [
            r#"{"jsonrpc":"2.0","id":1,"method":"m",}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1,]}"#,
            r#"[{"jsonrpc":"2.0","method":"m"},]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m""#,
            r#"{"jsonrpc" "2.0"}"#,
            r#"{"jsonrpc":"2.0","id":01,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a" 1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m",}}"#,
        ] {
            let e = decode_bytes(s.as_bytes(), 128).expect_err("parse error");
            assert_eq!(e.code, PARSE_ERROR, "{s}");
        }
        // Invalid UTF-8 anywhere is a parse error, even in a message that is otherwise not
        // a valid request.
        for s in [
            &b"{\"jsonrpc\":\"1.0\",\"x\":\"\xff\"}"[..],
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\",\"method\":\"m\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xed\xa0\x80\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"\xf4\x90\x80\x80\":1}",
        ] {
            let e = decode_bytes(s, 128).expect_err("parse error");
            assert_eq!(e.code, PARSE_ERROR, "{s:?}");
        }
        let e = one("{\"jsonrpc\":\"2.0\",\"id\":\"\u{e9}\u{1f600}\",\"method\":\"\u{65e5}\"}")
            .expect("valid");
        assert_eq!(e.id, Some(Id::Str(Cow::Borrowed("\u{e9}\u{1f600}"))));
        assert_eq!(e.method.as_ref().map(Text::as_str), Some("\u{65e5}"));
    }

    #[test]
    fn error_codes_keep_their_range() {
        for (code, want) in [
            ("-9223372036854775808", Some(i128::from(i64::MIN))),
            ("18446744073709551615", Some(i128::from(u64::MAX))),
            ("18446744073709551616", None),
            ("1.0", None),
        ] {
            let s =
                format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"m"}}}}"#);
            let got = scan_reply(s.as_bytes(), 128).map(|(_, _, c)| c);
            match want {
                Some(c) => assert_eq!(got, Ok(Some(c)), "{code}"),
                None => assert_eq!(got.map_err(|e| e.code), Err(INVALID_REQUEST), "{code}"),
            }
        }
    }
}
