//! A validating JSON reader that can skip values without building them, or hand them to a
//! [`Builder`] when a caller wants them.
//!
//! The accepted language is RFC 8259 as orjson reads it, so that the compiled core and the
//! pure-Python twin agree byte for byte: UTF-8 only, no BOM, no NaN or Infinity, no trailing
//! commas, no lone surrogate escapes, no control characters inside strings, and a number that
//! overflows a double is an error. Integers outside the 64-bit range are handed to builders as
//! floats (orjson's model); the JSON-RPC envelope reads ids from their literal text instead.

use std::borrow::Cow;

/// Why a document was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not JSON: what was wrong and the byte offset where it was noticed.
    Syntax { msg: &'static str, pos: usize },
    /// Containers nested deeper than the limit.
    TooDeep { max_depth: usize },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Syntax { msg, pos } => write!(f, "invalid JSON: {msg} at byte {pos}"),
            Error::TooDeep { max_depth } => write!(f, "nesting exceeds max_depth of {max_depth}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// A JSON number as read from the text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i64),
    UInt(u64),
    /// An integer literal outside the 64-bit range; its value as the nearest double.
    BigInt(f64),
    Float(f64),
}

/// Receives the values of a document, depth first. Containers are built by `begin_*`, filled
/// by `push`/`insert`, and are complete when the reader moves past their closing bracket.
pub trait Builder {
    type Value;
    type Error: From<Error>;
    fn null(&mut self) -> std::result::Result<Self::Value, Self::Error>;
    fn boolean(&mut self, v: bool) -> std::result::Result<Self::Value, Self::Error>;
    fn number(&mut self, v: Number) -> std::result::Result<Self::Value, Self::Error>;
    fn string(&mut self, v: &str) -> std::result::Result<Self::Value, Self::Error>;
    fn begin_array(&mut self) -> std::result::Result<Self::Value, Self::Error>;
    fn push(
        &mut self,
        array: &mut Self::Value,
        item: Self::Value,
    ) -> std::result::Result<(), Self::Error>;
    fn begin_object(&mut self) -> std::result::Result<Self::Value, Self::Error>;
    fn insert(
        &mut self,
        object: &mut Self::Value,
        key: &str,
        value: Self::Value,
    ) -> std::result::Result<(), Self::Error>;
}

/// What kind of value starts at the reader's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Object,
    Array,
    String,
    Number,
    True,
    False,
    Null,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Bytes of `v` below `n` (n <= 128) get their high bit set; the lowest flagged byte is exact.
#[inline(always)]
fn bytes_below(v: u64, n: u8) -> u64 {
    v.wrapping_sub(ONES * u64::from(n)) & !v & HIGHS
}

#[inline(always)]
fn bytes_equal(v: u64, b: u8) -> u64 {
    bytes_below(v ^ (ONES * u64::from(b)), 1)
}

/// Length of the run of bytes that need no attention inside a string: everything but the
/// quote, the backslash and control characters.
#[inline(always)]
pub(crate) fn plain_run(rest: &[u8]) -> usize {
    plain_end(rest, 0)
}

/// The first index at or after `pos` holding a quote, a backslash or a control character (or
/// the length). Eight bytes per step (SWAR) while eight are left, then byte by byte: no copy
/// into a padded word, so a short key costs a load and a few ALU operations.
#[inline(always)]
fn plain_end(buf: &[u8], mut pos: usize) -> usize {
    while let Some(word) = buf.get(pos..).and_then(<[u8]>::first_chunk::<8>) {
        let stop = special_bytes(u64::from_le_bytes(*word));
        if stop != 0 {
            return pos + (stop.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while let Some(&b) = buf.get(pos) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        pos += 1;
    }
    pos
}

#[inline(always)]
fn special_bytes(v: u64) -> u64 {
    bytes_equal(v, b'"') | bytes_equal(v, b'\\') | bytes_below(v, 0x20)
}

/// As [`plain_end`], but also stopping at any byte of a multi-byte UTF-8 sequence: the
/// validating scan, on text not yet known to be UTF-8, takes the fast path only for ASCII.
#[inline(always)]
fn ascii_plain_end(buf: &[u8], mut pos: usize) -> usize {
    while let Some(word) = buf.get(pos..).and_then(<[u8]>::first_chunk::<8>) {
        let v = u64::from_le_bytes(*word);
        let stop = special_bytes(v) | (v & HIGHS);
        if stop != 0 {
            return pos + (stop.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while let Some(&b) = buf.get(pos) {
        if b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b) {
            break;
        }
        pos += 1;
    }
    pos
}

/// JSON whitespace (space, tab, CR, LF): all four are at most 0x20, so a single comparison
/// clears every structural byte.
#[inline(always)]
pub(crate) fn is_ws(b: u8) -> bool {
    b <= b' ' && matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The first index at or after `pos` that is not whitespace.
#[inline(always)]
pub(crate) fn skip_ws_at(buf: &[u8], mut pos: usize) -> usize {
    while let Some(&b) = buf.get(pos) {
        if !is_ws(b) {
            break;
        }
        pos += 1;
    }
    pos
}

#[inline(always)]
pub(crate) fn syntax<T>(msg: &'static str, pos: usize) -> Result<T> {
    Err(Error::Syntax { msg, pos })
}

/// Validates the string whose opening quote is at `pos`: the index just past its closing
/// quote.
#[inline(always)]
pub(crate) fn string_end_at(buf: &[u8], pos: usize) -> Result<usize> {
    string_span(buf, pos).map(|(end, _)| end)
}

/// Validates the string whose opening quote is at `pos` (escapes, control characters and, when
/// the text was not checked beforehand, UTF-8): the index just past its closing quote, and
/// whether the string holds escapes.
#[inline(always)]
pub(crate) fn string_span(buf: &[u8], pos: usize) -> Result<(usize, bool)> {
    let end = ascii_plain_end(buf, pos + 1);
    if buf.get(end) == Some(&b'"') {
        return Ok((end + 1, false));
    }
    string_end_slow::<true>(buf, end)
}

/// The rest of a string from its first backslash, control character or (when `UTF8`, on text
/// not checked beforehand) non-ASCII byte at `pos`: the index past the closing quote, and
/// whether the string holds escapes. With `UTF8`, non-ASCII text is checked to be well-formed
/// UTF-8 in place: the first few characters one by one, then whole runs at once.
#[cold]
#[inline(never)]
fn string_end_slow<const UTF8: bool>(buf: &[u8], mut pos: usize) -> Result<(usize, bool)> {
    let mut escaped = false;
    let mut multibyte = 0u32;
    loop {
        match buf.get(pos) {
            Some(b'"') => return Ok((pos + 1, escaped)),
            Some(b'\\') => {
                escaped = true;
                pos = escape_end(buf, pos)?;
            }
            Some(&b) if b >= 0x80 => {
                if !UTF8 {
                    pos = plain_end(buf, pos);
                } else if multibyte < 8 {
                    // A few characters one by one.
                    multibyte += 1;
                    pos = utf8_char_end(buf, pos)?;
                } else {
                    // Then whole runs: non-ASCII text goes on up to the next quote, backslash
                    // or control character, none of which can sit inside a character.
                    let run = plain_end(buf, pos);
                    if let Err(e) = std::str::from_utf8(buf.get(pos..run).unwrap_or_default()) {
                        return syntax("str is not valid UTF-8", pos + e.valid_up_to());
                    }
                    pos = run;
                }
            }
            Some(_) => return syntax("unexpected control character in string", pos),
            None => return syntax("unterminated string", pos),
        }
        pos = if UTF8 {
            ascii_plain_end(buf, pos)
        } else {
            plain_end(buf, pos)
        };
    }
}

/// Checks the multi-byte UTF-8 character starting at `pos` (its lead byte is at least 0x80):
/// the index just past it. The well-formed sequences of the Unicode standard (table 3-7): no
/// overlong forms, no surrogates, nothing above U+10FFFF.
#[inline]
fn utf8_char_end(buf: &[u8], pos: usize) -> Result<usize> {
    let cont =
        |i: usize, lo: u8, hi: u8| matches!(buf.get(pos + i), Some(&c) if (lo..=hi).contains(&c));
    let ok = match buf.get(pos).copied().unwrap_or(0) {
        0xC2..=0xDF => cont(1, 0x80, 0xBF).then_some(2),
        0xE0 => (cont(1, 0xA0, 0xBF) && cont(2, 0x80, 0xBF)).then_some(3),
        0xE1..=0xEC | 0xEE..=0xEF => (cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF)).then_some(3),
        0xED => (cont(1, 0x80, 0x9F) && cont(2, 0x80, 0xBF)).then_some(3),
        0xF0 => (cont(1, 0x90, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF)).then_some(4),
        0xF1..=0xF3 => {
            (cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF)).then_some(4)
        }
        0xF4 => (cont(1, 0x80, 0x8F) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF)).then_some(4),
        _ => None,
    };
    match ok {
        Some(n) => Ok(pos + n),
        None => syntax("str is not valid UTF-8", pos),
    }
}

/// Validates the escape sequence whose backslash is at `pos`: the index just past it.
fn escape_end(buf: &[u8], pos: usize) -> Result<usize> {
    match buf.get(pos + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(pos + 2),
        Some(b'u') => {
            let hi = hex4_at(buf, pos + 2)?;
            if (0xD800..0xDC00).contains(&hi) {
                if buf.get(pos + 6) != Some(&b'\\') || buf.get(pos + 7) != Some(&b'u') {
                    return syntax("no low surrogate in string", pos + 6);
                }
                let lo = hex4_at(buf, pos + 8)?;
                if !(0xDC00..0xE000).contains(&lo) {
                    return syntax("invalid low surrogate in string", pos + 12);
                }
                Ok(pos + 12)
            } else if (0xDC00..0xE000).contains(&hi) {
                syntax("lone low surrogate in string", pos + 6)
            } else {
                Ok(pos + 6)
            }
        }
        Some(_) => syntax("invalid escape", pos + 1),
        None => syntax("unterminated string", pos + 1),
    }
}

fn hex4_at(buf: &[u8], pos: usize) -> Result<u32> {
    let mut v = 0u32;
    for i in pos..pos + 4 {
        let d = match buf.get(i) {
            Some(c @ b'0'..=b'9') => c - b'0',
            Some(c @ b'a'..=b'f') => c - b'a' + 10,
            Some(c @ b'A'..=b'F') => c - b'A' + 10,
            _ => return syntax("invalid \\u escape", i),
        };
        v = v * 16 + u32::from(d);
    }
    Ok(v)
}

/// Validates the number starting at `pos` (a `-` or a digit): the index just past it. Only a
/// fraction, an exponent or a very long integer can overflow a double, so only those are parsed.
#[inline(always)]
pub(crate) fn number_end_at(buf: &[u8], pos: usize) -> Result<usize> {
    let mut end = pos + usize::from(buf.get(pos) == Some(&b'-'));
    match buf.get(end) {
        Some(b'1'..=b'9') => {
            end += 1;
            while let Some(b'0'..=b'9') = buf.get(end) {
                end += 1;
            }
        }
        Some(b'0') => end += 1,
        _ => return syntax("invalid number", end),
    }
    match buf.get(end) {
        Some(b'.' | b'e' | b'E' | b'0'..=b'9') => number_end_slow(buf, pos),
        _ if end - pos > 300 => number_end_slow(buf, pos),
        _ => Ok(end),
    }
}

/// The general number path: the full grammar, and the double-overflow check.
#[cold]
#[inline(never)]
fn number_end_slow(buf: &[u8], pos: usize) -> Result<usize> {
    let (end, is_int) = number_span(buf, pos)?;
    if !is_int || end - pos > 300 {
        let text = std::str::from_utf8(&buf[pos..end]).unwrap_or_default();
        if !text.parse::<f64>().is_ok_and(f64::is_finite) {
            return syntax("number is infinity when parsed as double", end);
        }
    }
    Ok(end)
}

/// The end of the number literal at `pos`, and whether it is an integer literal.
pub(crate) fn number_span(b: &[u8], mut pos: usize) -> Result<(usize, bool)> {
    if b.get(pos) == Some(&b'-') {
        pos += 1;
    }
    match b.get(pos) {
        Some(b'0') => {
            pos += 1;
            if matches!(b.get(pos), Some(b'0'..=b'9')) {
                return syntax("number with leading zero is not allowed", pos);
            }
        }
        Some(b'1'..=b'9') => {
            while matches!(b.get(pos), Some(b'0'..=b'9')) {
                pos += 1;
            }
        }
        _ => return syntax("invalid number", pos),
    }
    let mut is_int = true;
    if b.get(pos) == Some(&b'.') {
        is_int = false;
        pos += 1;
        if !matches!(b.get(pos), Some(b'0'..=b'9')) {
            return syntax("no digit after decimal point", pos);
        }
        while matches!(b.get(pos), Some(b'0'..=b'9')) {
            pos += 1;
        }
    }
    if matches!(b.get(pos), Some(b'e' | b'E')) {
        is_int = false;
        pos += 1;
        if matches!(b.get(pos), Some(b'+' | b'-')) {
            pos += 1;
        }
        if !matches!(b.get(pos), Some(b'0'..=b'9')) {
            return syntax("no digit in exponent", pos);
        }
        while matches!(b.get(pos), Some(b'0'..=b'9')) {
            pos += 1;
        }
    }
    Ok((pos, is_int))
}

/// `true`, `false` or `null` at `pos`: the index just past it.
#[inline(always)]
pub(crate) fn literal_end_at(buf: &[u8], pos: usize, lit: &'static [u8]) -> Result<usize> {
    if buf.get(pos..pos + lit.len()) == Some(lit) {
        Ok(pos + lit.len())
    } else {
        syntax("invalid literal", pos)
    }
}

/// The open containers while a nested value is validated: whether each is an object.
trait Nesting {
    /// Opens a container; false when this stack is full (the caller then hands the container
    /// to a deeper validator).
    fn push(&mut self, object: bool) -> bool;
    /// Closes the innermost container.
    fn pop(&mut self);
    /// Whether the innermost container is an object.
    fn in_object(&self) -> bool;
    /// How many containers are open.
    fn level(&self) -> usize;
}

/// Up to 64 levels in one register: bit i is set when the container i levels up from the
/// innermost is an object.
struct Bits {
    bits: u64,
    level: usize,
}

impl Nesting for Bits {
    #[inline(always)]
    fn push(&mut self, object: bool) -> bool {
        if self.level == 64 {
            return false;
        }
        self.bits = (self.bits << 1) | u64::from(object);
        self.level += 1;
        true
    }
    #[inline(always)]
    fn pop(&mut self) {
        self.bits >>= 1;
        self.level -= 1;
    }
    #[inline(always)]
    fn in_object(&self) -> bool {
        self.bits & 1 != 0
    }
    #[inline(always)]
    fn level(&self) -> usize {
        self.level
    }
}

/// Any depth, on the heap: only documents nested more than 64 levels below a skipped value
/// get here.
impl Nesting for Vec<bool> {
    fn push(&mut self, object: bool) -> bool {
        Vec::push(self, object);
        true
    }
    fn pop(&mut self) {
        Vec::pop(self);
    }
    fn in_object(&self) -> bool {
        self.last() == Some(&true)
    }
    fn level(&self) -> usize {
        self.len()
    }
}

/// Validates the container opening at `pos` (its brackets at `depth`): the index just past
/// its closing bracket.
#[inline]
pub(crate) fn skip_nested(buf: &[u8], pos: usize, depth: usize, max_depth: usize) -> Result<usize> {
    skip_with(Bits { bits: 0, level: 0 }, buf, pos, depth, max_depth)
}

/// [`skip_nested`] for a container more than 64 levels down.
#[cold]
#[inline(never)]
fn skip_deep(buf: &[u8], pos: usize, depth: usize, max_depth: usize) -> Result<usize> {
    skip_with(Vec::<bool>::new(), buf, pos, depth, max_depth)
}

/// The validator for nested values, without recursion: one loop, the cursor in a register, the
/// open containers in `open`. Whitespace is only looked for where a structural byte was
/// expected and not found, so compact JSON pays nothing for it.
#[inline(always)]
fn skip_with<N: Nesting>(
    mut open: N,
    buf: &[u8],
    mut pos: usize,
    depth: usize,
    max_depth: usize,
) -> Result<usize> {
    // At the head of this loop a value starts at `pos` (or whitespace before it).
    'value: loop {
        match buf.get(pos) {
            Some(b'"') => pos = string_end_at(buf, pos)?,
            Some(&c @ (b'{' | b'[')) => {
                if depth + open.level() > max_depth {
                    return Err(Error::TooDeep { max_depth });
                }
                let object = c == b'{';
                if !open.push(object) {
                    pos = skip_deep(buf, pos, depth + open.level(), max_depth)?;
                } else {
                    pos += 1;
                    loop {
                        match buf.get(pos) {
                            Some(b'"') if object => {
                                pos = member_value_at(buf, pos)?;
                                continue 'value;
                            }
                            Some(b'}') if object => {}
                            Some(b']') if !object => {}
                            Some(&b) if is_ws(b) => {
                                pos = skip_ws_at(buf, pos);
                                continue;
                            }
                            _ if object => return syntax("expected a string key", pos),
                            _ => continue 'value,
                        }
                        break;
                    }
                    // An empty container.
                    pos += 1;
                    open.pop();
                }
            }
            Some(b'-' | b'0'..=b'9') => pos = number_end_at(buf, pos)?,
            Some(b't') => pos = literal_end_at(buf, pos, b"true")?,
            Some(b'f') => pos = literal_end_at(buf, pos, b"false")?,
            Some(b'n') => pos = literal_end_at(buf, pos, b"null")?,
            Some(&b) if is_ws(b) => {
                pos = skip_ws_at(buf, pos);
                continue 'value;
            }
            Some(_) => return syntax("unexpected character", pos),
            None => return syntax("unexpected end of data", pos),
        }
        // After a value: commas and closing brackets until the next value starts.
        while open.level() > 0 {
            let object = open.in_object();
            match buf.get(pos) {
                Some(b',') => {
                    pos += 1;
                    if object {
                        if buf.get(pos) != Some(&b'"') {
                            pos = skip_ws_at(buf, pos);
                            match buf.get(pos) {
                                Some(b'"') => {}
                                Some(b'}') => return syntax("trailing comma", pos),
                                _ => return syntax("expected a string key", pos),
                            }
                        }
                        pos = member_value_at(buf, pos)?;
                    } else if buf.get(skip_ws_at(buf, pos)) == Some(&b']') {
                        return syntax("trailing comma", pos);
                    }
                    continue 'value;
                }
                Some(b'}') if object => {
                    pos += 1;
                    open.pop();
                }
                Some(b']') if !object => {
                    pos += 1;
                    open.pop();
                }
                Some(&b) if is_ws(b) => pos = skip_ws_at(buf, pos),
                None => return syntax("unexpected end of data", pos),
                Some(_) if object => return syntax("expected ',' or '}'", pos),
                Some(_) => return syntax("expected ',' or ']'", pos),
            }
        }
        return Ok(pos);
    }
}

/// Validates the value at `pos` (whitespace before it allowed; its containers at `depth`): the
/// index just past it. Scalars, the common case, are handled here without a call.
#[inline(always)]
pub(crate) fn skip_value_at(
    buf: &[u8],
    mut pos: usize,
    depth: usize,
    max_depth: usize,
) -> Result<usize> {
    loop {
        return match buf.get(pos) {
            Some(b'"') => string_end_at(buf, pos),
            Some(b'{' | b'[') => skip_nested(buf, pos, depth, max_depth),
            Some(b'-' | b'0'..=b'9') => number_end_at(buf, pos),
            Some(b't') => literal_end_at(buf, pos, b"true"),
            Some(b'f') => literal_end_at(buf, pos, b"false"),
            Some(b'n') => literal_end_at(buf, pos, b"null"),
            Some(&b) if is_ws(b) => {
                pos = skip_ws_at(buf, pos);
                continue;
            }
            Some(_) => syntax("unexpected character", pos),
            None => syntax("unexpected end of data", pos),
        };
    }
}

/// From a key's opening quote: past the key and the colon, to where the member's value starts
/// (whitespace before it is left to the value's dispatch).
#[inline(always)]
pub(crate) fn member_value_at(buf: &[u8], pos: usize) -> Result<usize> {
    let pos = string_end_at(buf, pos)?;
    if buf.get(pos) == Some(&b':') {
        return Ok(pos + 1);
    }
    colon_slow(buf, pos)
}

#[cold]
#[inline(never)]
pub(crate) fn colon_slow(buf: &[u8], pos: usize) -> Result<usize> {
    let pos = skip_ws_at(buf, pos);
    if buf.get(pos) != Some(&b':') {
        return syntax("expected ':'", pos);
    }
    Ok(pos + 1)
}

/// A cursor over a document that has already been checked to be UTF-8.
pub struct Reader<'a> {
    text: &'a str,
    buf: &'a [u8],
    pos: usize,
    max_depth: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `text`; containers deeper than `max_depth` are an error (the first
    /// container counts as depth 1).
    pub fn new(text: &'a str, max_depth: usize) -> Self {
        Reader {
            text,
            buf: text.as_bytes(),
            pos: 0,
            max_depth,
        }
    }

    /// A reader positioned inside a document, for re-reading a span already validated.
    pub fn at(text: &'a str, pos: usize, max_depth: usize) -> Self {
        Reader {
            text,
            buf: text.as_bytes(),
            pos,
            max_depth,
        }
    }

    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }

    #[inline]
    fn err<T>(&self, msg: &'static str) -> Result<T> {
        Err(Error::Syntax { msg, pos: self.pos })
    }

    #[inline(always)]
    pub fn skip_ws(&mut self) {
        self.pos = skip_ws_at(self.buf, self.pos);
    }

    #[inline]
    pub fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// After the top-level value: only whitespace may follow.
    pub fn finish(&mut self) -> Result<()> {
        self.skip_ws();
        if self.pos != self.buf.len() {
            return self.err("trailing characters after the JSON value");
        }
        Ok(())
    }

    /// The kind of the value at the cursor (whitespace skipped).
    pub fn value_kind(&mut self) -> Result<ValueKind> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => Ok(ValueKind::Object),
            Some(b'[') => Ok(ValueKind::Array),
            Some(b'"') => Ok(ValueKind::String),
            Some(b'-' | b'0'..=b'9') => Ok(ValueKind::Number),
            Some(b't') => Ok(ValueKind::True),
            Some(b'f') => Ok(ValueKind::False),
            Some(b'n') => Ok(ValueKind::Null),
            Some(_) => self.err("unexpected character"),
            None => self.err("unexpected end of data"),
        }
    }

    #[inline]
    fn expect_literal(&mut self, lit: &'static [u8]) -> Result<()> {
        if self.buf.len() >= self.pos + lit.len()
            && &self.buf[self.pos..self.pos + lit.len()] == lit
        {
            self.pos += lit.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    fn enter(&self, depth: usize) -> Result<()> {
        if depth > self.max_depth {
            Err(Error::TooDeep {
                max_depth: self.max_depth,
            })
        } else {
            Ok(())
        }
    }

    /// Skips (and fully validates) one value whose containers sit at `depth`.
    #[inline]
    pub fn skip_value(&mut self, depth: usize) -> Result<()> {
        self.pos = skip_value_at(self.buf, self.pos, depth, self.max_depth)?;
        Ok(())
    }

    /// Expects `:` (with whitespace around).
    #[inline(always)]
    pub fn colon(&mut self) -> Result<()> {
        let pos = skip_ws_at(self.buf, self.pos);
        if self.buf.get(pos) == Some(&b':') {
            self.pos = skip_ws_at(self.buf, pos + 1);
            Ok(())
        } else {
            syntax("expected ':'", pos)
        }
    }

    /// After a member or element: `,` gives false (more follow), the closing bracket true.
    #[inline(always)]
    pub fn comma_or_end(&mut self, close: u8) -> Result<bool> {
        let pos = skip_ws_at(self.buf, self.pos);
        match self.buf.get(pos) {
            Some(b',') => {
                let next = skip_ws_at(self.buf, pos + 1);
                if self.buf.get(next) == Some(&close) {
                    return syntax("trailing comma", next);
                }
                self.pos = next;
                Ok(false)
            }
            Some(&c) if c == close => {
                self.pos = pos + 1;
                Ok(true)
            }
            None => syntax("unexpected end of data", pos),
            Some(_) => syntax(
                if close == b'}' {
                    "expected ',' or '}'"
                } else {
                    "expected ',' or ']'"
                },
                pos,
            ),
        }
    }

    /// Opens an object at the cursor: true when it is empty (and already closed).
    pub fn begin_object(&mut self, depth: usize) -> Result<bool> {
        self.skip_ws();
        if self.peek() != Some(b'{') {
            return self.err("expected an object");
        }
        self.enter(depth)?;
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// Opens an array at the cursor: true when it is empty (and already closed).
    pub fn begin_array(&mut self, depth: usize) -> Result<bool> {
        self.skip_ws();
        if self.peek() != Some(b'[') {
            return self.err("expected an array");
        }
        self.enter(depth)?;
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// Reads an object key and the colon, returning the key's bytes as written (between the
    /// quotes) and whether they hold escapes: matching a key needs no string built.
    #[inline]
    pub fn key_raw(&mut self) -> Result<(&'a [u8], bool)> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return self.err("expected a string key");
        }
        let start = self.pos + 1;
        let escaped = self.skip_string()?;
        let raw = self.buf.get(start..self.pos - 1).unwrap_or_default();
        self.colon()?;
        Ok((raw, escaped))
    }

    /// Reads a string value and tells whether it equals `expected`.
    #[inline]
    pub fn string_is(&mut self, expected: &str) -> Result<bool> {
        let start = self.pos + 1;
        if self.skip_string()? {
            self.pos = start - 1;
            return Ok(self.string()? == expected);
        }
        Ok(self.buf.get(start..self.pos - 1) == Some(expected.as_bytes()))
    }

    /// Reads an object key (the cursor is before its opening quote), then the colon.
    #[inline]
    pub fn key(&mut self) -> Result<Cow<'a, str>> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return self.err("expected a string key");
        }
        let k = self.string()?;
        self.colon()?;
        Ok(k)
    }

    /// Skips one value of a document already validated, without checking it again: strings
    /// jump from quote to quote, containers only count brackets (eight bytes per step).
    pub fn skip_trusted(&mut self) {
        self.skip_ws();
        let b = self.buf;
        match b.get(self.pos) {
            Some(b'"') => self.pos = trusted_string_end(b, self.pos + 1),
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                loop {
                    self.pos += structural_run(b.get(self.pos..).unwrap_or_default());
                    match b.get(self.pos) {
                        Some(b'"') => {
                            self.pos = trusted_string_end(b, self.pos + 1);
                            continue;
                        }
                        Some(b'{' | b'[') => depth += 1,
                        Some(_) => {
                            depth -= 1;
                            if depth == 0 {
                                self.pos += 1;
                                return;
                            }
                        }
                        None => return,
                    }
                    self.pos += 1;
                }
            }
            Some(_) => {
                while let Some(&c) = b.get(self.pos) {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        break;
                    }
                    self.pos += 1;
                }
            }
            None => {}
        }
    }

    /// Validates a string at the cursor; returns whether it holds escapes.
    // Always inlined: it runs for every key and string value, and its fast path is a load and
    // a few ALU operations per eight bytes.
    #[inline(always)]
    pub fn skip_string(&mut self) -> Result<bool> {
        let end = plain_end(self.buf, self.pos + 1);
        if self.buf.get(end) == Some(&b'"') {
            self.pos = end + 1;
            return Ok(false);
        }
        let (end, escaped) = string_end_slow::<false>(self.buf, end)?;
        self.pos = end;
        Ok(escaped)
    }

    /// Reads a string at the cursor, borrowing it when it has no escapes.
    #[inline]
    pub fn string(&mut self) -> Result<Cow<'a, str>> {
        let start = self.pos + 1;
        let save = self.pos;
        if !self.skip_string()? {
            return Ok(Cow::Borrowed(self.str_slice(start, self.pos - 1)));
        }
        self.pos = save + 1;
        let mut out = String::with_capacity(self.pos - start);
        loop {
            let run = self.pos;
            self.pos += plain_run(&self.buf[self.pos..]);
            out.push_str(self.str_slice(run, self.pos));
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => self.escape(Some(&mut out))?,
                _ => return self.err("invalid string"),
            }
        }
    }

    #[inline]
    fn str_slice(&self, start: usize, end: usize) -> &'a str {
        // The reader only cuts next to ASCII delimiters, which are always char boundaries.
        self.text.get(start..end).unwrap_or("")
    }

    fn hex4(&mut self) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return self.err("invalid \\u escape"),
            };
            v = v * 16 + u32::from(d);
            self.pos += 1;
        }
        Ok(v)
    }

    /// One escape sequence (cursor on the backslash), appended to `out` when given.
    fn escape(&mut self, out: Option<&mut String>) -> Result<()> {
        self.pos += 1;
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let hi = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&hi) {
                    if self.buf.get(self.pos) != Some(&b'\\')
                        || self.buf.get(self.pos + 1) != Some(&b'u')
                    {
                        return self.err("no low surrogate in string");
                    }
                    self.pos += 2;
                    let lo = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return self.err("invalid low surrogate in string");
                    }
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else if (0xDC00..0xE000).contains(&hi) {
                    return self.err("lone low surrogate in string");
                } else {
                    hi
                };
                if let Some(out) = out {
                    out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                }
                return Ok(());
            }
            Some(_) => return self.err("invalid escape"),
            None => return self.err("unterminated string"),
        };
        self.pos += 1;
        if let Some(out) = out {
            out.push(c);
        }
        Ok(())
    }

    /// Reads a number at the cursor.
    pub fn number(&mut self) -> Result<Number> {
        let (text, is_int) = self.number_text()?;
        if is_int {
            if let Ok(v) = text.parse::<i64>() {
                return Ok(Number::Int(v));
            }
            if let Ok(v) = text.parse::<u64>() {
                return Ok(Number::UInt(v));
            }
            let f = self.float_of(text)?;
            return Ok(Number::BigInt(f));
        }
        Ok(Number::Float(self.float_of(text)?))
    }

    fn float_of(&self, text: &str) -> Result<f64> {
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(f),
            _ => self.err("number is infinity when parsed as double"),
        }
    }

    /// The literal text of the number at the cursor, and whether it is an integer literal.
    pub fn number_text(&mut self) -> Result<(&'a str, bool)> {
        let start = self.pos;
        let (end, is_int) = number_span(self.buf, start)?;
        self.pos = end;
        Ok((self.str_slice(start, end), is_int))
    }

    /// Reads one value into `builder`; its containers sit at `depth`.
    pub fn build<B: Builder>(
        &mut self,
        builder: &mut B,
        depth: usize,
    ) -> std::result::Result<B::Value, B::Error> {
        match self.value_kind()? {
            ValueKind::Object => {
                let mut obj = builder.begin_object()?;
                if self.begin_object(depth)? {
                    return Ok(obj);
                }
                loop {
                    let k = self.key()?;
                    let v = self.build(builder, depth + 1)?;
                    builder.insert(&mut obj, &k, v)?;
                    if self.comma_or_end(b'}')? {
                        return Ok(obj);
                    }
                }
            }
            ValueKind::Array => {
                let mut arr = builder.begin_array()?;
                if self.begin_array(depth)? {
                    return Ok(arr);
                }
                loop {
                    let v = self.build(builder, depth + 1)?;
                    builder.push(&mut arr, v)?;
                    if self.comma_or_end(b']')? {
                        return Ok(arr);
                    }
                }
            }
            ValueKind::String => {
                let s = self.string()?;
                builder.string(&s)
            }
            ValueKind::Number => {
                let n = self.number()?;
                builder.number(n)
            }
            ValueKind::True => {
                self.expect_literal(b"true")?;
                builder.boolean(true)
            }
            ValueKind::False => {
                self.expect_literal(b"false")?;
                builder.boolean(false)
            }
            ValueKind::Null => {
                self.expect_literal(b"null")?;
                builder.null()
            }
        }
    }
}

/// Length of the run before the next quote or bracket (`"`, `{`, `[`, `}`, `]`).
#[inline]
fn structural_run(rest: &[u8]) -> usize {
    // `| 0x20` folds `[` onto `{` and `]` onto `}`, and no other byte onto either.
    let find = |v: u64| {
        let w = v | (ONES * 0x20);
        bytes_equal(w, b'{') | bytes_equal(w, b'}') | bytes_equal(v, b'"')
    };
    run_until(rest, find)
}

/// Length of the run before the next quote or backslash.
#[inline]
fn quote_run(rest: &[u8]) -> usize {
    run_until(rest, |v| bytes_equal(v, b'"') | bytes_equal(v, b'\\'))
}

/// SWAR scan: the index of the first byte flagged by `find`, or the length. Padding bytes are
/// spaces, which none of the scans look for.
#[inline]
fn run_until(rest: &[u8], find: impl Fn(u64) -> u64) -> usize {
    let mut i = 0;
    let mut chunks = rest.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let hit = find(u64::from_le_bytes(word));
        if hit != 0 {
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    let tail = chunks.remainder();
    let mut word = [b' '; 8];
    word[..tail.len()].copy_from_slice(tail);
    let hit = find(u64::from_le_bytes(word));
    if hit != 0 {
        return (i + (hit.trailing_zeros() / 8) as usize).min(rest.len());
    }
    rest.len()
}

/// Where a string whose body starts at `from` ends (just past its closing quote), in a
/// validated document.
fn trusted_string_end(b: &[u8], from: usize) -> usize {
    let mut pos = from;
    loop {
        pos += quote_run(b.get(pos..).unwrap_or_default());
        match b.get(pos) {
            Some(b'"') => return pos + 1,
            Some(_) => pos += 2,
            None => return b.len(),
        }
    }
}

/// The top-level members of a validated object: each key with where its value starts, in
/// document order (duplicates kept; the last one is the member's value). Empty when `text` is
/// not an object.
pub fn member_index(text: &str) -> Result<Vec<(Cow<'_, str>, usize)>> {
    let mut r = Reader::new(text, usize::MAX);
    let mut out = Vec::new();
    if r.value_kind()? != ValueKind::Object || r.begin_object(1)? {
        return Ok(out);
    }
    loop {
        let k = r.key()?;
        r.skip_ws();
        out.push((k, r.pos()));
        r.skip_trusted();
        if r.comma_or_end(b'}')? {
            return Ok(out);
        }
    }
}

/// In a validated object `text` (it must have been validated: values are skipped without
/// being checked again), where the value of member `key` starts (the last one, as duplicate
/// keys resolve to the last), or None when the member is absent or `text` is not an object.
pub fn find_member(text: &str, key: &str) -> Result<Option<usize>> {
    let mut r = Reader::new(text, usize::MAX);
    if r.value_kind()? != ValueKind::Object || r.begin_object(1)? {
        return Ok(None);
    }
    let mut found = None;
    loop {
        let k = r.key()?;
        r.skip_ws();
        if k == key {
            found = Some(r.pos());
        }
        r.skip_trusted();
        if r.comma_or_end(b'}')? {
            return Ok(found);
        }
    }
}

/// The text of a key read with [`Reader::key_raw`] that holds escapes.
pub fn unescape_key(raw: &[u8]) -> Option<String> {
    let quoted = [b"\"".as_slice(), raw, b"\""].concat();
    let text = std::str::from_utf8(&quoted).ok()?;
    Reader::new(text, 1).string().ok().map(Cow::into_owned)
}

/// Checks that `data` is UTF-8, as a JSON syntax error when it is not.
pub fn utf8(data: &[u8]) -> Result<&str> {
    std::str::from_utf8(data).map_err(|e| Error::Syntax {
        msg: "str is not valid UTF-8",
        pos: e.valid_up_to(),
    })
}

/// Validates a whole document.
pub fn validate(data: &[u8], max_depth: usize) -> Result<()> {
    let text = utf8(data)?;
    let mut r = Reader::new(text, max_depth);
    if text.is_empty() {
        return r.err("input is empty");
    }
    r.skip_value(1)?;
    r.finish()
}

/// Builds a whole document.
pub fn build<B: Builder>(
    data: &[u8],
    max_depth: usize,
    builder: &mut B,
) -> std::result::Result<B::Value, B::Error> {
    let text = utf8(data)?;
    let mut r = Reader::new(text, max_depth);
    let v = r.build(builder, 1)?;
    r.finish()?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> bool {
        validate(s.as_bytes(), 128).is_ok()
    }

    #[test]
    fn accepts_rfc8259() {
        for s in [
            "0",
            "-0",
            "1.5",
            "1e5",
            "1E+5",
            "-1.25e-3",
            "\"\"",
            "\"a\\u00e9\\n\\/\"",
            "[]",
            "{}",
            " [1, {\"a\": [null, true, false]}] ",
            "\"\\ud83d\\ude00\"",
            "\"\\u0000\"",
            "\"\u{7f}\"",
            "18446744073709551616",
            "1e-400",
        ] {
            assert!(ok(s), "{s}");
        }
    }

    #[test]
    fn rejects_what_orjson_rejects() {
        for s in [
            "",
            " ",
            "01",
            "1.",
            ".5",
            "+1",
            "NaN",
            "Infinity",
            "[1,]",
            "{\"a\":1,}",
            "{a:1}",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800\\u0041\"",
            "\"\u{1}\"",
            "\"abc",
            "[1",
            "{\"a\"}",
            "1e400",
            "1 2",
            "\"\\x\"",
            "tru",
            "\u{feff}{}",
        ] {
            assert!(!ok(s), "{s:?}");
        }
        assert!(validate(b"\"\xff\"", 128).is_err());
    }

    #[test]
    fn depth_limit() {
        let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
        assert!(validate(deep(5).as_bytes(), 5).is_ok());
        assert_eq!(
            validate(deep(6).as_bytes(), 5),
            Err(Error::TooDeep { max_depth: 5 })
        );
        // A very deep document fails on the limit, never on the stack.
        assert!(validate(deep(1_000_000).as_bytes(), 128).is_err());
        // Past the 64 levels the skipping validator keeps in a register, mixed containers.
        let mixed = |n: usize| {
            let mut open = String::new();
            let mut close = String::new();
            for i in 0..n {
                if i % 3 == 0 {
                    open.push_str("{\"k\": ");
                    close.insert(0, '}');
                } else {
                    open.push_str("[0, ");
                    close.insert(0, ']');
                }
            }
            open + "\"x\"" + &close
        };
        for n in [63, 64, 65, 66, 129, 200, 1000] {
            assert!(validate(mixed(n).as_bytes(), n).is_ok(), "{n}");
            assert_eq!(
                validate(mixed(n + 1).as_bytes(), n),
                Err(Error::TooDeep { max_depth: n }),
                "{n}"
            );
            // A wrong closing bracket deep down is still seen.
            let bad = mixed(n).replacen("}", "]", 1);
            assert!(validate(bad.as_bytes(), n).is_err(), "{n}");
        }
    }

    #[test]
    fn strings_are_checked_to_be_utf8_as_they_are_scanned() {
        // Against the standard library's verdict, for lone characters and for long runs
        // (which the scan checks a run at a time).
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for lead in 0x80..=0xFFu8 {
            for cont in [0x80u8, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0x41] {
                cases.push(vec![lead, cont]);
                cases.push(vec![lead, cont, 0x80]);
                cases.push(vec![lead, cont, 0x80, 0x80]);
                cases.push(vec![b'a', lead, cont, 0xBF, 0xBF, b'z']);
            }
        }
        let long = "d\u{e9}j\u{e0} vu, \u{65e5}\u{672c}\u{8a9e} \u{1f600} ".repeat(8);
        cases.push(long.as_bytes().to_vec());
        for cut in [1, 17, 40, 101] {
            let mut v = long.as_bytes().to_vec();
            v.insert(cut, 0xFF);
            cases.push(v.clone());
            v[cut] = 0xED;
            v.insert(cut + 1, 0xA0);
            v.insert(cut + 2, 0x80);
            cases.push(v);
        }
        for body in cases {
            let want = std::str::from_utf8(&body).is_ok();
            let mut doc = b"[\"".to_vec();
            doc.extend_from_slice(&body);
            doc.extend_from_slice(b"\", {\"");
            doc.extend_from_slice(&body);
            doc.extend_from_slice(b"\\n\": 1}]");
            let got = skip_value_at(&doc, 0, 1, 128).map(|end| end == doc.len());
            assert_eq!(got.is_ok(), want, "{body:x?}");
            if want {
                assert_eq!(got, Ok(true));
            }
        }
        // Outside strings, any non-ASCII byte is an error.
        assert!(skip_value_at(b"[1,\xc3\xa9]", 0, 1, 128).is_err());
    }

    #[test]
    fn strings_unescape() {
        let mut r = Reader::new("\"a\\\"b\\u00e9\\ud83d\\ude00\"", 8);
        assert_eq!(r.string().ok().as_deref(), Some("a\"bé😀"));
        let mut r = Reader::new("\"plain\"", 8);
        assert!(matches!(r.string(), Ok(Cow::Borrowed("plain"))));
    }

    #[test]
    fn plain_runs_stop_at_the_first_special_byte() {
        for (s, n) in [
            (&b"abcdefghij\"x"[..], 10),
            (b"abc\\defghijkl", 3),
            (b"abcdefg\x01", 7),
            (b"", 0),
            (b"\"", 0),
            (b"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"", 10),
            (b"abcdefghijklmnop", 16),
            (b"abcdefgh\x1f", 8),
        ] {
            assert_eq!(plain_run(s), n, "{s:?}");
        }
        for i in 0..40 {
            let mut v = vec![b'a'; 40];
            v[i] = b'"';
            assert_eq!(plain_run(&v), i);
        }
    }

    #[test]
    fn members_last_one_wins() {
        let t = r#"{"a":1,"b":{"a":2},"a":[3]}"#;
        assert_eq!(
            find_member(t, "a").map(|p| p.map(|p| &t[p..p + 3])),
            Ok(Some("[3]"))
        );
        assert_eq!(find_member(t, "z"), Ok(None));
        assert_eq!(find_member("[1]", "a"), Ok(None));
    }

    #[test]
    fn trusted_skip_matches_validating_skip() {
        for doc in [
            r#"{"a":"x\\\"y","b":[1,{"c":"]"},-2.5e3],"d":true}"#,
            r#"["\\\\",[[]],{}]"#,
            r#"  123 "#,
            r#""\u00e9\\""#,
            r#"{"k":null}"#,
        ] {
            let mut a = Reader::new(doc, 64);
            a.skip_value(1).expect("valid");
            let mut b = Reader::new(doc, 64);
            b.skip_trusted();
            assert_eq!(a.pos(), b.pos(), "{doc}");
        }
    }

    #[test]
    fn member_index_lists_every_member() {
        let t = r#"{"a":1,"b":{"a":"}"},"a":[3]}"#;
        let idx = member_index(t).expect("valid");
        let keys: Vec<&str> = idx.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["a", "b", "a"]);
        assert_eq!(&t[idx[2].1..idx[2].1 + 3], "[3]");
    }

    #[test]
    fn numbers() {
        let n = |s: &str| Reader::new(s, 8).number();
        assert_eq!(n("-9223372036854775808"), Ok(Number::Int(i64::MIN)));
        assert_eq!(n("18446744073709551615"), Ok(Number::UInt(u64::MAX)));
        assert_eq!(
            n("18446744073709551616"),
            Ok(Number::BigInt(18446744073709551616.0))
        );
        assert_eq!(n("2.5"), Ok(Number::Float(2.5)));
        assert!(n(&("1".to_owned() + &"0".repeat(400))).is_err());
    }
}
