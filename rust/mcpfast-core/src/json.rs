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
/// quote, the backslash and control characters. Eight bytes per step (SWAR); the tail is read
/// as one more padded word.
#[inline(always)]
pub(crate) fn plain_run(rest: &[u8]) -> usize {
    let mut i = 0;
    let mut chunks = rest.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let stop = special_bytes(u64::from_le_bytes(word));
        if stop != 0 {
            return i + (stop.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    let tail = chunks.remainder();
    if tail.is_empty() {
        return i;
    }
    // Pad with a byte that never stops a run.
    let mut word = [b'a'; 8];
    word[..tail.len()].copy_from_slice(tail);
    let stop = special_bytes(u64::from_le_bytes(word));
    if stop != 0 {
        return i + (stop.trailing_zeros() / 8) as usize;
    }
    i + tail.len()
}

#[inline(always)]
fn special_bytes(v: u64) -> u64 {
    bytes_equal(v, b'"') | bytes_equal(v, b'\\') | bytes_below(v, 0x20)
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

    #[inline]
    pub fn skip_ws(&mut self) {
        // Compact JSON has none: one test and out.
        match self.buf.get(self.pos) {
            Some(b' ' | b'\n' | b'\r' | b'\t') => {}
            _ => return,
        }
        while let Some(&b) = self.buf.get(self.pos) {
            if b == b' ' || b == b'\n' || b == b'\r' || b == b'\t' {
                self.pos += 1;
            } else {
                break;
            }
        }
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
    pub fn skip_value(&mut self, depth: usize) -> Result<()> {
        self.skip_ws();
        // Dispatch on the byte directly: scalars, the common case, return without a detour.
        match self.buf.get(self.pos) {
            Some(b'"') => self.skip_string().map(|_| ()),
            Some(b'{') => {
                self.enter(depth)?;
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_ws();
                    if self.peek() != Some(b'"') {
                        return self.err("expected a string key");
                    }
                    self.skip_string()?;
                    self.colon()?;
                    self.skip_value(depth + 1)?;
                    if self.comma_or_end(b'}')? {
                        return Ok(());
                    }
                }
            }
            Some(b'[') => {
                self.enter(depth)?;
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    if self.comma_or_end(b']')? {
                        return Ok(());
                    }
                }
            }
            Some(b'-' | b'0'..=b'9') => self.skip_number(),
            Some(b't') => self.expect_literal(b"true"),
            Some(b'f') => self.expect_literal(b"false"),
            Some(b'n') => self.expect_literal(b"null"),
            Some(_) => self.err("unexpected character"),
            None => self.err("unexpected end of data"),
        }
    }

    /// Validates a number without building it: only a fraction, an exponent or a very long
    /// integer can overflow a double, so only those are parsed.
    #[inline]
    fn skip_number(&mut self) -> Result<()> {
        let (text, is_int) = self.number_text()?;
        if !is_int || text.len() > 300 {
            self.float_of(text)?;
        }
        Ok(())
    }

    /// Expects `:` (with whitespace around).
    #[inline]
    pub fn colon(&mut self) -> Result<()> {
        self.skip_ws();
        if self.peek() == Some(b':') {
            self.pos += 1;
            Ok(())
        } else {
            self.err("expected ':'")
        }
    }

    /// After a member or element: `,` gives false (more follow), the closing bracket true.
    #[inline]
    pub fn comma_or_end(&mut self, close: u8) -> Result<bool> {
        self.skip_ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(close) {
                    return self.err("trailing comma");
                }
                Ok(false)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(true)
            }
            None => self.err("unexpected end of data"),
            Some(_) => self.err(if close == b'}' {
                "expected ',' or '}'"
            } else {
                "expected ',' or ']'"
            }),
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
    // Always inlined: it runs for every key and string value, and its fast path is a handful of
    // instructions next to a six-register prologue.
    #[inline(always)]
    pub fn skip_string(&mut self) -> Result<bool> {
        let start = self.pos + 1;
        let rest = self.buf.get(start..).unwrap_or_default();
        let n = plain_run(rest);
        self.pos = start + n;
        if rest.get(n) == Some(&b'"') {
            self.pos += 1;
            return Ok(false);
        }
        self.skip_string_rest()
    }

    #[cold]
    fn skip_string_rest(&mut self) -> Result<bool> {
        let mut escaped = false;
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    self.escape(None)?;
                }
                Some(_) => return self.err("unexpected control character in string"),
                None => return self.err("unterminated string"),
            }
            self.pos += plain_run(self.buf.get(self.pos..).unwrap_or_default());
        }
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
        let b = self.buf;
        if b.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match b.get(self.pos) {
            Some(b'0') => {
                self.pos += 1;
                if matches!(b.get(self.pos), Some(b'0'..=b'9')) {
                    return self.err("number with leading zero is not allowed");
                }
            }
            Some(b'1'..=b'9') => {
                while matches!(b.get(self.pos), Some(b'0'..=b'9')) {
                    self.pos += 1;
                }
            }
            _ => return self.err("invalid number"),
        }
        let mut is_int = true;
        if b.get(self.pos) == Some(&b'.') {
            is_int = false;
            self.pos += 1;
            if !matches!(b.get(self.pos), Some(b'0'..=b'9')) {
                return self.err("no digit after decimal point");
            }
            while matches!(b.get(self.pos), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(b.get(self.pos), Some(b'e' | b'E')) {
            is_int = false;
            self.pos += 1;
            if matches!(b.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(b.get(self.pos), Some(b'0'..=b'9')) {
                return self.err("no digit in exponent");
            }
            while matches!(b.get(self.pos), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        Ok((self.str_slice(start, self.pos), is_int))
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
