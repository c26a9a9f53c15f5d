//! What a client reports when the server refuses a request: a failure reason that names the
//! cause (`http 401 invalid_token`, `http 403 insufficient_scope`, `http 429 rate limited
//! (Retry-After 2 s)`), and how long `Retry-After` asks the client to wait.
//!
//! Pure: the caller hands over the status, the raw `WWW-Authenticate` and `Retry-After` values
//! and the current time (for an HTTP-date). Both load engines and the Python client use it, so
//! a cause is one entry of the failures table whichever engine met it.

/// Longest wait taken from a `Retry-After` (a server asking for more is waited on this long).
pub const MAX_RETRY_AFTER_S: f64 = 300.0;

/// The failure reason for `status`, and the wait `Retry-After` asks for (seconds, capped at
/// [`MAX_RETRY_AFTER_S`]; None without a valid one). `now_unix`: seconds since the epoch.
pub fn refusal(
    status: u16,
    www_authenticate: Option<&[u8]>,
    retry_after: Option<&[u8]>,
    now_unix: f64,
) -> (String, Option<f64>) {
    let wait = retry_after.and_then(|v| retry_after_seconds(v, now_unix));
    let mut reason = format!("http {status}");
    if status == 401 || status == 403 {
        if let Some(code) = www_authenticate.and_then(bearer_error) {
            reason.push(' ');
            reason.push_str(&code);
        }
    }
    if status == 429 {
        reason.push_str(" rate limited");
    }
    if let Some(w) = wait {
        // whole seconds: one entry per distinct wait a server gives, not per request
        reason.push_str(&format!(" (Retry-After {} s)", w.round() as u64));
    }
    (reason, wait)
}

/// The `error` parameter of a `WWW-Authenticate` challenge (RFC 6750 §3: `invalid_request`,
/// `invalid_token`, `insufficient_scope`, or another token a server uses), if it is a token.
pub fn bearer_error(value: &[u8]) -> Option<String> {
    auth_param(value, "error").filter(|code| !code.is_empty() && code.bytes().all(is_token_byte))
}

/// The value of parameter `name` (matched without case) in a `WWW-Authenticate` value (RFC 9110
/// §11.2: `name=token` or `name="quoted string"`, backslash escapes undone): e.g. the
/// `resource_metadata` URL of RFC 9728 §5.1 or the `scope` of a challenge. None when absent
/// or unterminated; a name inside another parameter's quoted value is not a parameter.
pub fn auth_param(value: &[u8], name: &str) -> Option<String> {
    let name = name.as_bytes();
    let mut i = 0;
    let n = value.len();
    while i < n {
        // a parameter name starts after a separator
        if (i == 0 || matches!(value[i - 1], b' ' | b',' | b'\t'))
            && value[i..].len() >= name.len()
            && value[i..i + name.len()].eq_ignore_ascii_case(name)
        {
            let mut j = i + name.len();
            while j < n && matches!(value[j], b' ' | b'\t') {
                j += 1;
            }
            if j < n && value[j] == b'=' {
                j += 1;
                while j < n && matches!(value[j], b' ' | b'\t') {
                    j += 1;
                }
                let mut out = Vec::new();
                if j < n && value[j] == b'"' {
                    j += 1;
                    while j < n && value[j] != b'"' {
                        if value[j] == b'\\' && j + 1 < n {
                            j += 1;
                        }
                        out.push(value[j]);
                        j += 1;
                    }
                    if j >= n {
                        return None; // no closing quote
                    }
                } else {
                    while j < n && is_token_byte(value[j]) {
                        out.push(value[j]);
                        j += 1;
                    }
                }
                return String::from_utf8(out).ok();
            }
        }
        if value[i] == b'"' {
            // skip a quoted string: `error=` inside a description is not the parameter
            i += 1;
            while i < n && value[i] != b'"' {
                if value[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
        }
        i += 1;
    }
    None
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `Retry-After` as seconds from now: delta-seconds, or an IMF-fixdate (RFC 9110 §10.2.3).
pub fn retry_after_seconds(value: &[u8], now_unix: f64) -> Option<f64> {
    let v = std::str::from_utf8(value).ok()?.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        let s: f64 = v.parse().ok()?;
        return Some(s.min(MAX_RETRY_AFTER_S));
    }
    let at = imf_fixdate(v)?;
    Some((at - now_unix).clamp(0.0, MAX_RETRY_AFTER_S))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` as seconds since the epoch.
fn imf_fixdate(v: &str) -> Option<f64> {
    let parts: Vec<&str> = v.split(' ').collect();
    let [day_name, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    if !day_name.ends_with(',') || day.len() != 2 || year.len() != 4 {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let day: i64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|x| if x.len() == 2 { x.parse().ok() } else { None })
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    Some((days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s) as f64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_params() {
        let v = br#"Bearer realm="mcp", resource_metadata="https://a.test/.well-known/oauth-protected-resource/mcp", scope="tools:call files:read", error=invalid_token, error_description="say \"error=x\"""#;
        let p = |name| auth_param(v, name);
        assert_eq!(
            p("resource_metadata").as_deref(),
            Some("https://a.test/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(p("SCOPE").as_deref(), Some("tools:call files:read"));
        assert_eq!(p("error").as_deref(), Some("invalid_token"));
        assert_eq!(p("error_description").as_deref(), Some(r#"say "error=x""#));
        assert_eq!(p("realm").as_deref(), Some("mcp"));
        assert_eq!(p("x"), None);
        assert_eq!(p("resource"), None); // a prefix of a name is not the name
        assert_eq!(auth_param(br#"Bearer scope="open"#, "scope"), None);
        assert_eq!(auth_param(b"Bearer scope=", "scope").as_deref(), Some(""));
    }

    #[test]
    fn reasons() {
        let r = |s, w: Option<&str>, ra: Option<&str>| {
            refusal(s, w.map(str::as_bytes), ra.map(str::as_bytes), 0.0)
        };
        assert_eq!(r(404, None, None), ("http 404".into(), None));
        assert_eq!(
            r(
                401,
                Some(r#"Bearer realm="mcp", error="invalid_token", error_description="expired""#),
                None
            )
            .0,
            "http 401 invalid_token"
        );
        assert_eq!(
            r(
                403,
                Some(r#"Bearer error=insufficient_scope, scope="tools:call""#),
                None
            )
            .0,
            "http 403 insufficient_scope"
        );
        assert_eq!(
            r(
                401,
                Some(
                    r#"Bearer resource_metadata="https://x/.well-known/oauth-protected-resource""#
                ),
                None
            )
            .0,
            "http 401"
        );
        // an error= inside a quoted description is not the parameter
        assert_eq!(
            r(
                401,
                Some(r#"Bearer error_description="no error=here""#),
                None
            )
            .0,
            "http 401"
        );
        assert_eq!(
            r(401, Some(r#"Bearer error="unterminated"#), None).0,
            "http 401"
        );
        assert_eq!(
            r(429, None, Some("2")),
            ("http 429 rate limited (Retry-After 2 s)".into(), Some(2.0))
        );
        assert_eq!(r(429, None, None).0, "http 429 rate limited");
        assert_eq!(r(503, None, Some("120")).0, "http 503 (Retry-After 120 s)");
        assert_eq!(r(503, None, Some("99999")).1, Some(MAX_RETRY_AFTER_S));
        assert_eq!(r(503, None, Some("soon")), ("http 503".into(), None));
        assert_eq!(r(503, None, Some("-1")).1, None);
    }

    #[test]
    fn http_dates() {
        // 1994-11-06T08:49:37Z
        assert_eq!(
            imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777.0)
        );
        assert_eq!(imf_fixdate("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0.0));
        assert_eq!(
            imf_fixdate("Tue, 29 Feb 2028 23:59:59 GMT"),
            Some(1_835_481_599.0)
        );
        for bad in [
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Foo 1994 08:49:37 GMT",
        ] {
            assert_eq!(imf_fixdate(bad), None, "{bad}");
        }
        let now = 784_111_770.0;
        assert_eq!(
            retry_after_seconds(b"Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(7.0)
        );
        assert_eq!(
            retry_after_seconds(b"Sun, 06 Nov 1994 08:49:37 GMT", now + 100.0),
            Some(0.0)
        );
    }
}
