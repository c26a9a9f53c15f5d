//! mcpfast-engine: the native MCP load engine, pure Rust on `mcpfast-core`.
//!
//! An [`Engine`] is built from a [`Config`] (typed [`config::Settings`], validated once by
//! `Settings::build`) without starting anything; `start` spawns `threads` OS threads, each with
//! its own tokio current-thread runtime (I/O and time drivers only: no signal driver, so no
//! SIGCHLD handler and nothing process-global). Each thread owns its sessions, its share of the
//! users and of the rate, and its own statistics ([`stats`]); the caller's thread only flips
//! atomics, swaps windows under a short per-thread mutex, and joins at `stop`.
//!
//! Modules: [`http`] (HTTP/1.1 client, keep-alive), [`mcp`] (requests of both eras, reply
//! checks), [`check`] (replies on the core's envelope scanner and SSE decoder), [`rows`] (the
//! stats rows and their names), [`templates`] (request bodies built once), [`runtime`] (the
//! engine threads), [`pacing`] (the open model), `http_families` and [`stdio`] (the families
//! over HTTP and over child processes), [`hold`] (held GET streams and their fan-out).

pub mod check;
pub mod config;
mod context;
mod engine;
mod families;
mod fanout;
pub mod http;
pub mod mcp;
pub mod net;
pub mod pacing;
pub mod rows;
mod runtime;
mod session;
mod shared;
pub mod stats;
pub mod target;
pub mod templates;

/// The JSON types of [`config::Settings`] (tool arguments, capabilities, mix params), at the
/// version the engine is built with.
pub use serde_json;

/// The protocol versions the engine speaks, by era (the core's lists; the mock server of
/// `examples/` answers with them).
pub use mcpfast_core::versions;

pub use config::Config;
pub use engine::{Cumulative, Engine, Status};
