//! Bearer tokens on a server's short path: the tokens its full path verified (signature,
//! issuer, audience, expiry, scopes), each recognised afterwards by a lookup until the time
//! the full path gave it, and the subject each speaks for.
//!
//! The short path never judges a token: a token it does not hold, or holds past its time, goes
//! the full path, which verifies it and answers every refusal. So the full path gives each
//! token a time no later than its expiry, and tells the short path to forget tokens it no
//! longer accepts (one it refused, every one when its signing keys changed).

use std::collections::HashMap;
use std::sync::Arc;

use crate::idhash::IdHash;

/// Tokens held at most: enough for every client of a deployment, bounded against a run of
/// new ones.
pub const TOKENS_MAX: usize = 4096;

/// The token of an `Authorization` value of exactly `Bearer <token>`: the scheme in any case,
/// one space, and a token of visible ASCII only. Another value yields `None` (the full path
/// reads it: its reading of a value of this form is this token).
pub fn bearer(value: &[u8]) -> Option<&[u8]> {
    if value.len() < 8 || !value[..7].eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = &value[7..];
    token
        .iter()
        .all(|b| (0x21..0x7f).contains(b))
        .then_some(token)
}

/// Who a token speaks for (its subject), shared by the token and the requests it admits.
pub type Subject = Arc<str>;

/// Whether a session bound to `bound` (its subject; `None`: no authentication) may be served
/// to a caller who is `caller`: only to the subject it is bound to.
pub fn serves(bound: Option<&str>, caller: Option<&str>) -> bool {
    bound == caller
}

/// The tokens held (see the module doc), by their text.
#[derive(Debug)]
pub struct Tokens {
    held: HashMap<Vec<u8>, (Subject, f64), IdHash>,
    max: usize,
}

impl Tokens {
    /// Room for `max` tokens.
    pub fn new(max: usize) -> Tokens {
        Tokens {
            held: HashMap::default(),
            max,
        }
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Hold the token of `authorization` (see [`bearer`]) for `subject` until `until`, as the
    /// full path said at `now`: whether it is held. When full, the tokens past their time go
    /// first, then the one whose time is nearest.
    pub fn learn(&mut self, authorization: &[u8], subject: Subject, until: f64, now: f64) -> bool {
        let Some(token) = bearer(authorization) else {
            return false;
        };
        if until <= now || self.max == 0 {
            return false;
        }
        if let Some(held) = self.held.get_mut(token) {
            *held = (subject, until);
            return true;
        }
        if self.held.len() >= self.max {
            self.held.retain(|_, (_, t)| *t > now);
        }
        if self.held.len() >= self.max {
            let nearest = self
                .held
                .iter()
                .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
                .map(|(k, _)| k.clone());
            if let Some(k) = nearest {
                self.held.remove(&k);
            }
        }
        self.held.insert(token.to_vec(), (subject, until));
        true
    }

    /// The subject of the token of `authorization` if it is held and its time has not come at
    /// `now`.
    pub fn admit(&self, authorization: &[u8], now: f64) -> Option<&Subject> {
        let (subject, until) = self.held.get(bearer(authorization)?)?;
        (now < *until).then_some(subject)
    }

    /// Forget the token of `authorization` (the full path refused it).
    pub fn forget(&mut self, authorization: &[u8]) {
        if let Some(token) = bearer(authorization) {
            self.held.remove(token);
        }
    }

    /// Forget every token (the keys that signed them changed).
    pub fn clear(&mut self) {
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Subject {
        Arc::from("alice")
    }

    #[test]
    fn a_bearer_value_is_exactly_scheme_space_token() {
        assert_eq!(bearer(b"Bearer abc.def-_~+/="), Some(&b"abc.def-_~+/="[..]));
        assert_eq!(bearer(b"bEARER x"), Some(&b"x"[..]));
        for other in [
            &b"Bearer"[..],
            b"Bearer ",
            b"Bearer  x",
            b"Bearer x ",
            b"Bearer x\ty",
            b"Bearer x, Bearer y",
            b"Basic eA==",
            b"Bearerx",
            b"Bearer \xc3\xa9",
        ] {
            assert_eq!(bearer(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn a_token_is_admitted_until_its_time_only() {
        let mut t = Tokens::new(8);
        assert!(t.learn(b"Bearer tok", alice(), 100.0, 10.0));
        assert_eq!(t.admit(b"Bearer tok", 99.9).map(|s| &**s), Some("alice"));
        assert_eq!(t.admit(b"bearer tok", 50.0).map(|s| &**s), Some("alice"));
        assert_eq!(t.admit(b"Bearer tok", 100.0), None, "its time has come");
        assert_eq!(t.admit(b"Bearer tok", 1e9), None);
        assert_eq!(t.admit(b"Bearer other", 50.0), None);
        assert_eq!(t.admit(b"Bearer  tok", 50.0), None, "not the strict form");
        assert!(
            !t.learn(b"Bearer late", alice(), 10.0, 10.0),
            "already past"
        );
        assert!(!t.learn(b"Basic x", alice(), 100.0, 10.0));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn refused_and_rotated_tokens_are_forgotten() {
        let mut t = Tokens::new(8);
        t.learn(b"Bearer a", alice(), 100.0, 0.0);
        t.learn(b"Bearer b", Arc::from("bob"), 100.0, 0.0);
        t.forget(b"Bearer a");
        assert_eq!(t.admit(b"Bearer a", 1.0), None);
        assert_eq!(t.admit(b"Bearer b", 1.0).map(|s| &**s), Some("bob"));
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.admit(b"Bearer b", 1.0), None);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut t = Tokens::new(3);
        t.learn(b"Bearer old", alice(), 5.0, 0.0);
        t.learn(b"Bearer a", alice(), 50.0, 0.0);
        t.learn(b"Bearer b", alice(), 60.0, 0.0);
        // full: the one past its time goes
        assert!(t.learn(b"Bearer c", alice(), 70.0, 10.0));
        assert_eq!(t.len(), 3);
        assert_eq!(t.admit(b"Bearer old", 1.0), None);
        // full, none past: the nearest goes
        assert!(t.learn(b"Bearer d", alice(), 80.0, 10.0));
        assert_eq!(t.len(), 3);
        assert_eq!(t.admit(b"Bearer a", 11.0), None);
        assert!(t.admit(b"Bearer b", 11.0).is_some());
        assert!(t.admit(b"Bearer d", 11.0).is_some());
        // learned again: a new time, no new entry
        assert!(t.learn(b"Bearer d", alice(), 90.0, 10.0));
        assert_eq!(t.len(), 3);
        assert!(t.admit(b"Bearer d", 85.0).is_some());
        assert!(!Tokens::new(0).learn(b"Bearer x", alice(), 9.0, 0.0));
    }

    #[test]
    fn a_session_serves_its_own_subject_only() {
        assert!(serves(None, None));
        assert!(serves(Some("alice"), Some("alice")));
        assert!(!serves(Some("alice"), Some("bob")));
        assert!(!serves(Some("alice"), None));
        assert!(!serves(None, Some("alice")));
    }
}
