//! `tasks` (`io.modelcontextprotocol/tasks`, 2026-07-28): each call of `tool` that returns a
//! task (`resultType: "task"`) is polled with `tasks/get` every `pollIntervalMs` (the server's
//! hint, within 5 ms..5 s) until its status is `completed`, `failed` or `cancelled` (at most
//! [`MAX_POLLS`] polls); `tasks_cancel_share` of the tasks get a `tasks/cancel` after their first
//! poll. Rows: `tools/call:<tool>`, `tasks/get`, `tasks/cancel`, and the task's end from its
//! call's send: `task:completed`, `task:cancelled`, `task:failed` (failed: status failed, a
//! completed task with `isError`, or no end within the polls), `task:not-a-task` (failed: the
//! server answered plainly). A task in flight at the stop is left without an end row.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{user_loop, Call, PerSession};
use crate::context::Ctx;
use crate::rows::FixedRow;
use crate::session::{Failed, HttpSession};
use crate::templates::Template;

const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];
/// A task that never ends is a failure, not a hang.
const MAX_POLLS: u32 = 10_000;
const MIN_POLL: Duration = Duration::from_millis(5);
const MAX_POLL: Duration = Duration::from_secs(5);
/// The poll interval when the server gives none.
const DEFAULT_POLL_MS: f64 = 100.0;

/// One user of the family (the runtime's entry into it): one session, a task per iteration.
pub(crate) async fn run(ctx: &Ctx, slot: usize) {
    let s = HttpSession::new(ctx);
    user_loop(ctx, slot, s, PerSession::new(Task)).await;
}

/// A task: its call, polls, maybe a cancel, and its end.
struct Task;

impl Call for Task {
    async fn call(
        &mut self,
        ctx: &Ctx,
        s: &mut HttpSession,
        from: Instant,
        _open: Option<(Instant, Instant)>,
    ) -> Result<(), Failed> {
        run_task(s, ctx, from).await
    }
}

/// The `result` of the JSON reply the session's last exchange got (Null when it has none).
fn result_of(s: &HttpSession) -> Value {
    serde_json::from_slice::<Value>(s.reply_body())
        .ok()
        .and_then(|mut v| v.get_mut("result").map(Value::take))
        .unwrap_or(Value::Null)
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// `method` (`tasks/get`, `tasks/cancel`) for `task_id`, recorded as `row`; its result.
async fn on_task(
    s: &mut HttpSession,
    ctx: &Ctx,
    method: &str,
    task_id: &str,
    row: FixedRow,
) -> Result<Value, Failed> {
    let params = serde_json::json!({ "taskId": task_id }).to_string();
    // the task id is the request's Mcp-Name (SEP-2243)
    let t = Template::new(
        true,
        ctx.cfg(),
        method,
        Some(&params),
        Some(task_id),
        row.id(),
        false,
    );
    s.one(ctx, &t, Instant::now(), row.id(), None).await?;
    Ok(result_of(s))
}

/// One task: the call from `from`, its polls, maybe its cancel, and its end.
async fn run_task(s: &mut HttpSession, ctx: &Ctx, from: Instant) -> Result<(), Failed> {
    let call = &ctx.items[0];
    s.one(ctx, call, from, call.name, None).await?;
    let mut result = result_of(s);
    let task_id = match (text(&result, "resultType"), text(&result, "taskId")) {
        (Some("task"), Some(id)) => id.to_owned(),
        _ => {
            let reason = "the server answered without a task";
            ctx.record(
                FixedRow::TaskNotATask,
                from,
                Instant::now(),
                Some(reason),
                0,
            );
            return Ok(());
        }
    };
    let cancel = ctx.unit() <= ctx.cfg().tasks_cancel_share;
    let mut status = text(&result, "status").unwrap_or("").to_owned();
    let mut polls = 0;
    while !TERMINAL.contains(&status.as_str()) {
        if polls == MAX_POLLS {
            let reason = format!("still {status} after {MAX_POLLS} polls");
            ctx.record(FixedRow::TaskFailed, from, Instant::now(), Some(&reason), 0);
            return Ok(());
        }
        if ctx.shared.stopping() {
            return Ok(()); // left at the stop: no end to time
        }
        let ms = result
            .get("pollIntervalMs")
            .and_then(Value::as_f64)
            .unwrap_or(DEFAULT_POLL_MS);
        let wait = Duration::from_secs_f64((ms / 1000.0).max(0.0)).clamp(MIN_POLL, MAX_POLL);
        ctx.pause(wait).await;
        result = on_task(s, ctx, "tasks/get", &task_id, FixedRow::TasksGet).await?;
        polls += 1;
        status = text(&result, "status").unwrap_or("").to_owned();
        if cancel && polls == 1 && !TERMINAL.contains(&status.as_str()) {
            on_task(s, ctx, "tasks/cancel", &task_id, FixedRow::TasksCancel).await?;
        }
    }
    let end = Instant::now();
    let is_error = result
        .get("result")
        .and_then(|r| r.get("isError"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match status.as_str() {
        "completed" if !is_error => ctx.record(FixedRow::TaskCompleted, from, end, None, 0),
        "cancelled" => ctx.record(FixedRow::TaskCancelled, from, end, None, 0),
        _ => {
            let with = if status == "completed" {
                " with isError"
            } else {
                ""
            };
            let reason = format!("task {status}{with}");
            ctx.record(FixedRow::TaskFailed, from, end, Some(&reason), 0);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::{Family, Settings};
    use crate::families::iterate;
    use crate::testing::{
        self, count, mcp, reasons, response, result, Answer, Recorded, Seen, Server,
    };

    /// A 2026-07-28 server whose tool answers `call` and whose `tasks/get` answers the statuses
    /// of `polls` in turn (each a task's result); `tasks/cancel` is acknowledged.
    fn tasks(call: Value, polls: Vec<Value>) -> impl FnMut(&Seen) -> Answer + Send {
        let mut polled = 0;
        move |seen| match seen.what().as_str() {
            "tools/call" => Answer::Reply(response(200, "", &result(seen, call.clone()))),
            "tasks/get" => {
                let r = polls[polled.min(polls.len() - 1)].clone();
                polled += 1;
                Answer::Reply(response(200, "", &result(seen, r)))
            }
            "tasks/cancel" => Answer::Reply(response(200, "", &result(seen, json!({})))),
            _ => mcp(seen, ""),
        }
    }

    fn task(status: &str) -> Value {
        json!({"resultType": "task", "taskId": "t-1", "status": status, "pollIntervalMs": 5})
    }

    /// One iteration of the family against `server`: (what was asked, the rows).
    fn one_task(server: &Server, cancel_share: f64) -> Vec<Recorded> {
        let ctx = testing::ctx(Settings {
            protocol_version: "2026-07-28".into(),
            family: Family::Tasks,
            tasks_cancel_share: cancel_share,
            ..testing::settings(server)
        });
        iterate(&ctx, PerSession::new(Task), 1);
        testing::rows(&ctx)
    }

    #[test]
    fn a_task_is_polled_until_it_ends() {
        let done = json!({"resultType": "task", "taskId": "t-1", "status": "completed", "result": {"content": []}});
        let server = Server::start(tasks(task("working"), vec![task("working"), done]));
        let rows = one_task(&server, 0.0);
        assert_eq!(
            server.whats(),
            ["server/discover", "tools/call", "tasks/get", "tasks/get"]
        );
        // each poll names its task
        let seen = server.seen();
        assert!(seen[2..]
            .iter()
            .all(|r| r.body["params"]["taskId"] == "t-1" && r.header("Mcp-Name") == Some("t-1")));
        assert_eq!(count(&rows, "tasks/get"), (2, 0));
        assert_eq!(count(&rows, "task:completed"), (1, 0));
    }

    #[test]
    fn a_task_is_cancelled_after_its_first_poll_when_drawn() {
        let server = Server::start(tasks(
            task("working"),
            vec![task("working"), task("cancelled")],
        ));
        let rows = one_task(&server, 1.0);
        assert_eq!(
            server.whats(),
            [
                "server/discover",
                "tools/call",
                "tasks/get",
                "tasks/cancel",
                "tasks/get"
            ]
        );
        assert_eq!(count(&rows, "tasks/cancel"), (1, 0));
        assert_eq!(count(&rows, "task:cancelled"), (1, 0));
    }

    #[test]
    fn how_a_task_fails_is_named() {
        let failed_with_error = json!({"resultType": "task", "taskId": "t-1", "status": "completed", "result": {"isError": true}});
        for (call, polls, row, reason) in [
            (
                json!({"content": []}),
                vec![],
                "task:not-a-task",
                "the server answered without a task",
            ),
            (task("failed"), vec![], "task:failed", "task failed"),
            (
                task("working"),
                vec![failed_with_error],
                "task:failed",
                "task completed with isError",
            ),
        ] {
            let polls = if polls.is_empty() {
                vec![call.clone()]
            } else {
                polls
            };
            let server = Server::start(tasks(call, polls));
            let rows = one_task(&server, 0.0);
            assert_eq!(count(&rows, row), (1, 1), "{reason}: {rows:?}");
            assert_eq!(reasons(&rows, row), [reason]);
            assert_eq!(count(&rows, "tools/call:echo"), (1, 0), "{reason}");
        }
    }
}
