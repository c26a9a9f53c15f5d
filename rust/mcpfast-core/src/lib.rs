//! mcpfast-core: JSON-RPC 2.0 as the Model Context Protocol uses it, with no Python in sight.
//!
//! - [`json`]: a validating reader that skips values without building them, or hands them to
//!   a [`json::Builder`];
//! - [`envelope`]: one pass that validates a message or batch, classifies it and records the
//!   spans of `params`, `result` and `error`;
//! - [`write`]: compact output (strings, numbers, ids) byte-compatible with orjson;
//! - [`framer`]: newline framing for stdio, with a size limit that resynchronises;
//! - [`sse`]: the server-sent-events encoder and the WHATWG decoder;
//! - [`http1`]: HTTP/1.1 request framing for the server (strict, on `httparse`; chunked
//!   bodies too): the one judge of a connection's bytes;
//! - [`refused`]: a refused request as a client reports it (`WWW-Authenticate` error codes,
//!   `Retry-After`);
//! - [`admit`]: the shapes of request a server's short path may answer (a plain `tools/call`,
//!   the members of params, a plain 2026-07-28 `_meta`);
//! - [`reply`]: the replies the short path writes itself (HTTP framing, JSON-RPC bodies);
//! - [`tally`]: the counts the short path keeps of what it answers, for a metrics page;
//! - [`bearer`]: the bearer tokens the full path verified, as the short path recognises them;
//! - [`births`]: the sessions the short path opens itself (a plain `initialize`, session ids,
//!   the table of sessions not yet taken over);
//! - [`lane`]: the short path's rules over HTTP: what it was told, and its verdict on a
//!   request.
//!
//! The Python binding (`mcpfast-py`) is a thin layer over these modules.

pub mod admit;
pub mod bearer;
pub mod births;
pub mod envelope;
pub mod framer;
pub mod http1;
pub mod idhash;
pub mod json;
pub mod lane;
pub mod meta;
pub mod refused;
pub mod reply;
pub mod sse;
pub mod tally;
pub mod versions;
pub mod write;

/// Default nesting limit for decoding (the top-level value is depth 1).
pub const DEFAULT_MAX_DEPTH: usize = 128;
/// The deepest nesting any decode accepts, whatever `max_depth` asks (orjson's limit, which
/// the pure-Python twin inherits).
pub const MAX_DEPTH_CAP: usize = 1024;
/// Default stdio line limit in bytes.
pub const DEFAULT_MAX_LINE: usize = 4 * 1024 * 1024;
/// Default SSE event-block limit in bytes.
pub const DEFAULT_MAX_EVENT: usize = 4 * 1024 * 1024;
