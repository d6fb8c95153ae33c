//! ARCHITECTURE's invariant: `steer-proto` depends on no workspace crate, dev-dependencies
//! included (a game client builds it alone). Read from the manifests, so a dependency added to
//! either table fails here.

use std::path::Path;

/// The `[package] name` of the manifest at `path`.
fn package_name(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some(v) = line.strip_prefix("name").map(str::trim_start).and_then(|r| r.strip_prefix('=')) {
                return Some(v.trim().trim_matches('"').to_string());
            }
        }
    }
    None
}

/// The dependency names of every `[*dependencies]` table of a manifest.
fn dependencies(text: &str) -> Vec<String> {
    let mut deps = Vec::new();
    let mut in_deps = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            let table = line.trim_matches(|c| c == '[' || c == ']');
            in_deps = table.ends_with("dependencies");
            // `[dependencies.name]` tables name the dependency in the header.
            if let Some((t, name)) = table.split_once('.') {
                if t.ends_with("dependencies") {
                    deps.push(name.trim().to_string());
                }
                in_deps = false;
            }
        } else if in_deps && !line.is_empty() && !line.starts_with('#') {
            if let Some((name, _)) = line.split_once('=') {
                deps.push(name.trim().split('.').next().unwrap_or("").trim().to_string());
            }
        }
    }
    deps
}

#[test]
fn steer_proto_depends_on_no_workspace_crate() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.parent().expect("the workspace root");
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace manifest");
    let members_line = workspace.lines().find(|l| l.trim_start().starts_with("members")).expect("a members list");
    let members: Vec<String> = members_line
        .split(['[', ']', ','])
        .skip(1)
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect();
    let mut names: Vec<String> = members.iter().filter_map(|m| package_name(&root.join(m).join("Cargo.toml"))).collect();
    names.retain(|n| n != "steer-proto");
    assert!(names.len() >= 3 && names.iter().any(|n| n == "steerd"), "workspace members not read: {names:?}");
    let ours = std::fs::read_to_string(here.join("Cargo.toml")).expect("steer-proto's manifest");
    let deps = dependencies(&ours);
    assert!(deps.iter().any(|d| d == "serde"), "dependencies not read: {deps:?}");
    let inner: Vec<&String> = deps.iter().filter(|d| names.contains(d)).collect();
    assert!(inner.is_empty(), "steer-proto depends on workspace crates {inner:?}");
    assert!(!ours.contains("path ="), "steer-proto names a path dependency");
}

#[test]
fn the_manifest_reader_sees_every_table() {
    let deps = dependencies("[package]\nname = \"x\"\n[dependencies]\na.workspace = true\nb = \"1\"\n[dev-dependencies]\nc = { path = \"../c\" }\n[dependencies.d]\nversion = \"1\"\n[features]\ne = []\n");
    assert_eq!(deps, ["a", "b", "c", "d"]);
}
