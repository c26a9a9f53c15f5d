//! The shapes of request a server's short path may answer without its full path: each a
//! single JSON-RPC request read once from the body, with params of few enough members to be
//! listed. Anything else is the full path's to judge (it holds every rule; these only say
//! which requests carry nothing the short path would have to judge).

use std::borrow::Cow;
use std::ops::Range;

use crate::envelope::{decode_bytes, Decoded, Envelope, Id, Kind};
use crate::json::{self, Reader};
use crate::meta;

/// The method of the request the short path serves most.
pub const TOOLS_CALL_NAME: &str = "tools/call";
/// [`TOOLS_CALL_NAME`] as the bytes a body holds.
pub const TOOLS_CALL: &[u8] = TOOLS_CALL_NAME.as_bytes();

/// The single message `body` holds (decoded once for every question asked of it), or `None`
/// for a batch or a document that is not valid JSON-RPC.
pub fn single(body: &[u8]) -> Option<Envelope<'_>> {
    match decode_bytes(body, crate::DEFAULT_MAX_DEPTH) {
        Ok(Decoded::Single(env)) => Some(env),
        _ => None,
    }
}

/// The single request in `body`, with an id and params of few enough members to be listed,
/// calling `method`: its envelope and its text.
pub fn request_of<'a>(body: &'a [u8], method: &[u8]) -> Option<(Envelope<'a>, &'a str)> {
    let env = single(body)?;
    let text = request_in(&env, body, method)?;
    Some((env, text))
}

/// [`request_of`] for the envelope [`single`] made of `body` (passed by reference: it is
/// large): the text of `body`.
pub fn request_in<'a>(env: &Envelope<'a>, body: &'a [u8], method: &[u8]) -> Option<&'a str> {
    if env.kind != Kind::Request || env.id.is_none() || env.members.overflow {
        return None;
    }
    if env.method.as_ref().map(|m| m.as_bytes()) != Some(method) {
        return None;
    }
    env.params()?;
    // Outside strings valid JSON is ASCII, and the strings were checked by the scan.
    std::str::from_utf8(body).ok()
}

/// The values of params members `names` (each at most once, as written), or `None` when
/// params hold another member or one of them twice.
pub fn members<const N: usize>(
    env: &Envelope<'_>,
    body: &[u8],
    names: [&[u8]; N],
) -> Option<[Option<Range<usize>>; N]> {
    let mut slots: [Option<Range<usize>>; N] = std::array::from_fn(|_| None);
    for (key, value) in env.members.iter() {
        let key = &body[key];
        let i = names.iter().position(|n| *n == key)?;
        if slots[i].replace(value).is_some() {
            return None;
        }
    }
    Some(slots)
}

/// A `tools/call` the short path may run: its id, the tool's name and the text of its
/// arguments (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call<'a> {
    pub id: Id<'a>,
    pub name: Cow<'a, str>,
    pub arguments: Option<&'a str>,
}

/// The tools/call in `body` whose params are `name` (a string) and maybe `arguments`, nothing
/// else (`_meta`, `task`: the full path's).
pub fn tools_call<'a>(env: &Envelope<'a>, body: &'a [u8]) -> Option<Call<'a>> {
    match call_of(env, body)? {
        (call, None) => Some(call),
        _ => None,
    }
}

/// The tools/call in `body` whose params are `name` (a string), maybe `arguments` and maybe
/// `_meta` (its text), nothing else.
pub fn call_of<'a>(env: &Envelope<'a>, body: &'a [u8]) -> Option<(Call<'a>, Option<&'a str>)> {
    let text = request_in(env, body, TOOLS_CALL)?;
    let [name, arguments, meta] = members(env, body, [b"name", b"arguments", b"_meta"])?;
    let name = Reader::new(text.get(name?)?, 1).string().ok()?;
    let arguments = match arguments {
        Some(span) => Some(text.get(span)?),
        None => None,
    };
    let meta = match meta {
        Some(span) => Some(text.get(span)?),
        None => None,
    };
    let call = Call {
        id: env.id.clone()?,
        name,
        arguments,
    };
    Some((call, meta))
}

/// Whether a 2026-07-28 request's `_meta` is one the session machine admits as it is: exactly
/// `protocolVersion` (`version`), `clientCapabilities` (an object) and maybe `clientInfo` (an
/// object), each once. (A log level, or anything else, is the full path's to judge.)
pub fn plain_meta(meta: &str, version: &[u8]) -> bool {
    if meta.as_bytes().first() != Some(&b'{') {
        return false;
    }
    let Ok(index) = json::member_index(meta) else {
        return false;
    };
    let mut seen = [false; 3];
    for (key, at) in index {
        let value = &meta[at..];
        let slot = match key.as_ref() {
            meta::PROTOCOL_VERSION => {
                if !Reader::new(value, 1)
                    .string()
                    .is_ok_and(|v| v.as_bytes() == version)
                {
                    return false;
                }
                0
            }
            meta::CLIENT_CAPABILITIES if value.starts_with('{') => 1,
            meta::CLIENT_INFO if value.starts_with('{') => 2,
            _ => return false,
        };
        if std::mem::replace(&mut seen[slot], true) {
            return false;
        }
    }
    seen[0] && seen[1]
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &[u8] =
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}"#;

    fn env(body: &[u8]) -> Envelope<'_> {
        single(body).expect("a single message")
    }

    #[test]
    fn single_is_one_valid_message_only() {
        assert!(single(CALL).is_some());
        assert!(single(br#"{"jsonrpc":"2.0","method":"ping"}"#).is_some());
        for bad in [
            &br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
            br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            b"",
        ] {
            assert!(single(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_request_needs_its_method_an_id_and_listed_params() {
        let (e, text) = request_of(CALL, TOOLS_CALL).expect("a tools/call");
        assert_eq!(e.id, Some(Id::Int(7)));
        assert_eq!(text.as_bytes(), CALL);
        assert!(request_of(CALL, b"tools/list").is_none());
        for bad in [
            // a notification
            &br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#[..],
            // no params
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            // more members than are listed
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":1,"b":2,"c":3,"d":4,"e":5}}"#,
            // a reply
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        ] {
            assert!(
                request_of(bad, TOOLS_CALL).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn members_are_the_named_ones_each_once() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"b":2,"a":"x"}}"#;
        let e = env(body);
        let [a, b, c] = members(&e, body, [b"a", b"b", b"c"]).expect("listed members");
        assert_eq!(&body[a.expect("a")], br#""x""#);
        assert_eq!(&body[b.expect("b")], b"2");
        assert!(c.is_none());
        assert!(members(&e, body, [b"a"]).is_none(), "an unnamed member");
        let twice = br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}"#;
        assert!(members(&env(twice), twice, [b"a"]).is_none(), "a repeat");
    }

    #[test]
    fn a_tools_call_is_a_string_name_and_maybe_arguments() {
        let call = tools_call(&env(CALL), CALL).expect("a plain call");
        assert_eq!(call.id, Id::Int(7));
        assert_eq!(call.name, "echo");
        assert_eq!(call.arguments, Some(r#"{"x":1}"#));
        let bare =
            br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"e\u0063ho"}}"#;
        let call = tools_call(&env(bare), bare).expect("no arguments");
        assert_eq!(call.id, Id::Str("a".into()));
        assert_eq!(call.name, "echo");
        assert_eq!(call.arguments, None);
        for bad in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","_meta":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","task":{}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"e"}}"#,
        ] {
            assert!(
                tools_call(&env(bad), bad).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn call_of_hands_over_the_meta_text() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"k":1},"name":"e"}}"#;
        let (call, meta) = call_of(&env(body), body).expect("a call with _meta");
        assert_eq!(call.name, "e");
        assert_eq!(meta, Some(r#"{"k":1}"#));
        let (_, meta) = call_of(&env(CALL), CALL).expect("a call");
        assert_eq!(meta, None);
    }

    #[test]
    fn plain_meta_is_exactly_version_capabilities_and_maybe_info() {
        let v = b"2026-07-28";
        let ok = |extra: &str| {
            format!(
                r#"{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}{extra}}}"#
            )
        };
        assert!(plain_meta(&ok(""), v));
        assert!(plain_meta(
            &ok(r#","io.modelcontextprotocol/clientInfo":{"name":"c"}"#),
            v
        ));
        assert!(!plain_meta(&ok(""), b"2025-11-25"), "another version");
        assert!(
            !plain_meta(&ok(r#","io.modelcontextprotocol/clientInfo":"c""#), v),
            "info not an object"
        );
        assert!(
            !plain_meta(&ok(r#","io.modelcontextprotocol/logLevel":"debug""#), v),
            "another member"
        );
        assert!(
            !plain_meta(
                &ok(r#","io.modelcontextprotocol/clientCapabilities":{}"#),
                v
            ),
            "a repeat"
        );
        assert!(
            !plain_meta(
                r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
                v
            ),
            "no capabilities"
        );
        assert!(
            !plain_meta(r#"{"io.modelcontextprotocol/clientCapabilities":{}}"#, v),
            "no version"
        );
        assert!(
            !plain_meta(
                r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}"#,
                v
            ),
            "capabilities not an object"
        );
        assert!(!plain_meta("[]", v));
        assert!(!plain_meta("null", v));
    }
}
