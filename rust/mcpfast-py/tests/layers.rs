//! The binding's modules form layers: each uses only the layers below it (no circle, no use of
//! a peer). The order lives here, in [`LAYERS`]; a new module takes its place in it. The
//! checker is the engine's (std only, made to be included).

#[path = "../../mcpfast-engine/tests/support/layers.rs"]
mod layers;

use std::path::{Path, PathBuf};

/// Bottom up; the modules of one layer are peers (none uses another).
const LAYERS: &[&[&str]] = &[
    // exceptions and guards; what the births ask of Python; a tally's cells
    &["errors", "births", "cells"],
    // Python values to JSON (and back) through the C API; HTTP framing
    &["fastjson", "http1"],
    &["pyjson"],
    // the classes and functions of `mcpfast._core`; the replies the lanes write
    &["message", "tool_reply"],
    &["stream", "lane", "stdio_lane"],
    &["engine"],
    // the module `mcpfast._core` itself
    &["crate"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    layers::assert_layers(
        "the binding",
        &src(),
        LAYERS,
        &[
            ("lane", "births"),
            ("pyjson", "fastjson"),
            ("stream", "message"),
            ("crate", "lane"),
        ],
    );
}
