//! The `_meta` keys of the 2026-07-28 request envelope (the client's and the server's side).

/// The protocol version the request is made in.
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The client's capabilities (an object), on every request.
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The client's `Implementation` (an object).
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
