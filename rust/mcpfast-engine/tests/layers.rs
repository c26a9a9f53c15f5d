//! The engine's modules form layers: each uses only the layers below it (no circle, no use of
//! a peer). The order lives here, in [`LAYERS`]; `README.md` draws it and is held to it.

#[path = "support/layers.rs"]
mod layers;

use std::fs;
use std::path::{Path, PathBuf};

/// The engine's layers, bottom up; the modules of one layer are peers (none uses another).
const LAYERS: &[&[&str]] = &[
    &["target"],
    &["config"],
    &["rows", "stats", "check"],
    &["net"],
    &["shared"],
    &["http"],
    &["mcp"],
    &["templates"],
    &["context"],
    &["testing"],
    &["pacing", "session"],
    &["fanout"],
    &["families"],
    &["families::held"],
    &[
        "families::http",
        "families::tasks",
        "families::hold",
        "families::stdio",
        "families::agents",
    ],
    &["runtime"],
    &["engine"],
    &["crate"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    layers::assert_layers(
        "the engine",
        &src(),
        LAYERS,
        &[
            ("session", "context"),
            ("families::http", "families"),
            ("families::agents", "families::held"),
            ("runtime", "families::stdio"),
            ("net", "target"),
            ("crate", "engine"),
        ],
    );
}

#[test]
fn the_readme_draws_this_order() {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let block = readme
        .split("<!-- layers -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- /layers -->").next())
        .expect("README.md draws the layers between <!-- layers --> and <!-- /layers -->");
    // one line a layer, top down: its modules (`a | b`), two spaces, what they are
    let drawn: Vec<Vec<String>> = block
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("```"))
        .map(|l| {
            l.split("  ")
                .next()
                .unwrap_or("")
                .split('|')
                .map(|m| m.trim().trim_end_matches(" (lib.rs)").to_string())
                .collect()
        })
        .collect();
    let order: Vec<Vec<String>> = LAYERS
        .iter()
        .rev()
        .map(|l| l.iter().map(|m| (*m).to_string()).collect())
        .collect();
    assert_eq!(drawn, order, "README.md's drawing differs from LAYERS");
}

/// A crate under a fresh temporary directory: (relative path, text) files.
fn crate_of(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpfast-layers-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for (path, text) in files {
        let file = dir.join(path);
        fs::create_dir_all(file.parent().expect("a parent")).expect("mkdir");
        fs::write(file, text).expect("write");
    }
    dir
}

#[test]
fn the_checker_names_each_use_that_breaks_the_order() {
    let src = crate_of(
        "broken",
        &[
            (
                "lib.rs",
                "mod low;\nmod mid;\nmod top;\npub use top::Top;\n",
            ),
            (
                "low.rs",
                concat!(
                    "// crate::top::Top in a comment is no use\n",
                    "pub(crate) const S: &str = \"crate::top::Top\";\n",
                    "pub(crate) const C: char = '\"';\n",
                    "pub(crate) fn f<'a>(x: &'a str) -> &'a str { x }\n",
                    "pub(crate) fn g() -> usize { crate::mid::peer::N }\n",
                ),
            ),
            (
                "mid/mod.rs",
                "pub(crate) mod peer;\npub(crate) mod other;\nuse crate::low::S;\n",
            ),
            (
                "mid/peer.rs",
                concat!(
                    "use super::other;\n",
                    "pub(crate) const N: usize = other::M;\n",
                    "#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::top::Top;\n}\n",
                ),
            ),
            ("mid/other.rs", "pub(crate) const M: usize = 1;\n"),
            (
                "top.rs",
                "use crate::{low, mid::{self, peer}};\npub struct Top;\n",
            ),
        ],
    );
    let order: &[&[&str]] = &[
        &["low"],
        &["mid"],
        &["mid::peer", "mid::other"],
        &["top"],
        &["crate"],
    ];
    let mut problems = layers::check_layers(&src, order);
    problems.sort();
    let shown = problems.join("\n");
    assert_eq!(problems.len(), 4, "{shown}");
    // an upward use from code, a peer's use through `super::` and through the name it bound,
    // and a test module's use
    assert!(
        problems[0].contains(
            "low.rs:5: `low` uses `crate::mid::peer::N`: module `mid::peer` is a layer above it"
        ),
        "{shown}"
    );
    assert!(
        problems[1].contains("peer.rs:1: `mid::peer` uses `crate::mid::other`: module `mid::other` is a peer in its own layer"),
        "{shown}"
    );
    assert!(
        problems[2].contains("peer.rs:2: `mid::peer` uses `crate::mid::other::M`: module `mid::other` is a peer in its own layer"),
        "{shown}"
    );
    assert!(
        problems[3].contains(
            "peer.rs:6: `mid::peer` uses `crate::top::Top`: module `top` is a layer above it"
        ),
        "{shown}"
    );
    // a module outside the order, and a name of the order that is no module
    let order: &[&[&str]] = &[&["low", "gone"], &["mid", "mid::peer", "top", "crate"]];
    let problems = layers::check_layers(&src, order);
    assert!(
        problems
            .iter()
            .any(|p| p == "module `mid::other` is in no layer: place it in the order"),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p == "`gone` is in the layer order but is no module"),
        "{problems:?}"
    );
    let _ = fs::remove_dir_all(&src);
}

#[test]
fn the_walker_reads_use_trees_aliases_and_code_paths() {
    let src = crate_of(
        "paths",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\nfn f() { b::g(); }\n"),
            ("a.rs", "pub(crate) fn h() {}\n"),
            (
                "b.rs",
                "use crate::a as first;\npub(crate) fn g() { first::h(); let _ = r#\"crate::c\"#; }\n",
            ),
            (
                "c.rs",
                "use crate::{a::{self}, b::g as other};\nfn k() { a::h(); other(); }\n",
            ),
        ],
    );
    let mut found: Vec<(String, String, usize)> = layers::uses(&src)
        .into_iter()
        .map(|u| (u.module, u.target, u.line))
        .collect();
    found.sort();
    found.dedup();
    let want = [
        ("b", "a", 1),
        ("b", "a", 2),
        ("c", "a", 1),
        ("c", "a", 2),
        ("c", "b", 1),
        ("crate", "b", 4),
    ]
    .map(|(m, t, l)| (m.to_string(), t.to_string(), l));
    assert_eq!(found, want);
    let _ = fs::remove_dir_all(&src);
}
