//! The stats rows an engine keeps: the fixed ones every engine has (ids `0..FixedRow::COUNT`,
//! in [`FixedRow::ALL`] order) and then one per distinct mix entry. Statistics index rows by
//! these ids, so the enum, its id order and its names live here only.

use crate::config::Config;

/// Declares `FixedRow` and `FixedRow::ALL` from one list, so the ids (the discriminants) and
/// the order of `ALL` cannot disagree.
macro_rules! fixed_rows {
    ($($(#[$doc:meta])* $variant:ident,)+) => {
        /// A row every engine has; `id()` is its index among the engine's names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub enum FixedRow {
            $($(#[$doc])* $variant,)+
        }

        impl FixedRow {
            /// Every fixed row, in id order.
            pub const ALL: &'static [FixedRow] = &[$(FixedRow::$variant,)+];
        }
    };
}

fixed_rows! {
    Initialize,
    Initialized,
    Discover,
    Delete,
    /// The family's tools/call (`tool`).
    Call,
    /// `handshake` / `session_churn`: the first tools/call of a session.
    First,
    /// `sse_streaming`'s tools/call (`stream_tool`).
    Stream,
    ProgressFirst,
    ProgressGap,
    SseFirst,
    SseGap,
    /// `cycle_latency`: a whole handshake / churn cycle.
    Cycle,
    /// `sse_streaming`'s standalone GET stream: opened (time to its first bytes), the gap
    /// before each event (since the previous one or the open), and a server that offers none
    /// (405).
    GetOpen,
    GetEvent,
    Get405,
    /// `sse_streaming` in 2026-07-28: the held `subscriptions/listen`, from its send to the
    /// server's acknowledgement.
    ListenAck,
    /// A new connection: the TCP connect, and the TLS handshake after it (`https`).
    Connect,
    Tls,
    /// `retry_after`: a wait a refusal's `Retry-After` asked for (the time actually waited).
    RetryWait,
    /// `hold` with streams: a `notifications/*/list_changed` on a held stream, from the
    /// trigger's send to its arrival; and the time to the last held stream's arrival, per round
    /// (failed: some stream missed it).
    HoldFanout,
    HoldFanoutAll,
    /// `discover`: the first call of a 2026-07-28 start and of a handshake-era one, and each
    /// start, from its first byte to the first call's result.
    FirstAfterDiscover,
    FirstAfterInitialize,
    StartDiscover,
    StartInitialize,
    /// `tasks`: each poll and cancel, and how each task ended, from its call's send to the
    /// poll that saw the end (`task:failed`, `task:not-a-task`: failures).
    TasksGet,
    TasksCancel,
    TaskCompleted,
    TaskCancelled,
    TaskFailed,
    TaskNotATask,
    /// `agents`: each session's `tools/list` (a mix row's too, when a step lists the tools).
    AgentList,
    /// `agents`, figures rather than requests: each think time and idle gap as slept, each
    /// session's length (its start to its end), its steps (a count, not µs), and the time from
    /// its start to its first tool result.
    AgentThink,
    AgentIdle,
    AgentSession,
    AgentSteps,
    AgentFirstResult,
}

impl FixedRow {
    /// How many fixed rows there are: the first mix row's id.
    pub const COUNT: usize = FixedRow::ALL.len();

    /// The row's index among the engine's names.
    pub const fn id(self) -> usize {
        self as usize
    }

    /// The fixed row with this id (None for a mix row's).
    pub fn from_id(id: usize) -> Option<FixedRow> {
        FixedRow::ALL.get(id).copied()
    }

    /// The row's name, as the Python users report it.
    pub fn name(self, cfg: &Config) -> String {
        let fixed = match self {
            FixedRow::Initialize => "initialize",
            FixedRow::Initialized => "notifications/initialized",
            FixedRow::Discover => "server/discover",
            FixedRow::Delete => "DELETE",
            FixedRow::Call => return format!("tools/call:{}", cfg.tool),
            FixedRow::First => return format!("tools/call:{} (first)", cfg.tool),
            FixedRow::Stream => return format!("tools/call:{}", cfg.stream_tool),
            FixedRow::ProgressFirst => "progress:first-event",
            FixedRow::ProgressGap => "progress:gap",
            FixedRow::SseFirst => "sse:first-event",
            FixedRow::SseGap => "sse:gap",
            FixedRow::Cycle => "cycle",
            FixedRow::GetOpen => "GET:open",
            FixedRow::GetEvent => "GET:event",
            FixedRow::Get405 => "GET:405",
            FixedRow::ListenAck => "subscriptions/listen:ack",
            FixedRow::Connect => "connect",
            FixedRow::Tls => "tls:handshake",
            FixedRow::RetryWait => "Retry-After wait",
            FixedRow::HoldFanout => "hold:fanout",
            FixedRow::HoldFanoutAll => "hold:fanout-all",
            FixedRow::FirstAfterDiscover => {
                return format!("tools/call:{} (first after discover)", cfg.tool)
            }
            FixedRow::FirstAfterInitialize => {
                return format!("tools/call:{} (first after initialize)", cfg.tool)
            }
            FixedRow::StartDiscover => "start:discover",
            FixedRow::StartInitialize => "start:initialize",
            FixedRow::TasksGet => "tasks/get",
            FixedRow::TasksCancel => "tasks/cancel",
            FixedRow::TaskCompleted => "task:completed",
            FixedRow::TaskCancelled => "task:cancelled",
            FixedRow::TaskFailed => "task:failed",
            FixedRow::TaskNotATask => "task:not-a-task",
            FixedRow::AgentList => "tools/list",
            FixedRow::AgentThink => "agent:think",
            FixedRow::AgentIdle => "agent:idle",
            FixedRow::AgentSession => "agent:session",
            FixedRow::AgentSteps => "agent:steps",
            FixedRow::AgentFirstResult => "agent:first-result",
        };
        fixed.to_string()
    }

    /// A row that times a request (counted as completed): not the events of a streaming reply,
    /// not a cycle (made of requests), not the opening of a connection, not a wait.
    pub fn is_request(self) -> bool {
        !matches!(
            self,
            FixedRow::ProgressFirst
                | FixedRow::ProgressGap
                | FixedRow::SseFirst
                | FixedRow::SseGap
                | FixedRow::Cycle
                | FixedRow::GetEvent
                | FixedRow::Connect
                | FixedRow::Tls
                | FixedRow::RetryWait
                | FixedRow::HoldFanout
                | FixedRow::HoldFanoutAll
                | FixedRow::StartDiscover
                | FixedRow::StartInitialize
                | FixedRow::TaskCompleted
                | FixedRow::TaskCancelled
                | FixedRow::TaskFailed
                | FixedRow::TaskNotATask
                | FixedRow::AgentThink
                | FixedRow::AgentIdle
                | FixedRow::AgentSession
                | FixedRow::AgentSteps
                | FixedRow::AgentFirstResult
        )
    }
}

impl From<FixedRow> for usize {
    fn from(row: FixedRow) -> usize {
        row.id()
    }
}

/// Whether the row with this id times a request (every mix row does).
pub(crate) fn is_request(id: usize) -> bool {
    FixedRow::from_id(id).is_none_or(FixedRow::is_request)
}

/// The row name of the `hold` trigger's call (a mix row's, when a mix entry calls it too).
pub(crate) fn trigger_name(tool: &str) -> String {
    format!("tools/call:{tool}")
}

/// The names of a config's rows, indexed by id: the fixed rows, then each distinct mix entry
/// (fixed at construction: statistics are indexed by them).
pub(crate) fn names(cfg: &Config) -> Vec<String> {
    let mut names: Vec<String> = FixedRow::ALL.iter().map(|row| row.name(cfg)).collect();
    let trigger = cfg.hold_trigger.as_ref().map(|t| trigger_name(t));
    for n in cfg
        .mix
        .iter()
        .map(crate::config::MixRequest::stat_name)
        .chain(trigger)
    {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    #[test]
    fn every_fixed_row_has_its_id_and_a_name_of_its_own() {
        let cfg = Settings {
            url: Some("http://127.0.0.1:1/".into()),
            tool: "a".into(),
            stream_tool: "b".into(),
            ..Settings::default()
        }
        .build()
        .expect("config");
        for (i, row) in FixedRow::ALL.iter().enumerate() {
            assert_eq!(row.id(), i);
            assert_eq!(FixedRow::from_id(i), Some(*row));
        }
        assert_eq!(FixedRow::from_id(FixedRow::COUNT), None);
        let names = names(&cfg);
        assert_eq!(names.len(), FixedRow::COUNT);
        assert!(names.iter().all(|n| !n.is_empty()), "{names:?}");
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), FixedRow::COUNT);
        assert_eq!(names[FixedRow::First.id()], "tools/call:a (first)");
        assert_eq!(names[FixedRow::Stream.id()], "tools/call:b");
        assert!(is_request(FixedRow::COUNT) && !is_request(FixedRow::Tls.id()));
    }
}
