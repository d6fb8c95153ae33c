//! The reference parts of the documentation, generated from the code and checked against it:
//!
//! * `docs/rest-api.md`, block `routes`: every route of the OpenAPI document (`/openapi.json`);
//! * `docs/configuration.md`, blocks `settings` and `flags`: every settings key with its default
//!   (from `Settings::default()`), its description (the doc comment of its field in
//!   `config.rs`), and the flag and environment variable that set it (from `cli::ServeArgs`);
//! * `client-proto/PROTOCOL.md`, blocks `version`, `close-codes` and `walkthrough`: `PROTOCOL_VERSION`,
//!   `steer_proto::close::ALL`, and a session's bytes from `Hello` to the first delta, encoded by
//!   `steer-proto` and annotated field by field (the golden vectors supply the server's side); its
//!   version table must have a row for the current version.
//!
//! A block sits between `<!-- BEGIN GENERATED name … -->` and `<!-- END GENERATED name -->`.
//! When the code and a block disagree the test fails; after an intended change regenerate the
//! blocks with `STEERD_DOCS_BLESS=1 cargo test --release -p steerd --lib reference_docs` (as the
//! golden vectors are blessed with `STEER_PROTO_BLESS=1`) and commit the docs with the code.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, Command};
use serde_json::Value;

use crate::cli::ServeArgs;
use crate::config::Settings;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn bless() -> bool {
    std::env::var_os("STEERD_DOCS_BLESS").is_some()
}

/// A Markdown table cell: one line, `|` escaped.
fn cell(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// What an operation does: its summary without the leading "`METHOD /path`" (the table has
/// both), or else the description of its first 2xx response.
fn what(op: &Value) -> String {
    let s = op["summary"].as_str().unwrap_or("").trim();
    let s = match s.strip_prefix('`').and_then(|r| r.split_once('`')) {
        Some((_, rest)) => rest.trim_start_matches([':', '.', ' ']),
        None => s,
    };
    if !s.is_empty() {
        let mut c = s.chars();
        return c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default();
    }
    let responses = op["responses"].as_object().into_iter().flatten();
    responses
        .filter(|(code, _)| code.starts_with('2'))
        .find_map(|(_, r)| r["description"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The route table: method, path, summary, tag, whether the admin-token scheme is declared.
pub fn routes() -> String {
    let doc = serde_json::to_value(crate::http::openapi::document()).unwrap();
    let mut out = String::from("| method | path | what it does (or its success answer) | tag |\n|---|---|---|---|\n");
    let paths = doc["paths"].as_object().unwrap();
    for (path, item) in paths {
        for method in ["get", "post", "put", "patch", "delete"] {
            let Some(op) = item.get(method) else { continue };
            let summary = what(op);
            let tag = op["tags"].get(0).and_then(Value::as_str).unwrap_or("");
            writeln!(out, "| `{}` | `{path}` | {} | {tag} |", method.to_uppercase(), cell(&summary)).unwrap();
        }
    }
    out
}

/// Doc comments of the fields of each `pub struct` in `config.rs`: (struct, field) → text.
fn field_docs() -> BTreeMap<(String, String), String> {
    let src = include_str!("config.rs");
    let mut docs = BTreeMap::new();
    let (mut current, mut pending) = (String::new(), Vec::<String>::new());
    for line in src.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("pub struct ") {
            current = rest.split([' ', '{', '(']).next().unwrap_or("").to_string();
            pending.clear();
        } else if let Some(d) = t.strip_prefix("///") {
            pending.push(d.trim().to_string());
        } else if let Some(rest) = t.strip_prefix("pub ").filter(|_| line.starts_with("    pub ") && !line.starts_with("     ")) {
            if let Some((field, _)) = rest.split_once(':') {
                if !field.contains('(') {
                    docs.insert((current.clone(), field.trim().to_string()), pending.join(" "));
                }
            }
            pending.clear();
        } else if !t.starts_with("#[") {
            pending.clear();
        }
    }
    docs
}

/// The struct of `config.rs` that holds the keys under `prefix`.
fn struct_of(prefix: &str) -> &'static str {
    match prefix {
        "" => "Settings",
        "auth" => "AuthSettings",
        "limits" => "LimitSettings",
        "players" => "WorldPolicy",
        "players.spawn_zones[]" => "SpawnZone",
        "persistence" => "PersistSettings",
        "cluster" => "ClusterSettings",
        "drain" => "DrainSettings",
        other => panic!("no struct known for settings section `{other}`: teach reference_docs.rs"),
    }
}

fn default_text(v: &Value) -> String {
    match v {
        Value::Null => "unset".into(),
        Value::String(s) => format!("`\"{s}\"`"),
        other => format!("`{other}`"),
    }
}

/// Every settings key: (key, default, description), in `config.rs` order within a section.
fn settings_keys() -> Vec<(String, String, String)> {
    let docs = field_docs();
    let defaults = serde_json::to_value(Settings::default()).unwrap();
    let mut rows = Vec::new();
    let section = |prefix: &str, obj: &serde_json::Map<String, Value>, rows: &mut Vec<(String, String, String)>| {
        let st = struct_of(prefix);
        // `config.rs` order: the fields as the struct declares them.
        let mut fields: Vec<(&String, &Value)> = obj.iter().collect();
        let order: Vec<String> = docs.keys().filter(|(s, _)| s == st).map(|(_, f)| f.clone()).collect();
        let src = include_str!("config.rs");
        let pos = |f: &str| src.find(&format!("struct {st} ")).and_then(|s| src[s..].find(&format!("    pub {f}:")).map(|p| s + p)).unwrap_or(usize::MAX);
        fields.sort_by_key(|(f, _)| pos(f));
        for (f, v) in fields {
            assert!(order.contains(f), "settings key {prefix}.{f} has no doc comment in config.rs");
            assert!(!docs[&(st.to_string(), f.clone())].is_empty(), "settings key {prefix}.{f}: empty doc comment");
            let key = if prefix.is_empty() { f.clone() } else { format!("{prefix}.{f}") };
            rows.push((key, default_text(v), docs[&(st.to_string(), f.clone())].clone()));
        }
    };
    let top = defaults.as_object().unwrap();
    let plain: serde_json::Map<String, Value> = top.iter().filter(|(_, v)| !v.is_object()).map(|(k, v)| (k.clone(), v.clone())).collect();
    section("", &plain, &mut rows);
    for name in ["auth", "limits", "persistence", "cluster", "drain"] {
        section(name, top[name].as_object().unwrap(), &mut rows);
    }
    let mut players = top["players"].as_object().unwrap().clone();
    assert!(players.remove("worlds").is_some(), "players.worlds");
    section("players", &players, &mut rows);
    let zone = serde_json::to_value(crate::config::SpawnZone { player: None, team: None, min: [0.0; 2], max: [0.0; 2] }).unwrap();
    let mut zone_rows = Vec::new();
    section("players.spawn_zones[]", zone.as_object().unwrap(), &mut zone_rows);
    for (k, _, d) in zone_rows {
        rows.push((k, "—".into(), d));
    }
    rows.push((
        "players.worlds.NAME.*".into(),
        "—".into(),
        format!("{} Any `players.*` key, for the world named NAME.", docs[&("PlayerSettings".to_string(), "worlds".to_string())]),
    ));
    rows
}

/// The flags of `steerd serve`: (id, `--flag`, env var, help, hidden).
fn flags() -> Vec<(String, String, Option<String>, String)> {
    let cmd = ServeArgs::augment_args(Command::new("steerd"));
    cmd.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
            let help = a.get_help().map(ToString::to_string).unwrap_or_default();
            Some((a.get_id().to_string(), format!("--{long}"), env, help))
        })
        .collect()
}

/// The settings table and the table of flags that set no key.
pub fn configuration() -> (String, String) {
    let keys = settings_keys();
    let flags = flags();
    let mut by_key: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    let mut flag_only = Vec::new();
    for (id, long, env, help) in &flags {
        let hits: Vec<&String> = keys.iter().map(|(k, _, _)| k).filter(|k| k.rsplit('.').next() == Some(id.as_str()) && !k.starts_with("players.worlds")).collect();
        match hits.as_slice() {
            [k] => {
                by_key.insert((*k).clone(), (long.clone(), env.clone()));
            }
            [] => flag_only.push((long.clone(), env.clone(), help.clone())),
            many => panic!("flag {long} matches several settings keys: {many:?}"),
        }
    }
    let mut t = String::from("| key | default | flag / environment variable | what |\n|---|---|---|---|\n");
    for (k, default, what) in &keys {
        let how = match by_key.get(k) {
            Some((long, Some(env))) => format!("`{long}`, `{env}`"),
            Some((long, None)) => format!("`{long}`"),
            None => "file only".into(),
        };
        writeln!(t, "| `{k}` | {default} | {how} | {} |", cell(what)).unwrap();
    }
    let mut f = String::from("| flag | environment variable | what |\n|---|---|---|\n");
    for (long, env, help) in flag_only {
        let env = env.map_or("—".to_string(), |e| format!("`{e}`"));
        writeln!(f, "| `{long}` | {env} | {} |", cell(&help)).unwrap();
    }
    (t, f)
}

/// The version line of PROTOCOL.md.
pub fn protocol_version() -> String {
    format!(
        "This document describes **protocol version {}** (`steer_proto::PROTOCOL_VERSION`). A client sends this number in `Hello.protocol_version`.\n",
        steer_proto::PROTOCOL_VERSION
    )
}

/// The close-code table of PROTOCOL.md.
pub fn close_codes() -> String {
    let mut t = String::from("| code | `steer_proto::close::` | when the server sends it | what a client does |\n|---|---|---|---|\n");
    for c in steer_proto::close::ALL {
        writeln!(t, "| {} | `{}` | {} | {} |", c.code, c.name, cell(c.when), cell(c.client)).unwrap();
    }
    t
}

/// One message's bytes, annotated field by field. `fields` must cover `whole` exactly, in order
/// (the test fails otherwise, so an annotation cannot drift from the encoding).
fn annotate(out: &mut String, title: &str, whole: &[u8], fields: &[(String, Vec<u8>)]) {
    let joined: Vec<u8> = fields.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    assert_eq!(joined, whole, "{title}: the annotated fields do not make up the message");
    writeln!(out, "{title} ({} bytes):\n```", whole.len()).unwrap();
    for (label, bytes) in fields {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut chunks = hex.chunks(12).map(|c| c.join(" "));
        let first = chunks.next().unwrap_or_default();
        writeln!(out, "{first:<36}  {label}").unwrap();
        for more in chunks {
            writeln!(out, "{more}").unwrap();
        }
    }
    out.push_str("```\n");
}

fn enc<T: serde::Serialize>(v: &T) -> Vec<u8> {
    steer_proto::encode_binary(v).unwrap()
}

fn vector(name: &str) -> steer_proto::ServerMsg {
    let path = repo().join(format!("client-proto/tests/vectors/{name}.hex"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let hex: String = text.split_whitespace().collect();
    let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    let msg = steer_proto::decode_binary(&bytes, steer_proto::HARD_LIMIT).unwrap();
    assert_eq!(enc(&msg), bytes, "{name}: re-encoding differs");
    msg
}

/// The cells message `c`, annotated: its head field by field, then one line per entry.
fn annotate_cells(out: &mut String, title: &str, c: &steer_proto::Cells) {
    use steer_proto::CellEntry;
    let whole = enc(&steer_proto::ServerMsg::Cells(c.clone()));
    let mut fields = vec![
        ("ServerMsg variant 7: cells".to_string(), enc(&7u32)),
        (format!("world {}", c.world), enc(&c.world)),
        (format!("tick {}", c.tick), enc(&c.tick)),
        (format!("span {} (every tick)", c.span), enc(&c.span)),
        (
            match c.checksum {
                Some(k) => format!("checksum present: 0x{:016x}", k.0),
                None => "no checksum".into(),
            },
            enc(&c.checksum),
        ),
    ];
    let head: usize = fields.iter().map(|f| f.1.len()).sum();
    let rest = whole[head..].to_vec();
    let entries: Vec<String> = c
        .entries
        .iter()
        .map(|e| match e {
            CellEntry::Keyframe(k) => format!("cell {} keyframe (state tick {}, {} agents)", k.cell, k.tick, k.agents.len()),
            CellEntry::Delta(d) => format!(
                "cell {} delta on base tick {} ({} changed, {} left, {} entered)",
                d.cell,
                d.base_tick,
                d.changed.len(),
                d.left.len(),
                d.entered.len()
            ),
        })
        .collect();
    fields.push((format!("entries, a byte string (length, then §6.8 entries): {}", entries.join("; ")), rest));
    annotate(out, title, &whole, &fields);
}

/// PROTOCOL.md's walkthrough: the bytes of a session from `Hello` to the first applied delta,
/// built from `steer-proto` and the golden vectors.
pub fn walkthrough() -> String {
    use steer_proto::{Area, ClientMsg, Encoding, Hello, ServerMsg, Subscribe, WholeWorld};
    let mut out = String::new();
    let hello = Hello { protocol_version: steer_proto::PROTOCOL_VERSION, token: None, encoding: Encoding::Binary, resume: None };
    annotate(
        &mut out,
        "1. The client opens `ws://host:8080/ws` and sends `Hello` in a binary frame",
        &enc(&ClientMsg::Hello(hello.clone())),
        &[
            ("ClientMsg variant 0: hello".into(), enc(&0u32)),
            (format!("protocol_version {}", hello.protocol_version), enc(&hello.protocol_version)),
            ("token: absent (dev mode; else 01, length, the JWT)".into(), enc(&hello.token)),
            ("encoding 0: binary".into(), enc(&hello.encoding)),
            ("resume: absent".into(), enc(&hello.resume)),
        ],
    );
    let ServerMsg::Welcome(w) = vector("server_welcome") else { panic!("server_welcome is not a welcome") };
    out.push('\n');
    annotate(
        &mut out,
        "2. The server answers `Welcome` (vector `server_welcome`: a player `alice`, one world)",
        &enc(&ServerMsg::Welcome(w.clone())),
        &[
            ("ServerMsg variant 0: welcome".into(), enc(&0u32)),
            (format!("protocol_version {}", w.protocol_version), enc(&w.protocol_version)),
            (
                format!("quantization: pos_step {}, vel_step {}, predict_num {}, orient_snap {}", w.quantization.pos_step, w.quantization.vel_step, w.quantization.predict_num, w.quantization.orient_snap),
                enc(&w.quantization),
            ),
            (
                format!(
                    "worlds: {} — {}",
                    w.worlds.len(),
                    w.worlds.iter().map(|x| format!("id {} `{}`, bounds, aoi_cell_size {}, {} × {} cells, tick_rate_hz {}", x.id, x.name, x.aoi_cell_size, x.cols, x.rows, x.tick_rate_hz)).collect::<Vec<_>>().join("; ")
                ),
                enc(&w.worlds),
            ),
            (format!("max_message_bytes {}", w.max_message_bytes), enc(&w.max_message_bytes)),
            (format!("player_id `{}`", w.player_id), enc(&w.player_id)),
            (format!("role {:?}", w.role), enc(&w.role)),
            ("resume_token (32 hex digits)".into(), enc(&w.resume_token)),
            (format!("session_grace_secs {}", w.session_grace_secs), enc(&w.session_grace_secs)),
        ],
    );
    let sub = Subscribe { request_id: 1, world: w.worlds.first().map_or_else(String::new, |x| x.name.clone()), area: Area::WholeWorld(WholeWorld {}), every_n_ticks: 1 };
    out.push('\n');
    annotate(
        &mut out,
        "3. The client subscribes to the whole world",
        &enc(&ClientMsg::Subscribe(sub.clone())),
        &[
            ("ClientMsg variant 1: subscribe".into(), enc(&1u32)),
            (format!("request_id {}", sub.request_id), enc(&sub.request_id)),
            (format!("world `{}`", sub.world), enc(&sub.world)),
            ("area variant 1: whole_world".into(), enc(&sub.area)),
            ("every_n_ticks 1".into(), enc(&sub.every_n_ticks)),
        ],
    );
    let ServerMsg::CommandResult(r) = vector("server_result_subscribed") else { panic!("server_result_subscribed") };
    out.push('\n');
    annotate(
        &mut out,
        "4. The server confirms with the cells now covered (vector `server_result_subscribed`, a smaller subscription: cells 36, 37, 56, 57)",
        &enc(&ServerMsg::CommandResult(r.clone())),
        &[
            ("ServerMsg variant 4: command_result".into(), enc(&4u32)),
            (format!("request_id {}", r.request_id), enc(&r.request_id)),
            ("result: Outcome 1 subscribed, world 1, cells as runs (§5.2)".into(), enc(&r.result)),
        ],
    );
    for (name, title) in [
        ("server_cells_0", "5. The first `cells` message: keyframe entries, which start each cell's chain (vector `server_cells_0`)"),
        ("server_cells_1", "6. The next tick's `cells` message: delta entries chained on those keyframes (vector `server_cells_1`)"),
    ] {
        let ServerMsg::Cells(c) = vector(name) else { panic!("{name} is not a cells message") };
        out.push('\n');
        annotate_cells(&mut out, title, &c);
    }
    out
}

/// Replaces (bless) or checks the block `name` of `text`; `Err` says what differs.
fn splice(text: &str, file: &str, name: &str, want: &str) -> Result<String, String> {
    let begin = format!("<!-- BEGIN GENERATED {name} ");
    let end = format!("<!-- END GENERATED {name} -->");
    let b = text.find(&begin).ok_or_else(|| format!("{file}: no `{begin}…-->` marker"))?;
    let body = b + text[b..].find("-->\n").ok_or_else(|| format!("{file}: unterminated BEGIN marker of {name}"))? + 4;
    let e = body + text[body..].find(&end).ok_or_else(|| format!("{file}: no `{end}` marker"))?;
    if &text[body..e] == want {
        return Ok(text.to_string());
    }
    if bless() {
        return Ok(format!("{}{want}{}", &text[..body], &text[e..]));
    }
    let have: Vec<&str> = text[body..e].lines().collect();
    let first = want.lines().zip(have.iter().chain(std::iter::repeat(&""))).find(|(w, h)| w != *h);
    Err(format!(
        "{file}: generated block `{name}` differs from the code (first difference: {first:?}); regenerate with STEERD_DOCS_BLESS=1 cargo test --release -p steerd --lib reference_docs"
    ))
}

#[test]
fn reference_docs_match_the_code() {
    let (settings, flag_table) = configuration();
    let blocks: [(&str, &str, String); 6] = [
        ("docs/rest-api.md", "routes", routes()),
        ("docs/configuration.md", "settings", settings),
        ("docs/configuration.md", "flags", flag_table),
        ("client-proto/PROTOCOL.md", "version", protocol_version()),
        ("client-proto/PROTOCOL.md", "close-codes", close_codes()),
        ("client-proto/PROTOCOL.md", "walkthrough", walkthrough()),
    ];
    let mut errors = Vec::new();
    let mut files: BTreeMap<&str, String> = BTreeMap::new();
    for (file, name, want) in &blocks {
        let text = files.entry(file).or_insert_with(|| std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}")));
        match splice(text, file, name, want) {
            Ok(t) => *text = t,
            Err(e) => errors.push(e),
        }
    }
    if bless() {
        for (file, text) in &files {
            std::fs::write(repo().join(file), text).unwrap();
        }
    }
    // PROTOCOL.md's version table names what each version changed: the current one included.
    let protocol = &files["client-proto/PROTOCOL.md"];
    let row = format!("\n| {} | ", steer_proto::PROTOCOL_VERSION);
    if !protocol.contains(&row) {
        errors.push(format!("client-proto/PROTOCOL.md: the version table has no row for version {}", steer_proto::PROTOCOL_VERSION));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn every_route_every_key_and_every_flag_is_in_the_tables() {
    let r = routes();
    for p in ["/worlds/{world}/agents/{id}/owner", "/recordings", "/worlds/{world}/replay/seek", "/openapi.json"] {
        assert!(r.contains(&format!("`{p}`")), "{p} missing from\n{r}");
    }
    let (t, f) = configuration();
    for k in ["log_format", "scenarios_dir", "limits.max_aoi_cells", "limits.max_subscriptions", "auth.max_sessions_per_ip", "players.spawn_zones[].team"] {
        assert!(t.contains(&format!("| `{k}` |")), "{k} missing from\n{t}");
    }
    assert!(t.contains("`--data-dir`, `STEERD_DATA_DIR`") && t.contains("`--scenario`, `STEERD_SCENARIO`"), "{t}");
    assert!(f.contains("`--config` | `STEERD_CONFIG`") && f.contains("`--agones`"), "{f}");
}
