//! The MCP protocol versions the Rust side speaks, oldest first, by era: the handshake era's (a
//! session opened by `initialize`, its version negotiated there) and the stateless era's (each
//! request carries its version in `_meta`). The load engine checks its config and the version a
//! server chose against these lists, and its mock server answers with them. The Python package
//! keeps its own list in `mcpfast/protocol/`.

/// Versions of the handshake era (`initialize`, `Mcp-Session-Id`).
pub const HANDSHAKE: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Versions of the stateless era (no session; `server/discover`, `_meta` on every request).
pub const STATELESS: &[&str] = &["2026-07-28"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eras_are_sorted_and_apart() {
        for era in [HANDSHAKE, STATELESS] {
            assert!(era.windows(2).all(|w| w[0] < w[1]), "{era:?}");
        }
        let newest_handshake = HANDSHAKE.last().copied().unwrap_or_default();
        assert!(STATELESS.iter().all(|v| *v > newest_handshake));
    }
}
