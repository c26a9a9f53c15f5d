//! mcpfast-engine: the native MCP load engine, pure Rust on `mcpfast-core`.
//!
//! An [`Engine`] is built from a [`Config`] (typed [`config::Settings`], validated once by
//! `Settings::build`) without starting anything; `start` spawns `threads` OS threads, each with
//! its own tokio current-thread runtime (I/O and time drivers only: no signal driver, so no
//! SIGCHLD handler and nothing process-global). Each thread owns its sessions, its share of the
//! users and of the rate, and its own statistics ([`stats`]); the caller's thread only flips
//! atomics, swaps windows under a short per-thread mutex, and joins at `stop`.
//!
//! The modules are layers, each using only the ones below it, from `target` and [`config`] at
//! the bottom to the families, `runtime` (which picks a user's family), `engine` (the handle)
//! and this facade at the top: `README.md` draws the order, `tests/layers.rs` holds it and
//! checks every module against it.

pub mod check;
pub mod config;
mod context;
mod engine;
mod families;
mod fanout;
mod http;
mod mcp;
mod net;
mod pacing;
pub mod rows;
mod runtime;
mod session;
mod shared;
pub mod stats;
mod target;
mod templates;
#[cfg(test)]
mod testing;

pub use config::Config;
pub use engine::{raise_open_files_limit, Cumulative, Engine, Status};
/// A µs-resolution timer (timerfd), the open model's; the mock server of `examples/` sleeps on
/// it too.
pub use pacing::Timer;
pub use target::{ConnectTo, Target, TlsOptions};

/// The JSON types of [`config::Settings`] (tool arguments, capabilities, mix params), at the
/// version the engine is built with.
pub use serde_json;

/// The protocol versions the engine speaks, by era (the core's lists; the mock server of
/// `examples/` answers with them).
pub use mcpfast_core::versions;
