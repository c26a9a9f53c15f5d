//! The `http` family: one task per user, with its own keep-alive connection and session.
//! `tools_call`, `mixed`, `sse_streaming`: one session, a request of the family per iteration
//! (an `sse_streaming` user also holds its session's long-lived stream, on a connection of its
//! own, in a future joined with its calls in the same task: [`super::held`]); `handshake`,
//! `session_churn`: a fresh session each iteration (initialize, initialized, the first call,
//! DELETE or abandon); `discover`: a fresh start each iteration, the eras in turn.

use std::time::Instant;

use super::held::held_stream;
use super::{user_loop, Call, Iteration, PerSession};
use crate::config::Family;
use crate::context::{Ctx, BACKOFF};
use crate::rows::FixedRow;
use crate::session::{Failed, HttpSession};

/// One user of the family (the runtime's entry into it).
pub(crate) async fn run(ctx: &Ctx, slot: usize) {
    let mut s = HttpSession::new(ctx);
    match ctx.cfg().family {
        Family::Handshake | Family::SessionChurn => {
            user_loop(ctx, slot, s, Fresh { delete_acc: 0.0 }).await;
        }
        Family::Discover => user_loop(ctx, slot, s, Discover).await,
        Family::SseStreaming if ctx.cfg().hold_stream => {
            let rx = s.publish_held_stream();
            tokio::join!(
                user_loop(ctx, slot, s, PerSession::new(Request)),
                held_stream(ctx, rx)
            );
        }
        _ => user_loop(ctx, slot, s, PerSession::new(Request)).await,
    }
}

/// `tools_call`, `mixed`, `sse_streaming`: one request of the family (a weighted pick of the
/// mix), recorded under its name.
struct Request;

impl Call for Request {
    async fn call(
        &mut self,
        ctx: &Ctx,
        s: &mut HttpSession,
        from: Instant,
        open: Option<(Instant, Instant)>,
    ) -> Result<(), Failed> {
        let t = ctx.pick();
        s.one(ctx, t, from, t.name, open).await
    }
}

/// `handshake`, `session_churn`: a fresh session each iteration; `session_churn` DELETEs
/// `churn_delete_share` of them (an accumulator, as the Python user does) and abandons the rest.
struct Fresh {
    delete_acc: f64,
}

impl Iteration for Fresh {
    const KEEPS_SESSION: bool = false;

    async fn iterate(&mut self, ctx: &Ctx, s: &mut HttpSession, from: Instant, _open_model: bool) {
        if !s.open(ctx, from, false).await {
            ctx.iteration_done();
            ctx.pause(BACKOFF).await;
            return;
        }
        let call_ok = if ctx.cfg().handshake_call {
            let t = &ctx.items[0];
            s.one(ctx, t, Instant::now(), FixedRow::First.id(), None)
                .await
                .is_ok()
        } else {
            true
        };
        let delete = match ctx.cfg().family {
            Family::SessionChurn => {
                self.delete_acc += ctx.cfg().churn_delete_share;
                if self.delete_acc >= 1.0 {
                    self.delete_acc -= 1.0;
                    true
                } else {
                    false
                }
            }
            _ => true,
        };
        let complete = if delete {
            s.delete(ctx).await && call_ok
        } else {
            s.forget(); // abandoned: the server keeps it until its own timeout
            call_ok
        };
        if complete && ctx.cfg().cycle_latency {
            ctx.record(FixedRow::Cycle, from, Instant::now(), None, 0);
        }
        ctx.iteration_done();
    }
}

/// `discover`: one fresh start each iteration, the eras in turn (2026-07-28 first):
/// `server/discover`, or `initialize` + `notifications/initialized`; then the first call;
/// `start:<era>` from `from` to the call's result (complete starts only). A handshake session
/// is then DELETEd.
struct Discover;

impl Iteration for Discover {
    const KEEPS_SESSION: bool = false;

    async fn iterate(&mut self, ctx: &Ctx, s: &mut HttpSession, from: Instant, _open_model: bool) {
        discover_turn(ctx, s, from).await;
        ctx.iteration_done();
    }
}

async fn discover_turn(ctx: &Ctx, s: &mut HttpSession, from: Instant) {
    let stateless = s.switch_era();
    let (call, start) = if stateless {
        (&ctx.items[1], FixedRow::StartDiscover)
    } else {
        (&ctx.items[0], FixedRow::StartInitialize)
    };
    if !s.open(ctx, from, false).await {
        ctx.pause(BACKOFF).await;
        return;
    }
    if s.one(ctx, call, Instant::now(), call.name, None)
        .await
        .is_ok()
    {
        ctx.record(start, from, Instant::now(), None, 0);
    }
    if stateless {
        s.forget();
    } else {
        s.delete(ctx).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;
    use crate::config::Settings;
    use crate::context::Ctx;
    use crate::families::iterate;
    use crate::shared::Counters;
    use crate::testing::{self, count, mcp, reasons, response, settings, Answer, Seen, Server};

    /// An MCP server that mints a new session id (`s-1`, `s-2`...) at each initialize.
    fn minting() -> impl FnMut(&Seen) -> Answer + Send {
        let mut sessions = 0;
        move |seen| {
            if seen.what() == "initialize" {
                sessions += 1;
            }
            mcp(seen, &format!("s-{sessions}"))
        }
    }

    fn counter(ctx: &Ctx, which: fn(&Counters) -> &std::sync::atomic::AtomicU64) -> u64 {
        which(ctx.counters()).load(Ordering::Relaxed)
    }

    /// Run the user loop of slot 0 until `iterations` have ended, then retire the slot.
    async fn until_retired<I: Iteration>(ctx: &Ctx, it: I, iterations: u64) {
        let s = HttpSession::new(ctx);
        let retire = async {
            while counter(ctx, |c| &c.iterations) < iterations {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            ctx.set_target(0);
        };
        tokio::join!(user_loop(ctx, 0, s, it), retire);
    }

    #[test]
    fn a_user_opens_its_session_once_calls_and_deletes_it_when_retired() {
        let server = Server::start(minting());
        let ctx = testing::ctx(Settings {
            iterations: Some(3),
            ..settings(&server)
        });
        testing::run(until_retired(&ctx, PerSession::new(Request), 3));
        assert_eq!(
            server.whats(),
            [
                "initialize",
                "notifications/initialized",
                "tools/call",
                "tools/call",
                "tools/call",
                "DELETE"
            ]
        );
        assert!(server.seen()[1..]
            .iter()
            .all(|r| r.header("Mcp-Session-Id") == Some("s-1") && r.conn == 0));
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "tools/call:echo"), (3, 0));
        assert_eq!(count(&rows, "DELETE"), (1, 0));
        assert_eq!(counter(&ctx, |c| &c.iterations), 3);
        assert_eq!(counter(&ctx, |c| &c.established), 1);
        // the user is done: its session and connection are counted out
        assert_eq!(counter(&ctx, |c| &c.sessions_open), 0);
        assert_eq!(counter(&ctx, |c| &c.connections), 1);
    }

    #[test]
    fn a_session_the_server_forgot_is_opened_again_and_counted() {
        let mut mint = minting();
        let mut calls = 0;
        let server = Server::start(move |seen| {
            if seen.what() == "tools/call" {
                calls += 1;
                if calls == 2 {
                    return Answer::Reply(response(404, "", ""));
                }
            }
            mint(seen)
        });
        let ctx = testing::ctx(settings(&server));
        iterate(&ctx, PerSession::new(Request), 3);
        assert_eq!(
            server.whats(),
            [
                "initialize",
                "notifications/initialized",
                "tools/call",
                "tools/call",
                "initialize",
                "notifications/initialized",
                "tools/call"
            ]
        );
        let seen = server.seen();
        let sessions: Vec<Option<&str>> = seen.iter().map(|r| r.header("Mcp-Session-Id")).collect();
        let (one, two) = (Some("s-1"), Some("s-2"));
        assert_eq!(sessions, [None, one, one, one, None, two, two]);
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "tools/call:echo"), (3, 1));
        assert_eq!(reasons(&rows, "tools/call:echo"), ["http 404"]);
        assert_eq!(counter(&ctx, |c| &c.reinitialized), 1);
        assert_eq!(counter(&ctx, |c| &c.established), 2);
        assert_eq!(counter(&ctx, |c| &c.iterations), 3);
    }

    #[test]
    fn a_refused_open_backs_off_and_ends_its_iteration() {
        let server = Server::start(|_| Answer::Reply(response(503, "", "")));
        let ctx = testing::ctx(settings(&server));
        let took = testing::run(async {
            let mut s = HttpSession::new(&ctx);
            let t0 = Instant::now();
            PerSession::new(Request)
                .iterate(&ctx, &mut s, t0, false)
                .await;
            assert!(!s.is_open());
            t0.elapsed()
        });
        assert!(took >= BACKOFF, "{took:?}");
        assert_eq!(server.whats(), ["initialize"]);
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "initialize"), (1, 1));
        assert_eq!(reasons(&rows, "initialize"), ["http 503"]);
        assert_eq!(count(&rows, "tools/call:echo"), (0, 0));
        assert_eq!(counter(&ctx, |c| &c.iterations), 1);
    }

    #[test]
    fn a_retry_after_is_waited_before_the_next_request_when_asked() {
        for retry_after in [true, false] {
            let mut calls = 0;
            let server = Server::start(move |seen| {
                if seen.what() == "tools/call" {
                    calls += 1;
                    if calls == 1 {
                        return Answer::Reply(response(429, "Retry-After: 1\r\n", ""));
                    }
                }
                mcp(seen, "s-1")
            });
            let ctx = testing::ctx(Settings {
                iterations: Some(2),
                retry_after,
                ..settings(&server)
            });
            let t0 = Instant::now();
            testing::run(until_retired(&ctx, PerSession::new(Request), 2));
            let took = t0.elapsed();
            let rows = testing::rows(&ctx);
            assert_eq!(count(&rows, "tools/call:echo"), (2, 1));
            if retry_after {
                assert!(took >= Duration::from_secs(1), "{took:?}");
                assert_eq!(count(&rows, "Retry-After wait"), (1, 0));
            } else {
                assert_eq!(count(&rows, "Retry-After wait"), (0, 0));
            }
        }
    }

    #[test]
    fn churn_deletes_its_share_of_fresh_sessions_and_abandons_the_rest() {
        let server = Server::start(minting());
        let ctx = testing::ctx(Settings {
            family: Family::SessionChurn,
            churn_delete_share: 0.5,
            cycle_latency: true,
            ..settings(&server)
        });
        iterate(&ctx, Fresh { delete_acc: 0.0 }, 4);
        let cycle = ["initialize", "notifications/initialized", "tools/call"];
        let mut want: Vec<&str> = Vec::new();
        for n in 1..=4 {
            want.extend(cycle);
            if n % 2 == 0 {
                want.push("DELETE");
            }
        }
        assert_eq!(server.whats(), want);
        let deleted: Vec<_> = server
            .seen()
            .iter()
            .filter(|r| r.what() == "DELETE")
            .map(|r| r.header("Mcp-Session-Id").map(str::to_owned))
            .collect();
        assert_eq!(deleted, [Some("s-2".into()), Some("s-4".into())]);
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "tools/call:echo (first)"), (4, 0));
        assert_eq!(count(&rows, "DELETE"), (2, 0));
        // complete cycles: the abandoned ones too (their call succeeded)
        assert_eq!(count(&rows, "cycle"), (4, 0));
        assert_eq!(counter(&ctx, |c| &c.iterations), 4);
    }

    #[test]
    fn a_handshake_cycle_without_its_call_deletes_every_session() {
        let server = Server::start(minting());
        let ctx = testing::ctx(Settings {
            family: Family::Handshake,
            handshake_call: false,
            ..settings(&server)
        });
        iterate(&ctx, Fresh { delete_acc: 0.0 }, 2);
        assert_eq!(
            server.whats(),
            [
                "initialize",
                "notifications/initialized",
                "DELETE",
                "initialize",
                "notifications/initialized",
                "DELETE"
            ]
        );
    }

    #[test]
    fn discover_alternates_a_stateless_start_and_a_handshake() {
        let server = Server::start(minting());
        let ctx = testing::ctx(Settings {
            family: Family::Discover,
            ..settings(&server)
        });
        iterate(&ctx, Discover, 2);
        assert_eq!(
            server.whats(),
            [
                "server/discover",
                "tools/call",
                "initialize",
                "notifications/initialized",
                "tools/call",
                "DELETE"
            ]
        );
        let seen = server.seen();
        assert_eq!(seen[1].header("MCP-Protocol-Version"), Some("2026-07-28"));
        assert_eq!(seen[1].header("Mcp-Session-Id"), None);
        assert_eq!(seen[4].header("MCP-Protocol-Version"), Some("2025-11-25"));
        assert_eq!(seen[4].header("Mcp-Session-Id"), Some("s-1"));
        let rows = testing::rows(&ctx);
        for name in [
            "start:discover",
            "start:initialize",
            "tools/call:echo (first after discover)",
            "tools/call:echo (first after initialize)",
        ] {
            assert_eq!(count(&rows, name), (1, 0), "{name}");
        }
    }
}
