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
    let problems = layers::check_layers(&src(), LAYERS);
    assert!(
        problems.is_empty(),
        "mcpfast-core's layers are broken:\n{}",
        problems.join("\n")
    );
    // the walk sees the uses it checks (a walker that found nothing would pass anything)
    let uses = layers::uses(&src());
    for (module, target) in [
        ("lane", "births"),
        ("births", "admit"),
        ("admit", "crate"),
        ("write", "envelope"),
    ] {
        assert!(
            uses.iter()
                .any(|u| u.module == module && u.target == target),
            "{module} -> {target} not found"
        );
    }
}
