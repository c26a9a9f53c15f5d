//! Compact JSON output: strings, numbers and the JSON-RPC reply envelopes, written the way
//! orjson writes them so that both implementations of the core produce the same bytes.

use crate::envelope::Id;

static HEX: &[u8; 16] = b"0123456789abcdef";

// 0: copy as is; otherwise the short escape letter, or b'u' for \u00XX.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Appends `s` as a JSON string.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    write_str_bytes(out, s.as_bytes());
}

/// Appends UTF-8 text given as bytes as a JSON string (only ASCII bytes are ever escaped, so
/// the text stays as valid as it came in).
pub fn write_str_bytes(out: &mut Vec<u8>, text: &[u8]) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    // Short strings (most keys and many values): one pass over the bytes, one copy.
    if text.len() < 16 && !text.iter().any(|&b| ESCAPE[b as usize] != 0) {
        out.extend_from_slice(text);
        out.push(b'"');
        return;
    }
    let mut rest = text;
    loop {
        // The bytes a JSON string must escape are exactly those that end a plain run when
        // reading one: the quote, the backslash and control characters.
        let n = crate::json::plain_run(rest);
        out.extend_from_slice(&rest[..n]);
        let Some((&b, tail)) = rest[n..].split_first() else {
            break;
        };
        let esc = ESCAPE[b as usize];
        if esc == b'u' {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', esc]);
        }
        rest = tail;
    }
    out.push(b'"');
}

pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends a double as orjson does: shortest round-trip digits, fixed notation for decimal
/// exponents -5..=15 (always with a fraction), scientific otherwise (`1e+16`, `1.5e-7`);
/// NaN and infinities as `null`.
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(v).as_bytes();
    // Decompose ryu's text into sign, significant digits and the exponent of the first digit.
    let (neg, s) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let (mant, exp_part) = match s.iter().position(|&c| c == b'e' || c == b'E') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut exp: i32 = exp_part
        .and_then(|e| std::str::from_utf8(e).ok())
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    let mut digits: Vec<u8> = Vec::with_capacity(24);
    let mut int_len: i32 = 0;
    let mut seen_point = false;
    for &c in mant {
        if c == b'.' {
            seen_point = true;
        } else {
            digits.push(c);
            if !seen_point {
                int_len += 1;
            }
        }
    }
    // Leading zeros (0.00123) shift the exponent; trailing zeros carry no information.
    let lead = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..lead);
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    if neg {
        out.push(b'-');
    }
    if digits.is_empty() {
        out.extend_from_slice(b"0.0");
        return;
    }
    exp += int_len - 1 - lead as i32;
    if (-5..16).contains(&exp) {
        if exp >= 0 {
            let e = exp as usize;
            if digits.len() > e + 1 {
                out.extend_from_slice(&digits[..=e]);
                out.push(b'.');
                out.extend_from_slice(&digits[e + 1..]);
            } else {
                out.extend_from_slice(&digits);
                out.extend(std::iter::repeat_n(b'0', e + 1 - digits.len()));
                out.extend_from_slice(b".0");
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            out.extend_from_slice(&digits);
        }
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        write_i64(out, i64::from(exp.abs()));
    }
}

/// Appends an id exactly as it was received.
pub fn write_id(out: &mut Vec<u8>, id: &Id<'_>) {
    match id {
        Id::Int(v) => write_i64(out, *v),
        Id::BigInt(text) => out.extend_from_slice(text.as_bytes()),
        Id::Str(s) => write_str(out, s),
    }
}

/// Appends already-encoded JSON, turning raw CR and LF (whitespace in valid JSON) into spaces
/// so that the message stays on one line.
pub fn splice_raw(out: &mut Vec<u8>, raw: &[u8]) {
    if memchr::memchr2(b'\n', b'\r', raw).is_none() {
        out.extend_from_slice(raw);
        return;
    }
    out.extend(
        raw.iter()
            .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
    );
}

pub const HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\"";

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f64) -> String {
        let mut o = Vec::new();
        write_f64(&mut o, v);
        String::from_utf8(o).unwrap_or_default()
    }

    #[test]
    fn floats_like_orjson() {
        let cases: &[(f64, &str)] = &[
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1.2345678901234568e17, "1.2345678901234568e+17"),
            (1e-4, "0.0001"),
            (1e-5, "0.00001"),
            (1e-6, "1e-6"),
            (1.2345e-5, "0.000012345"),
            (1.5e-10, "1.5e-10"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (3.0, "3.0"),
            (123.456, "123.456"),
            (-2.5, "-2.5"),
            (f64::NAN, "null"),
            (f64::INFINITY, "null"),
        ];
        for (v, want) in cases {
            assert_eq!(f(*v), *want, "{v:e}");
        }
    }

    #[test]
    fn strings_escape_controls_only() {
        let mut o = Vec::new();
        write_str(&mut o, "a\"\\\n\u{1}\u{1f}/\u{7f}é");
        assert_eq!(o, "\"a\\\"\\\\\\n\\u0001\\u001f/\u{7f}é\"".as_bytes());
    }

    #[test]
    fn splice_keeps_one_line() {
        let mut o = Vec::new();
        splice_raw(&mut o, b"{\n\"a\":\r\n1}");
        assert_eq!(o, b"{ \"a\":  1}");
    }
}
