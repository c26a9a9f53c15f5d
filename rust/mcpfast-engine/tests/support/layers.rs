//! Layer rules for a crate's `src/`: the Rust counterpart of `tests/test_import_cycles.py`.
//!
//! [`check_layers`] reads every `.rs` file under a `src` directory, collects each module's uses
//! of the crate's other modules (`use` trees and paths in code: `crate::`, `super::`, `self::`,
//! a child module's name, or a module name brought in by a `use`), and checks them against an
//! order of layers, bottom up: a module may use the modules of the layers below its own, never
//! a peer of its layer nor a layer above. Test modules count (a `mod tests` inside a file is
//! part of that file's module), as the Python test counts deferred imports. Comments, strings
//! and character literals are skipped. `mod` declarations are not uses (the root declares every
//! module; a folder's `mod.rs` declares its children).
//!
//! Module names are paths from the crate root: `lib.rs` (or `main.rs`) is `crate`, `a.rs` and
//! `a/mod.rs` are `a`, `a/b.rs` is `a::b`. The order names every module exactly once.
//!
//! Self-contained (std only), so that another crate's test can include it:
//! `#[path = "../../mcpfast-engine/tests/support/layers.rs"] mod layers;`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One use of another module of the crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The module that uses, and where (file and 1-based line).
    pub module: String,
    pub file: PathBuf,
    pub line: usize,
    /// The path as resolved from the crate root (`crate::shared::lock`).
    pub path: String,
    /// The module it names (`shared`).
    pub target: String,
}

/// Every module under `src` with its file, by module path.
pub fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.insert(module_name(src, &path), path);
            }
        }
    }
    out
}

fn module_name(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod")) {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    if parts.is_empty() {
        "crate".into()
    } else {
        parts.join("::")
    }
}

/// `text` with comments, string literals and character literals blanked (newlines kept, so
/// lines still count).
pub fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    // blank c[from..to], keeping newlines
    let blank = |out: &mut String, from: usize, to: usize| {
        for &ch in &c[from..to.min(c.len())] {
            out.push(if ch == '\n' { '\n' } else { ' ' });
        }
    };
    while i < c.len() {
        let at_word_start = i == 0 || !ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            let end = c[i..]
                .iter()
                .position(|&ch| ch == '\n')
                .map_or(c.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if at_word_start && raw_string_start(&c, i).is_some() {
            let (hashes, quote) = raw_string_start(&c, i).unwrap_or((0, i));
            let mut j = quote + 1;
            while j < c.len() {
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            blank(&mut out, i, j);
            i = j;
        } else if c[i] == '"' || (at_word_start && c[i] == 'b' && c.get(i + 1) == Some(&'"')) {
            let mut j = if c[i] == 'b' { i + 2 } else { i + 1 };
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c[i] == '\'' || (at_word_start && c[i] == 'b' && c.get(i + 1) == Some(&'\'')) {
            let q = if c[i] == 'b' { i + 1 } else { i };
            // a character literal ('x', '\n', '\u{..}'), or a lifetime ('a) left as it is
            let end = if c.get(q + 1) == Some(&'\\') {
                // the escaped character is at q + 2: the closing quote comes after it
                c.get(q + 3..)
                    .and_then(|rest| rest.iter().position(|&ch| ch == '\''))
                    .map(|p| q + 3 + p)
            } else if c.get(q + 2) == Some(&'\'') {
                Some(q + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end + 1);
                    i = end + 1;
                }
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `r"`, `r#"`, `br"`, `br##"`... at `i`: (the number of `#`, the index of the opening quote).
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((hashes, j))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Colons,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other,
}

fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // `$crate` in a macro is the crate root of wherever the macro expands
            let after_dollar = start > 0 && c[start - 1] == '$';
            out.push((
                if after_dollar {
                    Tok::Other
                } else {
                    Tok::Ident(word)
                },
                line,
            ));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.') {
                i += 1;
            }
            out.push((Tok::Other, line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Colons, line));
            i += 2;
        } else {
            out.push((
                match ch {
                    '{' => Tok::Open,
                    '}' => Tok::Close,
                    ',' => Tok::Comma,
                    ';' => Tok::Semi,
                    '*' => Tok::Star,
                    _ => Tok::Other,
                },
                line,
            ));
            i += 1;
        }
    }
    out
}

/// The paths of a `use` tree starting at `toks[*i]` (after `use`), each as its segments and the
/// name it binds (None for a glob); stops after the closing `;`.
fn use_tree(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i).map(|t| &t.0) {
            Some(Tok::Ident(w)) => {
                let w = w.clone();
                *i += 1;
                if toks.get(*i).map(|t| &t.0) == Some(&Tok::Colons) {
                    *i += 1;
                    path.push(w);
                    continue;
                }
                // the last segment, maybe renamed
                let bound = if let Some(Tok::Ident(a)) = toks.get(*i + 1).map(|t| &t.0) {
                    if matches!(toks.get(*i).map(|t| &t.0), Some(Tok::Ident(k)) if k == "as") {
                        *i += 2;
                        a.clone()
                    } else {
                        w.clone()
                    }
                } else {
                    w.clone()
                };
                if w == "self" {
                    let name = if bound == "self" {
                        path.last().cloned()
                    } else {
                        Some(bound)
                    };
                    out.push((path.clone(), name));
                } else {
                    path.push(w);
                    out.push((path.clone(), Some(bound)));
                }
                return;
            }
            Some(Tok::Star) => {
                *i += 1;
                out.push((path.clone(), None));
                return;
            }
            Some(Tok::Open) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Tok::Close) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Comma) => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
            }
            _ => return,
        }
    }
}

/// Every use of another module of the crate, in every file under `src`.
pub fn uses(src: &Path) -> Vec<Use> {
    let mods = modules(src);
    let known: BTreeSet<Vec<String>> = mods.keys().map(|m| split(m)).collect();
    let mut out = Vec::new();
    for (module, file) in &mods {
        let text = fs::read_to_string(file).unwrap_or_default();
        let toks = tokens(&code_only(&text));
        let base = split(module);
        // inline modules (`mod tests { .. }`): their names and the brace depth they close at
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        // names a `use` bound to a module of the crate, per enclosing module
        let mut aliases: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
        let mut i = 0;
        while i < toks.len() {
            let here: Vec<String> = base
                .iter()
                .cloned()
                .chain(inline.iter().map(|m| m.0.clone()))
                .collect();
            let line = toks[i].1;
            match &toks[i].0 {
                Tok::Open => {
                    depth += 1;
                    i += 1;
                }
                Tok::Close => {
                    if inline.last().is_some_and(|m| m.1 == depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                    i += 1;
                }
                Tok::Ident(w) if w == "mod" => {
                    if let (Some(Tok::Ident(name)), Some(Tok::Open)) =
                        (toks.get(i + 1).map(|t| &t.0), toks.get(i + 2).map(|t| &t.0))
                    {
                        inline.push((name.clone(), depth + 1));
                    }
                    i += 2;
                }
                Tok::Ident(w) if w == "use" => {
                    i += 1;
                    let mut paths = Vec::new();
                    use_tree(&toks, &mut i, &[], &mut paths);
                    for (segs, bound) in paths {
                        let Some(abs) = resolve(&segs, &here, &known, &aliases) else {
                            continue;
                        };
                        if let (Some(name), true) = (bound, known.contains(&abs)) {
                            aliases.insert((here.clone(), name), abs.clone());
                        }
                        record(&mut out, module, file, line, &abs, &known);
                    }
                }
                Tok::Ident(_) if i == 0 || toks[i - 1].0 != Tok::Colons => {
                    // a path in code: its segments while `::` joins them
                    let mut segs = Vec::new();
                    let mut j = i;
                    while let Some(Tok::Ident(w)) = toks.get(j).map(|t| &t.0) {
                        segs.push(w.clone());
                        if toks.get(j + 1).map(|t| &t.0) != Some(&Tok::Colons) {
                            break;
                        }
                        j += 2;
                    }
                    if segs.len() > 1 {
                        if let Some(abs) = resolve(&segs, &here, &known, &aliases) {
                            record(&mut out, module, file, line, &abs, &known);
                        }
                    }
                    i = j.max(i + 1);
                }
                _ => i += 1,
            }
        }
    }
    out
}

fn split(module: &str) -> Vec<String> {
    if module == "crate" {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    }
}

/// The path `segs`, written in module `here`, from the crate root; None when it names nothing
/// of the crate (another crate, a local item).
fn resolve(
    segs: &[String],
    here: &[String],
    known: &BTreeSet<Vec<String>>,
    aliases: &BTreeMap<(Vec<String>, String), Vec<String>>,
) -> Option<Vec<String>> {
    let first = segs.first()?;
    let (mut abs, rest) = match first.as_str() {
        "crate" => (Vec::new(), &segs[1..]),
        "self" => (here.to_vec(), &segs[1..]),
        "super" => {
            let mut at = here.to_vec();
            let mut k = 0;
            while segs.get(k).is_some_and(|s| s == "super") {
                at.pop();
                k += 1;
            }
            (at, &segs[k..])
        }
        _ => {
            let mut child = here.to_vec();
            child.push(first.clone());
            if known.contains(&child) {
                (child, &segs[1..])
            } else {
                // a module a `use` brought in, here or in an enclosing module
                let mut at = here.to_vec();
                loop {
                    if let Some(m) = aliases.get(&(at.clone(), first.clone())) {
                        break (m.clone(), &segs[1..]);
                    }
                    at.pop()?;
                }
            }
        }
    };
    abs.extend(rest.iter().cloned());
    Some(abs)
}

/// Record a use of the module `abs` names (its longest prefix that is a module).
fn record(
    out: &mut Vec<Use>,
    module: &str,
    file: &Path,
    line: usize,
    abs: &[String],
    known: &BTreeSet<Vec<String>>,
) {
    let mut target = abs.to_vec();
    while !target.is_empty() && !known.contains(&target) {
        target.pop();
    }
    let target = if target.is_empty() {
        "crate".to_string()
    } else {
        target.join("::")
    };
    if target == module {
        return;
    }
    let path = std::iter::once("crate".to_string())
        .chain(abs.iter().cloned())
        .collect::<Vec<_>>()
        .join("::");
    out.push(Use {
        module: module.to_string(),
        file: file.to_path_buf(),
        line,
        path,
        target,
    });
}

/// What breaks the order `layers` (bottom up; each layer a set of peers) in the crate under
/// `src`: a module outside the order, a name in the order that is no module, and every use of
/// a module of the same layer or a layer above, each named with its file, line and path.
pub fn check_layers(src: &Path, layers: &[&[&str]]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (n, layer) in layers.iter().enumerate() {
        for m in *layer {
            if layer_of.insert(m, n).is_some() {
                problems.push(format!("`{m}` is named twice in the layer order"));
            }
        }
    }
    let mods = modules(src);
    if mods.is_empty() {
        problems.push(format!("no .rs file under {}", src.display()));
    }
    for m in mods.keys() {
        if !layer_of.contains_key(m.as_str()) {
            problems.push(format!(
                "module `{m}` is in no layer: place it in the order"
            ));
        }
    }
    for m in layer_of.keys() {
        if !mods.contains_key(*m) {
            problems.push(format!("`{m}` is in the layer order but is no module"));
        }
    }
    for u in uses(src) {
        let (Some(&from), Some(&to)) = (
            layer_of.get(u.module.as_str()),
            layer_of.get(u.target.as_str()),
        ) else {
            continue;
        };
        if to >= from {
            let what = if to == from {
                "a peer in its own layer"
            } else {
                "a layer above it"
            };
            problems.push(format!(
                "{}:{}: `{}` uses `{}`: module `{}` is {what} (layer {to} over {from})",
                u.file.display(),
                u.line,
                u.module,
                u.path,
                u.target,
            ));
        }
    }
    problems
}

/// The crate under `src` keeps the order `layers` ([`check_layers`] finds nothing), and the walk
/// sees each of the uses `seen` (`(module, target)`): a walker that found nothing would pass
/// anything. Panics naming `what` and every problem.
pub fn assert_layers(what: &str, src: &Path, layers: &[&[&str]], seen: &[(&str, &str)]) {
    let problems = check_layers(src, layers);
    assert!(
        problems.is_empty(),
        "{what}'s layers are broken:\n{}",
        problems.join("\n")
    );
    let uses = uses(src);
    for (module, target) in seen {
        assert!(
            uses.iter()
                .any(|u| u.module == *module && u.target == *target),
            "{what}: the use {module} -> {target} was not found"
        );
    }
}
