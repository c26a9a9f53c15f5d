//! The modules of mcpfast-core form layers: each uses only the layers below it (no circle, no
//! use of a peer). The order lives here, in [`LAYERS`]; a new module takes its place in it.
//! The checker is the engine's (std only, made to be included).

#[path = "../../mcpfast-engine/tests/support/layers.rs"]
mod layers;

use std::path::{Path, PathBuf};

/// Bottom up; the modules of one layer are peers (none uses another). The root (`crate`)
/// declares the modules and holds the limits they share, so it is the lowest.
const LAYERS: &[&[&str]] = &[
    &["crate"],
    // JSON, the protocol's names, the transports' framing
    &[
        "json", "meta", "versions", "idhash", "framer", "sse", "http1", "refused",
    ],
    // who a request speaks for
    &["bearer"],
    // JSON-RPC messages
    &["envelope"],
    &["write", "admit"],
    // the server's short path
    &["reply", "tally"],
    &["births"],
    &["lane"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    layers::assert_layers(
        "mcpfast-core",
        &src(),
        LAYERS,
        &[
            ("lane", "births"),
            ("births", "admit"),
            ("admit", "crate"),
            ("write", "envelope"),
        ],
    );
}
