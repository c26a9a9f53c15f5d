//! `agents`: each user is an agent as a production MCP server sees one. It arrives after an
//! idle gap, opens a session (`initialize` + `notifications/initialized`, or the 2026-07-28
//! start), lists the tools, then takes its steps (the `mix`: in order, or sampled by weight),
//! each after a think time; it ends the session with DELETE or abandons it (a share), rests
//! an idle gap and starts again. A share of the agents holds a stream for each session's life
//! ([`super::held`]).
//!
//! Most agents are resting at any instant: each is one task of its thread's runtime, resting
//! on the runtime's timer ([`Ctx::rest`]), with its buffers given back while it rests
//! ([`HttpSession::shrink`]); its connection stays, as a real client's does.
//!
//! A step may send a value taken from an earlier step's result in the same session (a JSON
//! pointer into its `structuredContent`, or a regular expression on its text): the values are
//! read when that step's result arrives, and a step whose value is missing fails under its own
//! row, naming the value, without being sent.
//!
//! Figures besides the requests' rows: `agent:think` and `agent:idle` (the time actually
//! rested), `agent:session` (a session's start to its end), `agent:steps` (steps per session,
//! a count), `agent:first-result` (a session's start to its first tool result). A session cut
//! short by the stop or the agent's retirement still ends (DELETE, or abandoned), but is not in
//! `agent:session` and `agent:steps`: those are the sessions agents finished.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::held::held_stream;
use crate::config::{Extractor, StepOrder};
use crate::context::{Ctx, BACKOFF, TICK};
use crate::rows::FixedRow;
use crate::session::HttpSession;

/// Longest pause after sessions that could not be opened (the pause doubles from
/// [`BACKOFF`] with each one): a server refusing past some count is not asked ever faster.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// One agent (the runtime's entry into this family).
pub(crate) async fn run(ctx: &Rc<Ctx>, slot: usize) {
    let counters = ctx.counters();
    counters.agents.fetch_add(1, Ordering::Relaxed);
    let mut s = HttpSession::new(ctx);
    if holds_stream(ctx.cfg().agent.hold_stream, slot) {
        let rx = s.publish_held_stream();
        tokio::join!(live(ctx, slot, s), held_stream(ctx, rx));
    } else {
        live(ctx, slot, s).await;
    }
    counters.agents.fetch_sub(1, Ordering::Relaxed);
}

/// Whether the agent in `slot` holds a stream: `share` of the slots, spread evenly (slot k
/// holds one when the count of holders up to it goes up).
fn holds_stream(share: f64, slot: usize) -> bool {
    ((slot + 1) as f64 * share).floor() > (slot as f64 * share).floor()
}

/// What a value of a use is, in the session so far.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Known {
    /// The step it comes from has not run in this session.
    NotRun,
    /// That step failed.
    Failed,
    /// That step's result has no such value.
    Missing,
    /// JSON text.
    Value(String),
}

/// One agent's state across its sessions.
struct Agent {
    /// `values[i][k]`: the value of use `k` of step `i`, in this session.
    values: Vec<Vec<Known>>,
    /// The share of the sessions abandoned, as an accumulator (exact over any run).
    abandon_acc: f64,
    /// The pause after the next session that cannot be opened.
    backoff: Duration,
}

/// How a session went.
enum Ended {
    /// It was opened (and ended, however it ended).
    Opened,
    /// It could not be opened.
    Refused,
}

/// The agent's sessions, each after an idle gap, until its slot is retired or the engine stops.
async fn live(ctx: &Ctx, slot: usize, mut s: HttpSession) {
    let cfg = ctx.cfg();
    let mut agent = Agent {
        values: cfg
            .mix
            .iter()
            .map(|m| vec![Known::NotRun; m.uses.len()])
            .collect(),
        abandon_acc: 0.0,
        backoff: BACKOFF,
    };
    // the first session after an idle gap too: a population of agents in its steady state,
    // not all of them starting at once
    let mut rested = ctx.rest(slot, ctx.draw(&cfg.agent.idle)).await;
    while rested {
        if let Some(wait) = s.take_retry_wait() {
            if cfg.retry_after {
                let t0 = Instant::now();
                if !ctx.rest(slot, wait).await {
                    break;
                }
                ctx.record(FixedRow::RetryWait, t0, Instant::now(), None, 0);
            }
        }
        if !ctx.shared.take_iteration() {
            // the sessions are spent: idle until retired or stopped
            rested = ctx.rest(slot, TICK).await;
            continue;
        }
        let ended = session(ctx, slot, &mut s, &mut agent).await;
        ctx.iteration_done();
        s.shrink();
        match ended {
            Ended::Refused => {
                rested = ctx.rest(slot, agent.backoff).await;
                agent.backoff = (agent.backoff * 2).min(MAX_BACKOFF);
            }
            Ended::Opened => {
                agent.backoff = BACKOFF;
                let t0 = Instant::now();
                rested = ctx.rest(slot, ctx.draw(&cfg.agent.idle)).await;
                if rested {
                    ctx.record(FixedRow::AgentIdle, t0, Instant::now(), None, 0);
                }
            }
        }
    }
    s.end_held_stream();
    ctx.tally(s.conn());
}

/// One session: opened, its tools listed, its steps taken with a think time before each,
/// then DELETEd or abandoned (also when the agent is retired or the engine stops during it:
/// a client that closes ends its session).
async fn session(ctx: &Ctx, slot: usize, s: &mut HttpSession, agent: &mut Agent) -> Ended {
    let cfg = ctx.cfg();
    let plan = &cfg.agent;
    let t0 = Instant::now();
    if !s.open(ctx, t0, false).await {
        return Ended::Refused;
    }
    let counters = ctx.counters();
    counters.sessions_open.fetch_add(1, Ordering::Relaxed);
    s.hold(ctx);
    for values in &mut agent.values {
        values.fill(Known::NotRun);
    }
    let mut lost = false;
    if plan.list_tools {
        let r = s
            .one(
                ctx,
                &ctx.list,
                Instant::now(),
                FixedRow::AgentList.id(),
                None,
            )
            .await;
        lost = r.is_err_and(|f| f.lost_session);
    }
    let planned = match plan.order {
        StepOrder::Sequence => cfg.mix.len() as u32,
        StepOrder::Weighted => ctx.between(plan.steps.0, plan.steps.1),
    };
    let mut steps = 0u64;
    let mut first_result = false;
    // the agent retired or the engine stopping cut the session short: it ends, but its length
    // and steps are not the agent's (a figure of cut sessions would favour the short ones)
    let mut cut = false;
    for n in 0..planned {
        if lost {
            break;
        }
        let t = Instant::now();
        if !ctx.rest(slot, ctx.draw(&plan.think)).await {
            cut = true;
            break;
        }
        ctx.record(FixedRow::AgentThink, t, Instant::now(), None, 0);
        let i = match plan.order {
            StepOrder::Sequence => n as usize,
            StepOrder::Weighted => ctx.pick_index(),
        };
        steps += 1;
        match step(ctx, s, agent, i).await {
            Step::Ok if !first_result && cfg.mix[i].method == "tools/call" => {
                first_result = true;
                ctx.record(FixedRow::AgentFirstResult, t0, Instant::now(), None, 0);
            }
            Step::Lost => lost = true,
            _ => {}
        }
        s.shrink();
    }
    s.unhold();
    agent.abandon_acc += plan.abandon;
    let abandon = agent.abandon_acc >= 1.0;
    if abandon {
        agent.abandon_acc -= 1.0;
    }
    if lost || abandon || ctx.shared.past_deadline() {
        s.forget(); // lost, or abandoned: the server keeps it until its own timeout
    } else {
        s.delete(ctx).await;
    }
    counters.sessions_open.fetch_sub(1, Ordering::Relaxed);
    if !cut {
        ctx.record(FixedRow::AgentSession, t0, Instant::now(), None, 0);
        if steps > 0 {
            ctx.record_value(FixedRow::AgentSteps, steps);
        }
    }
    Ended::Opened
}

/// How a step went.
enum Step {
    Ok,
    /// It failed (a value it needs was missing, or its request failed).
    Failed,
    /// The server forgot the session (404).
    Lost,
}

/// Step `i`: its uses' values filled in (a missing one fails it by name, unsent), sent, and
/// the values later steps take from its result read.
async fn step(ctx: &Ctx, s: &mut HttpSession, agent: &mut Agent, i: usize) -> Step {
    let cfg = ctx.cfg();
    let request = &cfg.mix[i];
    let t = &ctx.items[i];
    s.fill.clear();
    for (u, known) in request.uses.iter().zip(&agent.values[i]) {
        let source = &cfg.mix[u.step].label;
        let why = match known {
            Known::Value(v) => {
                s.fill.push(v.clone());
                continue;
            }
            Known::NotRun => format!("step {source} has not run in this session"),
            Known::Failed => format!("step {source} failed"),
            Known::Missing => format!("step {source} gave no {}", u.extract.describe()),
        };
        let now = Instant::now();
        ctx.record(
            t.name,
            now,
            now,
            Some(&format!("no value for {}: {why}", u.at)),
            0,
        );
        return Step::Failed;
    }
    let r = s.one(ctx, t, Instant::now(), t.name, None).await;
    s.fill.clear();
    let result = match &r {
        Ok(()) if request.read_by_uses => s
            .last_result()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok()),
        _ => None,
    };
    if request.read_by_uses {
        for (j, later) in cfg.mix.iter().enumerate() {
            for (k, u) in later.uses.iter().enumerate().filter(|(_, u)| u.step == i) {
                agent.values[j][k] = match (&r, &result) {
                    (Err(_), _) => Known::Failed,
                    (Ok(()), Some(result)) => {
                        extract(result, &u.extract).map_or(Known::Missing, Known::Value)
                    }
                    (Ok(()), None) => Known::Missing,
                };
            }
        }
    }
    match r {
        Ok(()) => Step::Ok,
        Err(f) if f.lost_session => {
            s.forget();
            Step::Lost
        }
        Err(_) => Step::Failed,
    }
}

/// A value out of a tools/call result (any result: a JSON pointer reads into it when it has
/// no `structuredContent`), as JSON text: a pointer into its `structuredContent` (or, without
/// one, into its first text item parsed as JSON), or a regular expression's first group (or
/// whole match) on its text items joined by newlines, as a JSON string.
fn extract(result: &Value, how: &Extractor) -> Option<String> {
    let texts = || {
        result
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|c| c.get("text").and_then(Value::as_str))
    };
    match how {
        Extractor::Pointer(p) => match result.get("structuredContent") {
            Some(structured) => structured.pointer(p).map(Value::to_string),
            None => {
                let first: Value = serde_json::from_str(texts().next()?).ok()?;
                first.pointer(p).map(Value::to_string)
            }
        },
        Extractor::Regex(re) => {
            let text = texts().collect::<Vec<_>>().join("\n");
            let found = re.captures(&text)?;
            let m = found.get(1).or_else(|| found.get(0))?;
            Some(Value::String(m.as_str().to_owned()).to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Extract, MixCall, MixItem, Settings, Use};
    use crate::testing::{self, count, mcp, reasons, response, settings, Answer, Seen, Server};
    use serde_json::json;

    #[test]
    fn a_share_of_the_slots_holds_a_stream() {
        for share in [0.0, 0.25, 0.5, 1.0] {
            let held = (0..1000).filter(|s| holds_stream(share, *s)).count();
            assert_eq!(held as f64, 1000.0 * share, "{share}");
        }
        let first: Vec<bool> = (0..4).map(|s| holds_stream(0.5, s)).collect();
        assert_eq!(
            first,
            [false, true, false, true],
            "spread, not the first half"
        );
    }

    #[test]
    fn values_come_out_of_results() {
        let result = json!({
            "content": [{"type": "text", "text": "created item-42"}, {"type": "image", "data": "x"}],
            "structuredContent": {"item": {"id": "item-42", "n": 7}},
        });
        let pointer = |p: &str| Extractor::Pointer(p.into());
        let regex = |r: &str| Extractor::Regex(regex::Regex::new(r).expect("regex"));
        assert_eq!(
            extract(&result, &pointer("/item/id")).as_deref(),
            Some("\"item-42\"")
        );
        assert_eq!(extract(&result, &pointer("/item/n")).as_deref(), Some("7"));
        assert_eq!(extract(&result, &pointer("/item/nope")), None);
        assert_eq!(
            extract(&result, &regex(r"item-(\d+)")).as_deref(),
            Some("\"42\"")
        );
        assert_eq!(
            extract(&result, &regex(r"item-\d+")).as_deref(),
            Some("\"item-42\"")
        );
        assert_eq!(extract(&result, &regex("absent")), None);
        // without structuredContent, a pointer reads the first text item as JSON
        let text_only = json!({"content": [{"type": "text", "text": "{\"id\": 5}"}]});
        assert_eq!(extract(&text_only, &pointer("/id")).as_deref(), Some("5"));
        assert_eq!(extract(&json!({"content": []}), &pointer("/id")), None);
    }

    fn tool(name: &str, arguments: Value) -> MixItem {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object")
        };
        MixItem::new(
            MixCall::Tool {
                name: name.into(),
                arguments,
            },
            1,
        )
    }

    fn pointer(at: &str, step: usize, p: &str) -> Use {
        Use {
            at: at.into(),
            step,
            extract: Extract::Pointer(p.into()),
        }
    }

    /// A server whose `create` returns `{"id": "i-<n>"}` as structured content (without the id
    /// when `with_id` is false), its other tools an empty result; sessions `s-1`, `s-2`...
    fn items_server(with_id: bool) -> Server {
        let mut sessions = 0;
        let mut created = 0;
        Server::start(move |seen: &Seen| match seen.what().as_str() {
            "initialize" => {
                sessions += 1;
                mcp(seen, &format!("s-{sessions}"))
            }
            "tools/call" if seen.body["params"]["name"] == "create" => {
                created += 1;
                let structured = if with_id {
                    json!({"id": format!("i-{created}")})
                } else {
                    json!({"other": 1})
                };
                let body = testing::result(
                    seen,
                    json!({"content": [], "structuredContent": structured}),
                );
                Answer::Reply(response(200, "", &body))
            }
            _ => mcp(seen, &format!("s-{sessions}")),
        })
    }

    fn chained(server: &Server, sessions: u64) -> Settings {
        Settings {
            family: crate::config::Family::Agents,
            think: "constant:0".into(),
            idle: Some("constant:0".into()),
            iterations: Some(sessions),
            mix: vec![
                MixItem {
                    label: Some("create".into()),
                    ..tool("create", json!({"title": "t"}))
                },
                MixItem {
                    uses: vec![pointer("/arguments/id", 0, "/id")],
                    ..tool("get", json!({"id": null}))
                },
                MixItem {
                    uses: vec![pointer("/arguments/id", 0, "/id")],
                    ..tool("delete", json!({"id": null, "hard": true}))
                },
            ],
            ..settings(server)
        }
    }

    /// Run agent slot 0 until `sessions` sessions have ended, then retire it.
    fn run_agent(ctx: &Rc<Ctx>, sessions: u64) {
        testing::run(async {
            ctx.set_target(1);
            let retire = async {
                while ctx.counters().iterations.load(Ordering::Relaxed) < sessions {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                // the budget is spent: the agent rests; retiring it ends it
                ctx.set_target(0);
            };
            tokio::join!(run(ctx, 0), retire);
        });
    }

    #[test]
    fn a_session_lists_then_chains_its_steps_and_ends_with_delete() {
        let server = items_server(true);
        let ctx = testing::ctx(chained(&server, 2));
        run_agent(&ctx, 2);
        let one = [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call",
            "tools/call",
            "DELETE",
        ];
        assert_eq!(server.whats(), [one, one].concat());
        let seen = server.seen();
        // each session's get and delete carry the id its own create returned
        for (at, id) in [(4, "i-1"), (5, "i-1"), (11, "i-2"), (12, "i-2")] {
            assert_eq!(seen[at].body["params"]["arguments"]["id"], id, "{at}");
        }
        assert_eq!(seen[5].body["params"]["arguments"]["hard"], true);
        assert_eq!(
            seen[7].header("Mcp-Session-Id"),
            None,
            "the second session starts afresh"
        );
        assert_eq!(seen[8].header("Mcp-Session-Id"), Some("s-2"));
        let rows = testing::rows(&ctx);
        for name in [
            "tools/list",
            "tools/call:create",
            "tools/call:get",
            "tools/call:delete",
        ] {
            assert_eq!(count(&rows, name), (2, 0), "{name}");
        }
        assert_eq!(count(&rows, "DELETE"), (2, 0));
        assert_eq!(count(&rows, "agent:session"), (2, 0));
        assert_eq!(count(&rows, "agent:think"), (6, 0));
        assert_eq!(count(&rows, "agent:first-result"), (2, 0));
        let steps = rows
            .iter()
            .find(|r| r.name == "agent:steps")
            .expect("steps row");
        assert_eq!(
            steps.buckets,
            vec![(3, 2)],
            "3 steps per session, as a count"
        );
        assert_eq!(ctx.counters().agents.load(Ordering::Relaxed), 0);
        assert_eq!(ctx.counters().sessions_open.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_missing_value_fails_its_step_by_name_unsent() {
        let server = items_server(false);
        let ctx = testing::ctx(chained(&server, 1));
        run_agent(&ctx, 1);
        assert_eq!(
            server.whats(),
            [
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/call",
                "DELETE"
            ],
            "get and delete are not sent"
        );
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "tools/call:create"), (1, 0));
        assert_eq!(count(&rows, "tools/call:get"), (1, 1));
        assert_eq!(
            reasons(&rows, "tools/call:get"),
            ["no value for /arguments/id: step create gave no structuredContent /id"]
        );
        // a failed source step names itself too
        let failing = Server::start(|seen: &Seen| {
            if seen.body["params"]["name"] == "create" {
                Answer::Reply(response(500, "", ""))
            } else {
                mcp(seen, "s-1")
            }
        });
        let ctx = testing::ctx(chained(&failing, 1));
        run_agent(&ctx, 1);
        let rows = testing::rows(&ctx);
        assert_eq!(reasons(&rows, "tools/call:create"), ["http 500"]);
        assert_eq!(
            reasons(&rows, "tools/call:delete"),
            ["no value for /arguments/id: step create failed"]
        );
    }

    #[test]
    fn in_2026_07_28_a_session_starts_with_discover_and_has_no_delete() {
        let server = items_server(true);
        let ctx = testing::ctx(Settings {
            protocol_version: "2026-07-28".into(),
            ..chained(&server, 1)
        });
        run_agent(&ctx, 1);
        assert_eq!(
            server.whats(),
            [
                "server/discover",
                "tools/list",
                "tools/call",
                "tools/call",
                "tools/call"
            ]
        );
        let seen = server.seen();
        assert_eq!(seen[3].body["params"]["arguments"]["id"], "i-1");
        assert_eq!(seen[3].header("Mcp-Name"), Some("get"));
        assert_eq!(count(&testing::rows(&ctx), "agent:session"), (1, 0));
    }

    #[test]
    fn an_agent_holding_a_stream_holds_its_sessions() {
        let server = items_server(true);
        let ctx = testing::ctx(Settings {
            agent_hold_stream: 1.0,
            think: "constant:0.05".into(),
            ..chained(&server, 1)
        });
        run_agent(&ctx, 1);
        let gets: Vec<_> = server
            .seen()
            .into_iter()
            .filter(|r| r.verb == "GET")
            .map(|r| (r.header("Mcp-Session-Id").map(str::to_owned), r.conn))
            .collect();
        // the session's stream, on a connection of its own
        assert!(!gets.is_empty(), "{:?}", server.whats());
        assert!(
            gets.iter()
                .all(|g| g.0.as_deref() == Some("s-1") && g.1 != 0),
            "{gets:?}"
        );
    }

    #[test]
    fn a_session_cut_short_ends_but_is_no_figure() {
        let server = items_server(true);
        let ctx = testing::ctx(Settings {
            think: "constant:5".into(),
            ..chained(&server, 1)
        });
        testing::run(async {
            let retire = async {
                while ctx.counters().sessions_open.load(Ordering::Relaxed) == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                ctx.set_target(0); // the agent rests its first think time: retired, it wakes
            };
            tokio::join!(run(&ctx, 0), retire);
        });
        assert_eq!(
            server.whats(),
            [
                "initialize",
                "notifications/initialized",
                "tools/list",
                "DELETE"
            ]
        );
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "DELETE"), (1, 0));
        assert_eq!(count(&rows, "agent:session"), (0, 0));
        assert_eq!(count(&rows, "agent:think"), (0, 0));
        assert_eq!(ctx.counters().sessions_open.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn abandoned_sessions_are_not_deleted_and_a_refused_start_backs_off() {
        let server = items_server(true);
        let ctx = testing::ctx(Settings {
            agent_abandon: 0.5,
            ..chained(&server, 4)
        });
        run_agent(&ctx, 4);
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "agent:session"), (4, 0));
        assert_eq!(
            count(&rows, "DELETE"),
            (2, 0),
            "half the sessions abandoned"
        );
        let refusing = Server::start(|_: &Seen| {
            Answer::Reply(response(
                503,
                "",
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"too many connections"}}"#,
            ))
        });
        let ctx = testing::ctx(chained(&refusing, 3));
        let t0 = Instant::now();
        run_agent(&ctx, 3);
        // the pauses double: 100 ms, then 200 ms before the third attempt
        assert!(t0.elapsed() >= BACKOFF * 3, "{:?}", t0.elapsed());
        let rows = testing::rows(&ctx);
        assert_eq!(count(&rows, "initialize"), (3, 3));
        assert_eq!(
            reasons(&rows, "initialize"),
            ["http 503 too many connections"]
        );
        assert_eq!(count(&rows, "agent:session"), (0, 0));
    }
}
