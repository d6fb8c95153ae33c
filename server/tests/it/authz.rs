//! The one authorization gate (`authz::decide`, behind `http::guard` and every WebSocket
//! message): every documented REST route and every client message kind judged for every kind
//! of caller in every mode, against this file's OWN statement of the rules (not the server's
//! `authz::ROUTES`); regressions of the findings the gate fixed; and fog of war (`owned`
//! visibility) on every read and command a player can make.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use serde_json::Value;
use steer_proto::{self as proto, ClientMsg, ClientMsgKind, Encoding, ErrorCode, Outcome, ServerMsg};
use steerd_tests::*;
use tokio::time::Instant;

const SECRET: &str = "authz-test-secret-0123456789abcdef";
const ADMIN: &str = "authz-admin-token-0123";
/// An id no agent, obstacle or wall has.
const NOPE: u32 = 999_999;

// ------------------------------------------------------------------------------ set-up

/// How a server authenticates: an admin token, a player key (JWT secret), both or neither (dev).
#[derive(Debug, Clone, Copy)]
struct Mode {
    admin: bool,
    jwt: bool,
}

const BOTH: Mode = Mode { admin: true, jwt: true };
const JWT_ONLY: Mode = Mode { admin: false, jwt: true };
const ADMIN_ONLY: Mode = Mode { admin: true, jwt: false };
const DEV: Mode = Mode { admin: false, jwt: false };

fn jwt_with(secret: &str, sub: &str, role: &str, worlds: Option<&[&str]>) -> String {
    let claims = steerd::auth::Claims {
        sub: sub.into(),
        role: Some(role.into()),
        worlds: worlds.map(|w| w.iter().map(|s| s.to_string()).collect()),
        team: None,
        exp: steerd::auth::now_secs() + 3600,
        nbf: None,
        iat: None,
    };
    steerd::auth::mint(secret, &claims).unwrap()
}

fn jwt(sub: &str, role: &str) -> String {
    jwt_with(SECRET, sub, role, None)
}

/// A server in `mode` whose world `fog` (when created) has `owned` visibility with this vision
/// radius; every other world is `open`.
fn server(tag: &str, mode: Mode, vision_radius: f32) -> Server {
    let dir = TempDir::new(&format!("{tag}-cfg"));
    let cfg = dir.path().join("steerd.toml");
    let mut toml = String::new();
    if mode.jwt {
        toml.push_str(&format!("[auth]\nplayer_jwt_secret = \"{SECRET}\"\n\n"));
    }
    toml.push_str(&format!("[players.worlds.fog]\nvisibility = \"owned\"\nvision_radius = {vision_radius:.1}\n"));
    std::fs::write(&cfg, toml).unwrap();
    let mut opts = Opts::default().arg("--config", cfg.to_string_lossy().to_string());
    if mode.admin {
        opts = opts.arg("--admin-token", ADMIN);
    }
    let srv = Server::fresh(tag, opts);
    drop(dir); // read at start
    srv
}

/// Creates world `fog`: 400×400, one obstacle, no agents.
async fn create_fog(admin: &Http) {
    create_world(admin, "fog", "fogsc", &small_scenario(400.0, &[(200.0, 200.0, 5.0)])).await;
}

/// The error code of a JSON error body (`None` if there is none).
fn code_of(r: &Resp) -> Option<String> {
    serde_json::from_slice::<Value>(&r.body).ok().and_then(|v| v["error"].as_str().map(str::to_string))
}

fn short(r: &Resp) -> String {
    let t = r.text();
    let t: String = t.chars().take(160).collect();
    format!("{} {t}", r.status)
}

/// A WebSocket client that said Hello with `token` (panics unless welcomed).
async fn ws_as(srv: &Server, token: &str) -> Ws {
    let mut ws = Ws::connect(srv.addr).await;
    ws.hello(Some(token)).await;
    ws
}

fn points(p: &[(f32, f32)]) -> proto::SpawnArea {
    proto::SpawnArea::Points(proto::Points { points: p.iter().map(|&(x, y)| proto::Point { x, y }).collect() })
}

fn spawn_points(rid: u32, world: &str, p: &[(f32, f32)]) -> ClientMsg {
    ClientMsg::Spawn(proto::Spawn {
        request_id: rid,
        world: world.into(),
        group: "g".into(),
        count: p.len() as u32,
        area: points(p),
        limits: proto::Limits::default(),
        behaviors: Vec::new(),
    })
}

fn face(agent: u32) -> proto::BehaviorEntry {
    proto::BehaviorEntry::from(proto::Behavior::Face(proto::Face { target: proto::Target::Agent(proto::AgentRef { agent }), align: proto::AlignParams::default() }))
}

fn seek_point() -> proto::BehaviorEntry {
    proto::BehaviorEntry::from(proto::Behavior::Seek(proto::Seek { target: proto::Target::Point(proto::Point { x: 10.0, y: 10.0 }) }))
}

fn set_behaviors(rid: u32, world: &str, agents: Vec<u32>, behaviors: Vec<proto::BehaviorEntry>) -> ClientMsg {
    ClientMsg::SetBehaviors(proto::SetBehaviors { request_id: rid, world: world.into(), agents, behaviors })
}

fn despawn(rid: u32, world: &str, agents: Vec<u32>) -> ClientMsg {
    ClientMsg::Despawn(proto::Despawn { request_id: rid, world: world.into(), agents })
}

// ------------------------------------------------------------------- 1. the REST matrix

/// What a route needs, as the specification states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Anyone, token or not (public).
    Anyone,
    /// Any valid token (reads; agent reads are narrowed to the caller's sight).
    Token,
    /// The admin, spectators, and players only in `open` worlds.
    WholeWorld,
    /// The admin and players (not spectators).
    Command,
    /// The admin only.
    Admin,
    /// Server to server: the cluster secret, no token of any role. The matrix's servers have
    /// none, so every caller is refused 403 (handoff disabled); `handoff.rs` checks the
    /// secret's own answers.
    Cluster,
}

/// The test's own statement of the rule of every route.
const SPEC: &[(&str, &str, Need)] = &[
    ("GET", "/", Need::Anyone),
    ("GET", "/viewer/{*file}", Need::Anyone),
    ("GET", "/health", Need::Anyone),
    ("GET", "/metrics", Need::Anyone),
    ("GET", "/openapi.json", Need::Anyone),
    ("GET", "/ws", Need::Anyone),
    ("GET", "/worlds", Need::Token),
    ("POST", "/worlds", Need::Admin),
    ("GET", "/worlds/{world}", Need::Token),
    ("PATCH", "/worlds/{world}", Need::Admin),
    ("DELETE", "/worlds/{world}", Need::Admin),
    ("POST", "/worlds/{world}/step", Need::Admin),
    ("POST", "/worlds/{world}/reset", Need::Admin),
    ("GET", "/worlds/{world}/snapshot", Need::Token),
    ("GET", "/worlds/{world}/agents", Need::Token),
    ("POST", "/worlds/{world}/agents", Need::Command),
    ("GET", "/worlds/{world}/agents/{id}", Need::Token),
    ("DELETE", "/worlds/{world}/agents/{id}", Need::Command),
    ("PUT", "/worlds/{world}/agents/{id}/behaviors", Need::Command),
    ("PUT", "/worlds/{world}/agents/{id}/owner", Need::Admin),
    ("GET", "/worlds/{world}/agents/{id}/avoidance", Need::WholeWorld),
    ("GET", "/worlds/{world}/players", Need::Admin),
    ("DELETE", "/worlds/{world}/players/{player}", Need::Admin),
    ("POST", "/worlds/{world}/move-to", Need::Command),
    ("GET", "/worlds/{world}/flowfield", Need::Token),
    ("GET", "/worlds/{world}/obstacles", Need::Token),
    ("POST", "/worlds/{world}/obstacles", Need::Admin),
    ("POST", "/worlds/{world}/obstacles/random", Need::Admin),
    ("DELETE", "/worlds/{world}/obstacles/{id}", Need::Admin),
    ("PATCH", "/worlds/{world}/obstacles/{id}", Need::Admin),
    ("GET", "/worlds/{world}/walls", Need::Token),
    ("POST", "/worlds/{world}/walls", Need::Admin),
    ("DELETE", "/worlds/{world}/walls/{id}", Need::Admin),
    ("POST", "/worlds/{world}/load", Need::Admin),
    ("POST", "/worlds/{world}/save", Need::Admin),
    ("GET", "/worlds/{world}/recording", Need::WholeWorld),
    ("GET", "/worlds/{world}/replay", Need::Token),
    ("POST", "/worlds/{world}/replay/seek", Need::Admin),
    ("POST", "/worlds/{world}/replay/play", Need::Admin),
    ("POST", "/worlds/{world}/replay/pause", Need::Admin),
    ("POST", "/worlds/{world}/replay/speed", Need::Admin),
    ("GET", "/recordings", Need::Admin),
    ("DELETE", "/recordings/{name}", Need::Admin),
    ("POST", "/debug/panic", Need::Admin),
    ("POST", "/debug/stall", Need::Admin),
    ("POST", "/debug/stall/release", Need::Admin),
    ("POST", "/worlds/{world}/handoff", Need::Admin),
    ("POST", "/cluster/worlds/{world}", Need::Cluster),
    ("GET", "/scenarios", Need::Token),
    ("GET", "/scenarios/{name}", Need::Token),
    ("PUT", "/scenarios/{name}", Need::Admin),
    ("DELETE", "/scenarios/{name}", Need::Admin),
];

/// Served routes that are not API and so not in the OpenAPI document (the viewer).
const UNDOCUMENTED: &[&str] = &["/", "/viewer/{*file}"];

/// Who presents what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// No token.
    Nobody,
    /// A token no server accepts.
    Invalid,
    /// The admin token (valid where one is configured).
    Admin,
    /// A player JWT (valid where a player key is configured).
    Player,
    /// A spectator JWT (likewise).
    Spectator,
}

#[derive(Debug, Clone)]
struct Caller {
    name: &'static str,
    token: Option<String>,
    who: Who,
    /// The token's `worlds` claim.
    worlds: Option<&'static [&'static str]>,
}

fn callers() -> Vec<Caller> {
    let c = |name: &'static str, token: Option<String>, who: Who, worlds: Option<&'static [&'static str]>| Caller { name, token, who, worlds };
    vec![
        c("none", None, Who::Nobody, None),
        c("garbage", Some("not-a-token".into()), Who::Invalid, None),
        c("forged", Some(jwt_with("another-secret-0123456789abcdef", "alice", "player", None)), Who::Invalid, None),
        c("jwt-role-admin", Some(jwt("mallory", "admin")), Who::Invalid, None),
        c("alice", Some(jwt("alice", "player")), Who::Player, None),
        c("bob", Some(jwt("bob", "player")), Who::Player, None),
        c("spectator", Some(jwt("sam", "spectator")), Who::Spectator, None),
        c("carol(demo only)", Some(jwt_with(SECRET, "carol", "player", Some(&["demo"]))), Who::Player, Some(&["demo"])),
        c("admin", Some(ADMIN.into()), Who::Admin, None),
    ]
}

/// The specification: `None` = allowed, `Some(status)` = refused with 401 or 403, for a call
/// naming `world` (as in its path), whose visibility is `owned` or not.
fn expected(mode: Mode, c: &Caller, need: Need, world: Option<&str>, owned: bool) -> Option<u16> {
    if need == Need::Anyone {
        return None;
    }
    if need == Need::Cluster {
        return Some(403);
    }
    let dev = !mode.admin && !mode.jwt;
    let who = match (c.token.is_some(), c.who) {
        (false, _) => return if dev { None } else { Some(401) },
        (true, Who::Invalid | Who::Nobody) => return Some(401),
        (true, Who::Admin) if !mode.admin => return Some(401),
        (true, Who::Player | Who::Spectator) if !mode.jwt => return Some(401),
        (true, w) => w,
    };
    if let (Some(w), Some(list)) = (world, c.worlds) {
        if !list.contains(&w) {
            return Some(401);
        }
    }
    match (need, who) {
        (_, Who::Admin) | (Need::Token, _) => None,
        (Need::WholeWorld, Who::Spectator) => None,
        (Need::WholeWorld, _) => owned.then_some(403),
        (Need::Command, Who::Spectator) => Some(403),
        (Need::Command, _) => None,
        (Need::Admin, _) => Some(if mode.admin { 403 } else { 401 }),
        (Need::Anyone, _) => None,
        (Need::Cluster, _) => Some(403),
    }
}

/// The world a route's request names for `world`: admin routes name one that does not exist
/// (an allowed admin call then changes nothing).
fn world_in_path(need: Need, world: &str) -> String {
    if matches!(need, Need::Admin | Need::Cluster) { format!("nope-{world}") } else { world.to_string() }
}

/// The concrete, harmless request of a route for a world: admin routes name a world that does
/// not exist; ids, names and players name nothing; the flow field asks for agent 999999.
fn concrete(template: &str, need: Need, world: Option<&str>) -> String {
    let mut p = template.to_string();
    if let Some(w) = world {
        p = p.replace("{world}", &world_in_path(need, w));
    }
    p = p.replace("{id}", &NOPE.to_string()).replace("{name}", "nope-name-x").replace("{player}", "nobody").replace("{*file}", "nope-file.js");
    assert!(!p.contains('{'), "unsubstituted parameter in {template}");
    if p.ends_with("/flowfield") {
        p.push_str(&format!("?agent={NOPE}"));
    }
    p
}

/// Sends every route × world × caller to `srv` and answers the mismatches with the spec.
async fn run_matrix(label: &str, srv: &Server, mode: Mode, callers: &[Caller]) -> (Vec<String>, usize) {
    let mut bad = Vec::new();
    let mut sent = 0;
    for &(method, template, need) in SPEC {
        let worlds: Vec<Option<&str>> = if template.contains("{world}") { vec![Some("demo"), Some("fog")] } else { vec![None] };
        for world in worlds {
            let path = concrete(template, need, world);
            let body: Option<&[u8]> = matches!(method, "POST" | "PUT" | "PATCH").then_some(&b"{}"[..]);
            let answers = futures_util::future::join_all(callers.iter().map(|c| {
                let http = match &c.token {
                    Some(t) => srv.http().with_token(t),
                    None => srv.http(),
                };
                let path = path.clone();
                async move { http.raw(method, &path, body, &[]).await }
            }))
            .await;
            for (c, r) in callers.iter().zip(answers) {
                sent += 1;
                let named = world.map(|w| world_in_path(need, w));
                // Only `fog` is `owned` (by the server's configuration, whether it exists or not).
                let want = expected(mode, c, need, named.as_deref(), named.as_deref() == Some("fog"));
                let ok = match want {
                    None => !matches!(r.status, 401 | 403) && r.status < 500,
                    Some(s) => r.status == s && code_of(&r).as_deref() == Some(if s == 401 { "unauthorized" } else { "forbidden" }),
                };
                if !ok {
                    let want = want.map_or("allowed (not 401/403/5xx)".to_string(), |s| format!("{s}"));
                    bad.push(format!("[{label}] {method} {path} as {}: expected {want}, got {}", c.name, short(&r)));
                }
            }
        }
    }
    (bad, sent)
}

/// Every (method, path) of the OpenAPI document.
async fn documented_routes(http: &Http) -> BTreeSet<(String, String)> {
    let doc = http.get("/openapi.json").await.ok();
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths in the OpenAPI document") {
        for m in ["get", "put", "post", "delete", "options", "head", "patch", "trace"] {
            if item.get(m).is_some() {
                out.insert((m.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// (world name, agents, obstacles) of every world, and the scenario names: what the matrix
/// must not change.
async fn state_of(http: &Http) -> (Vec<(String, u64, u64)>, Vec<String>) {
    let mut worlds: Vec<(String, u64, u64)> = http
        .get("/worlds")
        .await
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["name"].as_str().unwrap().to_string(), w["agents"].as_u64().unwrap(), w["obstacles"].as_u64().unwrap()))
        .collect();
    worlds.sort();
    let mut sc: Vec<String> = http.get("/scenarios").await.ok().as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect();
    sc.sort();
    (worlds, sc)
}

/// Every route of the OpenAPI document × every caller (none, bad tokens, players, a spectator,
/// a token limited to other worlds, the admin) × world (`open` demo, `owned` fog), in the four
/// modes (admin token + player key, player key only, admin token only, dev), against the test's
/// own table of rules: allowed calls are not 401/403, refused ones are exactly 401
/// `unauthorized` or 403 `forbidden`. Every call is harmless if allowed, and the worlds and
/// scenarios are checked unchanged after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_matrix_covers_every_documented_route() {
    let t0 = std::time::Instant::now();
    let srv = server("authz-matrix", BOTH, 20.0);
    let admin = srv.http().with_token(ADMIN);
    create_fog(&admin).await;

    // The document has no route the table lacks, and the table no route that is not served.
    let documented = documented_routes(&srv.http()).await;
    let missing: Vec<_> = documented.iter().filter(|(m, p)| !SPEC.iter().any(|(sm, sp, _)| sm == m && sp == p)).collect();
    assert!(missing.is_empty(), "routes of the OpenAPI document without a rule in this test's table (add them): {missing:?}");
    let stale: Vec<_> = SPEC.iter().filter(|(m, p, _)| !UNDOCUMENTED.contains(p) && !documented.contains(&(m.to_string(), p.to_string()))).collect();
    assert!(stale.is_empty(), "routes of this test's table that the OpenAPI document does not have: {stale:?}");
    assert!(documented.len() >= 40, "only {} documented routes", documented.len());

    let callers = callers();
    let before = state_of(&admin).await;
    let mut bad = Vec::new();
    let mut sent = 0;
    let (b, n) = run_matrix("admin token + player key", &srv, BOTH, &callers).await;
    bad.extend(b);
    sent += n;
    assert_eq!(state_of(&admin).await, before, "an allowed matrix call changed a world or a scenario");
    drop(srv);

    // Player key, no admin token: admin routes are 401 for everyone. (No admin can create
    // `fog` here; its `owned` policy still applies by name, and allowed calls answer 404.)
    let srv = server("authz-matrix-jwt", JWT_ONLY, 20.0);
    let (b, n) = run_matrix("player key only", &srv, JWT_ONLY, &callers).await;
    bad.extend(b);
    sent += n;
    drop(srv);

    // Admin token, no player key: player tokens are not tokens of this server.
    let srv = server("authz-matrix-adm", ADMIN_ONLY, 20.0);
    create_fog(&srv.http().with_token(ADMIN)).await;
    let (b, n) = run_matrix("admin token only", &srv, ADMIN_ONLY, &callers).await;
    bad.extend(b);
    sent += n;
    drop(srv);

    // Dev mode: REST open to tokenless callers, any token refused.
    let srv = server("authz-matrix-dev", DEV, 20.0);
    assert_eq!(srv.http().get("/health").await.ok()["auth"], "dev");
    create_fog(&srv.http()).await;
    let before = state_of(&srv.http()).await;
    let (b, n) = run_matrix("dev", &srv, DEV, &callers).await;
    bad.extend(b);
    sent += n;
    assert_eq!(state_of(&srv.http()).await, before, "an allowed dev-mode matrix call changed a world or a scenario");

    for b in &bad {
        eprintln!("MISMATCH {b}");
    }
    assert!(bad.is_empty(), "{} of {sent} calls disagree with the specification:\n{}", bad.len(), bad.join("\n"));
    eprintln!("authorization matrix: {sent} calls in {:?}", t0.elapsed());
}

// -------------------------------------------------------------- 2. every message kind

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MsgNeed {
    /// Any caller that passed Hello.
    Session,
    /// The admin and players, not spectators.
    Command,
}

/// What an allowed message answers (harmless messages: commands name agent 999999).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Welcome,
    Pong,
    Subscribed,
    Done,
    Spawned,
    UnknownAgent,
}

/// The test's own statement of the rule of every client message kind (by wire name).
const MSG_SPEC: &[(&str, MsgNeed, Answer)] = &[
    ("hello", MsgNeed::Session, Answer::Welcome),
    ("subscribe", MsgNeed::Session, Answer::Subscribed),
    ("unsubscribe", MsgNeed::Session, Answer::Done),
    ("move_to", MsgNeed::Command, Answer::UnknownAgent),
    ("set_behaviors", MsgNeed::Command, Answer::UnknownAgent),
    ("add_behavior", MsgNeed::Command, Answer::UnknownAgent),
    ("remove_behavior", MsgNeed::Command, Answer::UnknownAgent),
    ("reset_behaviors", MsgNeed::Command, Answer::UnknownAgent),
    ("spawn", MsgNeed::Command, Answer::Spawned),
    ("despawn", MsgNeed::Command, Answer::UnknownAgent),
    ("ping", MsgNeed::Session, Answer::Pong),
];

/// One well-formed message of a kind (by wire name).
fn message_of(kind: &str, rid: u32, world: &str, token: &str) -> Option<ClientMsg> {
    let w = world.to_string();
    Some(match kind {
        "hello" => hello(Some(token), Encoding::Binary),
        "ping" => ClientMsg::Ping(proto::Ping { request_id: rid }),
        "subscribe" => ClientMsg::Subscribe(proto::Subscribe { request_id: rid, world: w, area: whole_world(), every_n_ticks: 1 }),
        "unsubscribe" => ClientMsg::Unsubscribe(proto::Unsubscribe { request_id: rid, world: w }),
        "move_to" => move_to_msg(rid, world, vec![NOPE], 10.0, 10.0, 0.0),
        "set_behaviors" => set_behaviors(rid, world, vec![NOPE], vec![seek_point()]),
        "add_behavior" => ClientMsg::AddBehavior(proto::AddBehavior { request_id: rid, world: w, agents: vec![NOPE], entry: seek_point() }),
        "remove_behavior" => ClientMsg::RemoveBehavior(proto::RemoveBehavior { request_id: rid, world: w, agents: vec![NOPE], kind: proto::BehaviorKind::Seek }),
        "reset_behaviors" => ClientMsg::ResetBehaviors(proto::ResetBehaviors { request_id: rid, world: w, agents: vec![NOPE] }),
        "spawn" => spawn_points(rid, world, &[(7.25, 7.75)]),
        "despawn" => despawn(rid, world, vec![NOPE]),
        _ => return None,
    })
}

/// What the server answered a message: an allowed answer, or an error (code, field).
#[derive(Debug)]
enum Got {
    Answer(Answer, Vec<u32>),
    Error(ErrorCode, Option<String>, String),
}

async fn answer_of(ws: &mut Ws, msg: &ClientMsg) -> Got {
    match msg {
        ClientMsg::Hello(_) => {
            ws.send(msg).await;
            match ws.next_until(WAIT, |m| matches!(m, ServerMsg::Welcome(_) | ServerMsg::Error(_))).await {
                Some(ServerMsg::Welcome(_)) => Got::Answer(Answer::Welcome, vec![]),
                Some(ServerMsg::Error(e)) => Got::Error(e.code, e.field, e.message),
                other => panic!("no answer to Hello: {other:?}"),
            }
        }
        ClientMsg::Ping(p) => {
            let rid = p.request_id;
            ws.send(msg).await;
            match ws.next_until(WAIT, |m| matches!(m, ServerMsg::Pong(p) if p.request_id == rid) || matches!(m, ServerMsg::CommandResult(r) if r.request_id == rid)).await {
                Some(ServerMsg::Pong(_)) => Got::Answer(Answer::Pong, vec![]),
                Some(ServerMsg::CommandResult(r)) => match r.result {
                    Outcome::Error(e) => Got::Error(e.code, e.field, e.message),
                    other => panic!("a Ping answered {other:?}"),
                },
                other => panic!("no answer to Ping: {other:?}"),
            }
        }
        _ => match ws.request(msg).await {
            Outcome::Ok(_) => Got::Answer(Answer::Done, vec![]),
            Outcome::Subscribed(_) => Got::Answer(Answer::Subscribed, vec![]),
            Outcome::Spawned(s) => Got::Answer(Answer::Spawned, s.agents),
            Outcome::Error(e) if e.code == ErrorCode::UnknownAgent => Got::Answer(Answer::UnknownAgent, vec![]),
            Outcome::Error(e) => Got::Error(e.code, e.field, e.message),
        },
    }
}

/// Every kind of `ClientMsgKind::ALL` (Hello first) × caller (a player, a spectator, the admin)
/// × world (`open` demo, `owned` fog) is decided: commands from a spectator are `forbidden`,
/// everything else is allowed and answered as a harmless message of its kind is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ws_message_kind_is_decided() {
    let srv = server("authz-ws", BOTH, 20.0);
    create_fog(&srv.http().with_token(ADMIN)).await;
    // Every kind has a rule in this test's table, and the table names no kind that is gone.
    let names: Vec<&str> = ClientMsgKind::ALL.iter().map(|k| k.name()).collect();
    let unruled: Vec<_> = names.iter().filter(|n| !MSG_SPEC.iter().any(|(s, _, _)| s == *n)).collect();
    assert!(unruled.is_empty(), "client message kinds without a rule in this test's table (add them): {unruled:?}");
    let stale: Vec<_> = MSG_SPEC.iter().filter(|(s, _, _)| !names.contains(s)).collect();
    assert!(stale.is_empty(), "kinds of this test's table that steer_proto no longer has: {stale:?}");
    assert_eq!(ClientMsgKind::ALL[0], ClientMsgKind::Hello, "Hello comes first");

    let mut bad = Vec::new();
    let mut decided = 0;
    for (who, token) in [("alice", jwt("alice", "player")), ("spectator", jwt("sam", "spectator")), ("admin", ADMIN.to_string())] {
        let mut ws = ws_as(&srv, &token).await;
        for world in ["demo", "fog"] {
            for kind in ClientMsgKind::ALL {
                let (_, need, answer) = *MSG_SPEC.iter().find(|(s, _, _)| *s == kind.name()).unwrap();
                let rid = ws.rid();
                let msg = message_of(kind.name(), rid, world, &token).unwrap_or_else(|| panic!("no message built for kind `{}`", kind.name()));
                assert_eq!(msg.kind(), *kind);
                let got = answer_of(&mut ws, &msg).await;
                decided += 1;
                let denied = need == MsgNeed::Command && who == "spectator";
                let ok = match (&got, denied) {
                    (Got::Error(ErrorCode::Forbidden, _, _), true) => true,
                    (Got::Answer(a, _), false) => *a == answer,
                    _ => false,
                };
                if !ok {
                    let want = if denied { "forbidden".to_string() } else { format!("{answer:?}") };
                    let got = match &got {
                        Got::Answer(a, ids) => format!("{a:?} {ids:?}"),
                        Got::Error(code, field, message) => format!("error {} (field {field:?}): {message}", code.name()),
                    };
                    bad.push(format!("{} in {world} from {who}: expected {want}, got {got}", kind.name()));
                }
                // Harmless: what an allowed spawn made goes again.
                if let Got::Answer(Answer::Spawned, ids) = got {
                    let rid = ws.rid();
                    let r = ws.request(&despawn(rid, world, ids)).await;
                    assert!(r.is_ok(), "despawning what {who} spawned: {r:?}");
                }
            }
        }
        ws.ping().await;
    }
    assert!(bad.is_empty(), "{} of {decided} messages disagree with the specification:\n{}", bad.len(), bad.join("\n"));
}

// ------------------------------------------------------------------- 3. regressions

/// Finding: with a player key and no admin token, REST calls without a token were the admin.
/// Every tokenless mutation is now 401 and changes nothing: alice's agent stays, stays hers,
/// she is not kicked, no 500 agents appear, no world is created or deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokenless_calls_change_nothing_on_a_jwt_server_without_admin_token() {
    let srv = server("authz-jwt-open", JWT_ONLY, 20.0);
    let obs = srv.http().with_token(&jwt("sam", "spectator"));
    let mut alice = ws_as(&srv, &jwt("alice", "player")).await;
    let rid = alice.rid();
    let ids = spawned(alice.request(&spawn_points(rid, "demo", &[(100.25, 100.75)])).await);
    let a = ids[0];
    let agent_before = obs.get(&format!("/worlds/demo/agents/{a}")).await.ok();
    let count = |v: &Value| v["agents"].as_u64().unwrap();
    let before = count(&obs.get("/worlds/demo").await.ok());
    let anon = srv.http();
    let spawn500 = json!({"group": "x", "count": 500, "area": {"type": "rect", "min_x": 1, "min_y": 1, "max_x": 200, "max_y": 200}});
    let calls: Vec<(&str, String, Option<Value>)> = vec![
        ("DELETE", format!("/worlds/demo/agents/{a}"), None),
        ("PUT", format!("/worlds/demo/agents/{a}/owner"), Some(json!({"player": "mallory"}))),
        ("DELETE", "/worlds/demo/players/alice".into(), None),
        ("POST", "/worlds/demo/agents".into(), Some(spawn500)),
        ("POST", "/worlds".into(), Some(json!({"name": "pwned"}))),
        ("DELETE", "/worlds/demo".into(), None),
    ];
    for (method, path, body) in &calls {
        let bytes = body.as_ref().map(|b| b.to_string().into_bytes());
        let r = anon.raw(method, path, bytes.as_deref(), &[]).await;
        assert_eq!((r.status, code_of(&r).as_deref()), (401, Some("unauthorized")), "tokenless {method} {path}: {}", r.text());
    }
    // Nothing changed.
    let agent_after = obs.get(&format!("/worlds/demo/agents/{a}")).await;
    assert_eq!(agent_after.status, 200, "alice's agent is gone: {}", agent_after.text());
    assert_eq!(agent_after.json()["position"], agent_before["position"]);
    assert_eq!(count(&obs.get("/worlds/demo").await.ok()), before, "the world's agent count changed");
    let names: Vec<String> = obs.get("/worlds").await.ok().as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, vec!["demo".to_string()], "worlds after the refused calls");
    // Still alice's (not mallory's, not nobody's), and alice still connected (not kicked).
    let rid = alice.rid();
    let r = alice.request(&move_to_msg(rid, "demo", vec![a], 120.0, 120.0, 1.0)).await;
    assert!(r.is_ok(), "alice can no longer command her agent: {r:?}");
    alice.ping().await;
    let mut bob = ws_as(&srv, &jwt("bob", "player")).await;
    let rid = bob.rid();
    assert_eq!(error_of(bob.request(&move_to_msg(rid, "demo", vec![a], 5.0, 5.0, 0.0)).await).code, ErrorCode::Forbidden);
}

/// A raw HTTP/1.1 request with exactly these headers (the `Host` among them): (status, JSON
/// body or `Null`).
async fn send_raw(srv: &Server, method: &str, path: &str, headers: &[(&str, String)], body: Option<(&str, &[u8])>) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some((ct, b)) = body {
        req.push_str(&format!("Content-Type: {ct}\r\nContent-Length: {}\r\n", b.len()));
    } else if method != "GET" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body.map_or(&[][..], |(_, b)| b));
    let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(WAIT, async {
        s.write_all(&bytes).await.unwrap();
        s.read_to_end(&mut buf).await.unwrap();
    })
    .await
    .expect("no answer within the wait");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, serde_json::from_slice(&buf[end + 4..]).unwrap_or(Value::Null))
}

/// Findings: a foreign `Host` (DNS rebinding) and a foreign `Origin` on a state-changing call are
/// refused even with the admin token, and change nothing; in dev mode a cross-site form post
/// (not JSON, no token) is 415 and changes nothing, also where the handler reads no JSON body.
/// Each has a control that differs only in the refused header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_hosts_origins_and_form_posts_are_refused() {
    let srv = server("authz-hosts", BOTH, 20.0);
    let admin = srv.http().with_token(ADMIN);
    let port = srv.addr.port();
    let loopback = format!("127.0.0.1:{port}");
    let bearer = format!("Bearer {ADMIN}");
    // Host.
    for host in ["evil.example".to_string(), format!("evil.example:{port}")] {
        let (status, body) = send_raw(&srv, "DELETE", "/worlds/demo", &[("Host", host.clone()), ("Authorization", bearer.clone())], None).await;
        assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")), "DELETE /worlds/demo with Host {host}: {body}");
        admin.get("/worlds/demo").await.expect(200);
    }
    // Control: the same delete of a spare world, refused under the foreign Host, done under a
    // loopback one.
    admin.post("/worlds", &json!({"name": "spare"})).await.expect(201);
    let (status, _) = send_raw(&srv, "DELETE", "/worlds/spare", &[("Host", "evil.example".into()), ("Authorization", bearer.clone())], None).await;
    assert_eq!(status, 403);
    admin.get("/worlds/spare").await.expect(200);
    let (status, body) = send_raw(&srv, "DELETE", "/worlds/spare", &[("Host", loopback.clone()), ("Authorization", bearer.clone())], None).await;
    assert_eq!(status, 204, "control delete: {body}");
    admin.get("/worlds/spare").await.expect(404);

    // Origin: an agent the admin added survives a refused reset, and goes with an allowed one.
    let count = |v: Value| v["agents"].as_u64().unwrap();
    let base = count(admin.get("/worlds/demo").await.ok());
    let spawn = json!({"group": "extra", "count": 1, "area": {"type": "points", "points": [{"x": 150.5, "y": 150.5}]}});
    admin.post("/worlds/demo/agents", &spawn).await.expect(201);
    assert_eq!(count(admin.get("/worlds/demo").await.ok()), base + 1);
    for (host, origin) in [(loopback.clone(), "http://evil.example".to_string()), ("evil.example".to_string(), "http://evil.example".to_string())] {
        let (status, body) = send_raw(&srv, "POST", "/worlds/demo/reset", &[("Host", host.clone()), ("Origin", origin.clone()), ("Authorization", bearer.clone())], None).await;
        assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")), "reset with Host {host}, Origin {origin}: {body}");
        assert_eq!(count(admin.get("/worlds/demo").await.ok()), base + 1, "a refused reset reset the world");
    }
    let own = format!("http://{loopback}");
    let (status, body) = send_raw(&srv, "POST", "/worlds/demo/reset", &[("Host", loopback.clone()), ("Origin", own), ("Authorization", bearer.clone())], None).await;
    assert_eq!(status, 200, "control reset from the server's own origin: {body}");
    assert_eq!(count(admin.get("/worlds/demo").await.ok()), base, "the control reset did not reset");
    drop(srv);

    // Dev mode: a cross-site form (url-encoded, multipart or text/plain, no token) is 415 and
    // changes nothing, also on calls whose handler reads no JSON (reset reads no body, PUT
    // /scenarios reads raw bytes); the same reset without a body is done (the control).
    let dev = server("authz-forms", DEV, 20.0);
    let http = dev.http();
    let host = format!("127.0.0.1:{}", dev.addr.port());
    let base = count(http.get("/worlds/demo").await.ok());
    http.post("/worlds/demo/agents", &spawn).await.expect(201);
    let forms: [(&str, &[u8]); 3] = [
        ("application/x-www-form-urlencoded", b"a=1"),
        ("text/plain", b"{}"),
        ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--x--\r\n"),
    ];
    for (ct, body) in forms {
        let (status, answer) = send_raw(&dev, "POST", "/worlds/demo/reset", &[("Host", host.clone())], Some((ct, body))).await;
        assert_eq!(status, 415, "tokenless POST /worlds/demo/reset with Content-Type {ct}: {answer}");
        assert_eq!(count(http.get("/worlds/demo").await.ok()), base + 1, "a refused form post reset the world");
    }
    let scenario = small_scenario(50.0, &[]).to_string();
    let (status, answer) = send_raw(&dev, "PUT", "/scenarios/csrf", &[("Host", host.clone())], Some(("text/plain", scenario.as_bytes()))).await;
    assert_eq!(status, 415, "tokenless text/plain PUT /scenarios/csrf: {answer}");
    http.get("/scenarios/csrf").await.expect(404);
    let (status, answer) = send_raw(&dev, "POST", "/worlds/demo/reset", &[("Host", host.clone())], None).await;
    assert_eq!(status, 200, "control reset without a body: {answer}");
    assert_eq!(count(http.get("/worlds/demo").await.ok()), base, "the control reset did not reset");
}

/// Finding: a WebSocket despawn naming an existing agent and an unknown id despawned the first
/// before failing on the second. A refused batch now changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_despawn_batch_changes_nothing() {
    let srv = server("authz-batch", BOTH, 20.0);
    let http = srv.http().with_token(ADMIN);
    let mut admin = ws_as(&srv, ADMIN).await;
    let rid = admin.rid();
    let ids = spawned(admin.request(&spawn_points(rid, "demo", &[(120.5, 120.5), (130.5, 130.5)])).await);
    let (a, b) = (ids[0], ids[1]);
    let count = || async { http.get("/worlds/demo").await.ok()["agents"].as_u64().unwrap() };
    let n = count().await;
    for agents in [vec![a, NOPE], vec![b, a, NOPE]] {
        let rid = admin.rid();
        let e = error_of(admin.request(&despawn(rid, "demo", agents.clone())).await);
        assert_eq!(e.code, ErrorCode::UnknownAgent, "despawn {agents:?}: {e:?}");
        for id in [a, b] {
            let r = http.get(&format!("/worlds/demo/agents/{id}")).await;
            assert_eq!(r.status, 200, "agent {id} gone after the refused despawn {agents:?}: {}", r.text());
        }
        assert_eq!(count().await, n);
    }
    // Control: the valid part alone is done.
    let rid = admin.rid();
    assert!(admin.request(&despawn(rid, "demo", vec![a])).await.is_ok());
    assert_eq!(http.get(&format!("/worlds/demo/agents/{a}")).await.status, 404);
    assert_eq!(count().await, n - 1);
}

/// Finding: in an `owned` world a player could probe and target agents it cannot see. Now a
/// hidden agent is exactly as unknown as an id no agent has (same status, code, field and
/// message), while a visible agent of another player is known but `forbidden` to command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_agents_are_unknown_to_players_in_owned_worlds() {
    let srv = server("authz-hidden", BOTH, 20.0);
    let admin = srv.http().with_token(ADMIN);
    create_fog(&admin).await;
    let bob_tok = jwt("bob", "player");
    let bob_http = srv.http().with_token(&bob_tok);
    let mut bob = ws_as(&srv, &bob_tok).await;
    let mut alice = ws_as(&srv, &jwt("alice", "player")).await;
    let rid = bob.rid();
    let mine = spawned(bob.request(&spawn_points(rid, "fog", &[(50.5, 50.5), (60.5, 50.5)])).await);
    let rid = alice.rid();
    let hers = spawned(alice.request(&spawn_points(rid, "fog", &[(350.5, 350.5), (55.5, 62.5)])).await);
    let (hidden, seen) = (hers[0], hers[1]);
    // The premise: bob sees his agents and alice's near one, not the far one; the admin sees all.
    let ids = |v: Value| -> BTreeSet<u64> { v.as_array().unwrap().iter().map(|a| a["id"].as_u64().unwrap()).collect() };
    let bob_sees = ids(bob_http.get("/worlds/fog/agents").await.ok());
    assert_eq!(bob_sees, [mine[0], mine[1], seen].iter().map(|&i| u64::from(i)).collect::<BTreeSet<_>>());
    assert_eq!(ids(admin.get("/worlds/fog/agents").await.ok()).len(), 4);

    // REST reads and commands naming the hidden agent answer exactly as for 999999.
    let same = |what: &str, r_hidden: &Resp, r_none: &Resp, status: u16, code: &str| {
        assert_eq!((r_hidden.status, code_of(r_hidden).as_deref()), (status, Some(code)), "{what} of the hidden agent: {}", r_hidden.text());
        assert_eq!((r_none.status, code_of(r_none).as_deref()), (status, Some(code)), "{what} of {NOPE}: {}", r_none.text());
        let mut h = r_hidden.json();
        if let Some(m) = h["message"].as_str() {
            h["message"] = json!(m.replace(&hidden.to_string(), &NOPE.to_string()));
        }
        assert_eq!(h, r_none.json(), "{what}: the hidden agent is told apart from a nonexistent one");
    };
    for (what, path) in [("GET agent", "/worlds/fog/agents/{}"), ("GET flowfield", "/worlds/fog/flowfield?agent={}")] {
        let r_h = bob_http.get(&path.replace("{}", &hidden.to_string())).await;
        let r_n = bob_http.get(&path.replace("{}", &NOPE.to_string())).await;
        same(what, &r_h, &r_n, 404, "unknown_agent");
    }
    let r_h = bob_http.delete(&format!("/worlds/fog/agents/{hidden}")).await;
    let r_n = bob_http.delete(&format!("/worlds/fog/agents/{NOPE}")).await;
    same("DELETE agent", &r_h, &r_n, 404, "unknown_agent");
    let r_h = bob_http.post("/worlds/fog/move-to", &json!({"agents": [hidden], "target": {"x": 1, "y": 1}})).await;
    let r_n = bob_http.post("/worlds/fog/move-to", &json!({"agents": [NOPE], "target": {"x": 1, "y": 1}})).await;
    same("POST move-to", &r_h, &r_n, 404, "unknown_agent");
    let face_json = |id: u32| json!({"behaviors": [{"behavior": {"type": "face", "target": {"type": "agent", "agent": id}}}]});
    let r_h = bob_http.put(&format!("/worlds/fog/agents/{}/behaviors", mine[0]), &face_json(hidden)).await;
    let r_n = bob_http.put(&format!("/worlds/fog/agents/{}/behaviors", mine[0]), &face_json(NOPE)).await;
    same("PUT behaviors targeting", &r_h, &r_n, 422, "invalid_field");
    assert!(r_h.text().contains("behaviors[0].params.target"), "{}", r_h.text());
    // A visible agent of alice's: readable, not commandable, its flow field forbidden.
    bob_http.get(&format!("/worlds/fog/agents/{seen}")).await.expect(200);
    let r = bob_http.get(&format!("/worlds/fog/flowfield?agent={seen}")).await;
    assert_eq!((r.status, code_of(&r).as_deref()), (403, Some("forbidden")), "{}", r.text());
    // Its MoveTo order (where it goes, whether it is stuck) is alice's to see, not bob's: on every
    // read that shows agents, and in the stuck filter. The admin and alice see it.
    let alice_http = srv.http().with_token(&jwt("alice", "player"));
    alice_http.post("/worlds/fog/move-to", &json!({"agents": [seen], "target": {"x": 56.5, "y": 64.5}})).await.expect(200);
    let order_of = |v: &Value| v.as_array().unwrap().iter().find(|a| a["id"] == seen).map(|a| a["order"].clone());
    assert_eq!(bob_http.get(&format!("/worlds/fog/agents/{seen}")).await.ok()["order"], Value::Null, "bob reads alice's order");
    assert_eq!(order_of(&bob_http.get("/worlds/fog/agents").await.ok()), Some(Value::Null), "bob lists alice's order");
    assert_eq!(order_of(&bob_http.get("/worlds/fog/snapshot").await.ok()["agents"]), Some(Value::Null), "bob's snapshot shows alice's order");
    let stuck = bob_http.get("/worlds/fog/agents?stuck=true").await.ok();
    assert!(stuck.as_array().unwrap().iter().all(|a| mine.contains(&(a["id"].as_u64().unwrap() as u32))), "bob's stuck filter shows others' agents: {stuck}");
    for (who, http) in [("the admin", &admin), ("alice", &alice_http)] {
        let o = http.get(&format!("/worlds/fog/agents/{seen}")).await.ok()["order"].clone();
        assert_eq!(o["target"], json!([56.5, 64.5]), "{who} sees the order: {o}");
    }
    let r = bob_http.put(&format!("/worlds/fog/agents/{}/behaviors", mine[0]), &face_json(seen)).await;
    assert_eq!(r.status, 200, "facing a visible agent: {}", r.text());

    // WebSocket: the same.
    for (what, target) in [("set_behaviors", hidden), ("set_behaviors", NOPE)] {
        let rid = bob.rid();
        let e = error_of(bob.request(&set_behaviors(rid, "fog", vec![mine[0]], vec![face(target)])).await);
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidField, Some("behaviors[0].params.target")), "{what} face {target}: {e:?}");
    }
    let rid = bob.rid();
    let e = error_of(bob.request(&ClientMsg::AddBehavior(proto::AddBehavior { request_id: rid, world: "fog".into(), agents: vec![mine[1]], entry: face(hidden) })).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidField, Some("behavior.params.target")), "{e:?}");
    let rid = bob.rid();
    assert!(bob.request(&set_behaviors(rid, "fog", vec![mine[0]], vec![face(seen)])).await.is_ok(), "facing a visible agent");
    let rid = bob.rid();
    assert!(bob.request(&set_behaviors(rid, "fog", vec![mine[0]], vec![face(mine[1])])).await.is_ok(), "facing an own agent");
    for target in [hidden, NOPE] {
        for msg in [move_to_msg(bob.rid(), "fog", vec![target], 1.0, 1.0, 0.0), despawn(bob.rid(), "fog", vec![target])] {
            let e = error_of(bob.request(&msg).await);
            assert_eq!(e.code, ErrorCode::UnknownAgent, "{msg:?}: {e:?}");
        }
    }
    let rid = bob.rid();
    let e = error_of(bob.request(&move_to_msg(rid, "fog", vec![seen], 1.0, 1.0, 0.0)).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::Forbidden, Some("agents")), "{e:?}");
    // Alice's agents are untouched.
    for id in hers {
        admin.get(&format!("/worlds/fog/agents/{id}")).await.expect(200);
    }
}

// ------------------------------------------------------------------- 4. fog of war

/// What must never reach bob, and what did.
struct Watch {
    hidden: HashSet<u32>,
    hidden_pos: Vec<[f32; 2]>,
    q: proto::Quantization,
    own: HashSet<u32>,
    /// Agent records decoded (keyframes, entered), and those that were bob's own.
    records: u64,
    own_records: u64,
    messages: u64,
}

impl Watch {
    fn record(&mut self, who: &str, a: &proto::QAgent) {
        self.records += 1;
        if self.own.contains(&a.id) {
            self.own_records += 1;
        }
        assert!(!self.hidden.contains(&a.id), "{who}: a record of hidden agent {} reached bob: {a:?}", a.id);
        let p = self.q.dequantize(a).0;
        for h in &self.hidden_pos {
            let d = ((p[0] - h[0]).powi(2) + (p[1] - h[1]).powi(2)).sqrt();
            assert!(d > 1.0, "{who}: agent {} at {p:?} is at a hidden agent's position {h:?}", a.id);
        }
    }

    fn id(&self, who: &str, what: &str, id: u32) {
        assert!(!self.hidden.contains(&id), "{who}: hidden agent {id} in {what}");
    }

    /// Checks one decoded server message and the client state after it.
    fn check(&mut self, who: &str, m: &ServerMsg, ws: &Ws) {
        self.messages += 1;
        let mut keys: Vec<&proto::Keyframe> = Vec::new();
        let mut deltas: Vec<&proto::Delta> = Vec::new();
        match m {
            ServerMsg::Keyframe(k) => keys.push(k),
            ServerMsg::Delta(d) => deltas.push(d),
            ServerMsg::Cells(c) => {
                for e in &c.entries {
                    match e {
                        proto::CellEntry::Keyframe(k) => keys.push(k),
                        proto::CellEntry::Delta(d) => deltas.push(d),
                    }
                }
            }
            ServerMsg::Event(e) => match &e.event {
                proto::EventKind::Spawned(s) => s.agents.iter().for_each(|&i| self.id(who, "a spawned event", i)),
                proto::EventKind::Despawned(d) => d.agents.iter().for_each(|&i| self.id(who, "a despawned event", i)),
                proto::EventKind::DestinationReached(a) | proto::EventKind::PathCompleted(a) => self.id(who, "an agent event", a.agent),
                proto::EventKind::GaveUp(s) | proto::EventKind::Unreachable(s) => self.id(who, "a stopped-short event", s.agent),
                proto::EventKind::TargetLost(t) => {
                    self.id(who, "a target_lost event's agent", t.agent);
                    self.id(who, "a target_lost event's target", t.target);
                }
                // About the world, not an agent: nothing to hide.
                proto::EventKind::TickRate(_) | proto::EventKind::Groups(_) => {}
            },
            ServerMsg::CommandResult(r) => {
                if let Outcome::Spawned(s) = &r.result {
                    s.agents.iter().for_each(|&i| self.id(who, "a spawn result", i));
                }
            }
            ServerMsg::Welcome(_) | ServerMsg::Error(_) | ServerMsg::Pong(_) | ServerMsg::Moved(_) => {}
        }
        for k in keys {
            for a in &k.agents {
                self.record(who, a);
            }
        }
        for d in deltas {
            for a in &d.entered {
                self.record(who, a);
            }
            d.left.iter().for_each(|&i| self.id(who, "a delta's left", i));
            d.changed.iter().filter_map(|c| c.id).for_each(|i| self.id(who, "a delta's changes", i));
        }
        // Everything the client holds now (changes resolved against its state).
        for a in ws.agents() {
            self.id(who, "the client's state", a.id);
            let p = self.q.dequantize(&a).0;
            for h in &self.hidden_pos {
                assert!(((p[0] - h[0]).powi(2) + (p[1] - h[1]).powi(2)).sqrt() > 1.0, "{who}: the client holds agent {} at a hidden agent's position {h:?}", a.id);
            }
        }
    }
}

/// Reads `ws` until `pred` matches (answered) or `until` (`None`), checking every message.
async fn read_checked(ws: &mut Ws, watch: &mut Watch, who: &str, until: Instant, mut pred: impl FnMut(&ServerMsg) -> bool) -> Option<ServerMsg> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match ws.next(left).await {
            Next::Msg(m) => {
                watch.check(who, &m, ws);
                if pred(&m) {
                    return Some(m);
                }
            }
            Next::Timeout => return None,
            Next::Closed(c) => panic!("{who}: connection closed ({c:?})"),
        }
    }
}

/// Sends a command and answers its outcome, checking every message on the way.
async fn request_checked(ws: &mut Ws, watch: &mut Watch, who: &str, msg: &ClientMsg) -> Outcome {
    let rid = msg.request_id().unwrap();
    ws.send(msg).await;
    match read_checked(ws, watch, who, Instant::now() + WAIT, |m| matches!(m, ServerMsg::CommandResult(r) if r.request_id == rid)).await {
        Some(ServerMsg::CommandResult(r)) => r.result,
        other => panic!("{who}: no result for {msg:?}: {other:?}"),
    }
}

/// Checks a REST answer to bob: no hidden agent's exact position anywhere in it.
fn check_body(what: &str, r: &Resp, pos_text: &[String]) {
    let text = r.text();
    for p in pos_text {
        assert!(!text.contains(p.as_str()), "{what}: the body shows a hidden agent's coordinate {p}: {text}");
    }
}

fn agent_ids(v: &Value) -> BTreeSet<u32> {
    v.as_array().unwrap().iter().map(|a| a["id"].as_u64().unwrap() as u32).collect()
}

/// An `owned` world over ≥ 600 ticks: alice's agents stand far outside bob's vision; bob, with
/// his token, keeps using every REST read he may send and every kind of WebSocket access
/// (whole-world and rect subscriptions, pings, commands naming alice's agents). No agent list,
/// record, event or count delivered to bob ever includes alice's agents, no body carries their
/// coordinates, and every call naming them is `unknown_agent` (whole-world reads: 403). A
/// spectator and the admin see them (the control).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fog_of_war_holds_on_every_read() {
    let srv = server("authz-fog", BOTH, 20.0);
    let admin = srv.http().with_token(ADMIN);
    create_fog(&admin).await;
    admin.patch("/worlds/fog", &json!({"tick_rate": 60})).await.ok();
    let bob_tok = jwt("bob", "player");
    let bob = srv.http().with_token(&bob_tok);
    let mut b1 = ws_as(&srv, &bob_tok).await;
    let mut b2 = ws_as(&srv, &bob_tok).await;
    let q = b1.welcome.as_ref().unwrap().quantization;
    let mut w = Watch { hidden: HashSet::new(), hidden_pos: Vec::new(), q, own: HashSet::new(), records: 0, own_records: 0, messages: 0 };

    // Bob's agents, and his subscriptions, before alice's agents exist (so that a spawn event
    // about them would reach him if it leaked).
    let rid = b1.rid();
    let mut mine = spawned(request_checked(&mut b1, &mut w, "b1", &spawn_points(rid, "fog", &[(50.5, 50.5), (60.5, 50.5)])).await);
    // A slow wanderer of bob's keeps his frames flowing (a world at rest sends no deltas); at
    // 2 units/s it stays far from alice's corner for the whole test.
    let wander: proto::BehaviorEntry = serde_json::from_value(json!({"behavior": {"type": "wander"}})).unwrap();
    let msg = ClientMsg::Spawn(proto::Spawn {
        request_id: b1.rid(),
        world: "fog".into(),
        group: "w".into(),
        count: 1,
        area: points(&[(50.5, 60.5)]),
        limits: proto::Limits { max_speed: Some(2.0), ..proto::Limits::default() },
        behaviors: vec![wander],
    });
    mine.extend(spawned(request_checked(&mut b1, &mut w, "b1", &msg).await));
    w.own.extend(mine.iter().copied());
    let sub = |ws: &mut Ws, area| ClientMsg::Subscribe(proto::Subscribe { request_id: ws.rid(), world: "fog".into(), area, every_n_ticks: 1 });
    let m = sub(&mut b1, whole_world());
    assert!(matches!(request_checked(&mut b1, &mut w, "b1", &m).await, Outcome::Subscribed(_)));
    let m = sub(&mut b2, rect_area(300.0, 300.0, 400.0, 400.0));
    assert!(matches!(request_checked(&mut b2, &mut w, "b2", &m).await, Outcome::Subscribed(_)));

    // Alice's agents, far outside bob's vision (20 units); no behaviours: they stand still.
    let mut alice = ws_as(&srv, &jwt("alice", "player")).await;
    let spots = [(331.77, 344.63), (347.19, 358.27), (362.53, 329.91), (338.41, 371.13)];
    let rid = alice.rid();
    let hers = spawned(alice.request(&spawn_points(rid, "fog", &spots)).await);
    assert_eq!(hers.len(), 4);
    let mut pos_text = Vec::new();
    let mut start_views = Vec::new();
    for &id in &hers {
        let v = admin.get(&format!("/worlds/fog/agents/{id}")).await.ok();
        let p = [v["position"][0].as_f64().unwrap() as f32, v["position"][1].as_f64().unwrap() as f32];
        w.hidden_pos.push(p);
        pos_text.push(v["position"][0].to_string());
        pos_text.push(v["position"][1].to_string());
        start_views.push(v["position"].clone());
    }
    w.hidden.extend(hers.iter().copied());
    assert!(pos_text.iter().all(|p| p.len() >= 5 && p.contains('.')), "coordinates not distinctive: {pos_text:?}");
    // The control: the admin and a spectator see them.
    let spectator = srv.http().with_token(&jwt("sam", "spectator"));
    let all = agent_ids(&spectator.get("/worlds/fog/agents").await.ok());
    assert!(hers.iter().all(|h| all.contains(h)), "the spectator does not see alice's agents: {all:?}");
    assert_eq!(admin.get("/worlds/fog").await.ok()["agents"], 7);

    let mine_set: BTreeSet<u32> = mine.iter().copied().collect();
    let start = tick(&admin, "fog").await;
    // A bound for a world that stopped, not a speed: 600 ticks are 30 s at 20 Hz.
    let deadline = Instant::now() + Duration::from_secs(120);
    let areas = [rect_area(300.0, 300.0, 400.0, 400.0), rect_area(0.0, 0.0, 100.0, 100.0), rect_area(0.0, 0.0, 400.0, 400.0), whole_world()];
    let (mut iterations, mut rest_calls, mut refused_cmds) = (0usize, 0usize, 0usize);
    let mut despawned_one = false;
    loop {
        let now_tick = tick(&admin, "fog").await;
        if now_tick >= start + 600 {
            break;
        }
        assert!(Instant::now() < deadline, "600 ticks did not pass within 120 s (tick {now_tick}, start {start})");
        let turn_end = Instant::now() + Duration::from_millis(200);
        let h = hers[iterations % hers.len()];
        // Midway alice despawns one of hers: no event of it may reach bob either.
        if !despawned_one && now_tick >= start + 300 {
            let rid = alice.rid();
            assert!(alice.request(&despawn(rid, "fog", vec![hers[3]])).await.is_ok());
            despawned_one = true;
        }

        // Every REST read bob may send.
        let reads: Vec<(String, u16)> = vec![
            ("/worlds".into(), 200),
            ("/worlds/fog".into(), 200),
            ("/worlds/fog/agents".into(), 200),
            ("/worlds/fog/agents?stuck=true".into(), 200),
            (format!("/worlds/fog/agents/{h}"), 404),
            ("/worlds/fog/snapshot".into(), 200),
            ("/worlds/fog/obstacles".into(), 200),
            ("/worlds/fog/walls".into(), 200),
            (format!("/worlds/fog/flowfield?agent={h}"), 404),
            (format!("/worlds/fog/agents/{h}/avoidance"), 403),
            ("/worlds/fog/recording".into(), 403),
            ("/worlds/fog/replay".into(), 409),
            ("/scenarios".into(), 200),
            ("/scenarios/fogsc".into(), 200),
        ];
        for (path, status) in &reads {
            let r = bob.get(path).await;
            rest_calls += 1;
            assert_eq!(r.status, *status, "bob GET {path}: {}", r.text());
            check_body(&format!("GET {path}"), &r, &pos_text);
            match (*status, path.as_str()) {
                (404, _) => assert_eq!(code_of(&r).as_deref(), Some("unknown_agent"), "GET {path}: {}", r.text()),
                (403, _) => assert_eq!(code_of(&r).as_deref(), Some("forbidden"), "GET {path}: {}", r.text()),
                (_, "/worlds") => {
                    let fog = r.json().as_array().unwrap().iter().find(|x| x["name"] == "fog").cloned().unwrap();
                    assert_eq!(fog["agents"].as_u64(), Some(3), "GET /worlds counts agents bob cannot see: {fog}");
                }
                (_, "/worlds/fog") => assert_eq!(r.json()["agents"].as_u64(), Some(3), "GET /worlds/fog: {}", r.text()),
                (_, "/worlds/fog/agents") => assert_eq!(agent_ids(&r.json()), mine_set, "GET agents"),
                (_, "/worlds/fog/agents?stuck=true") => assert!(agent_ids(&r.json()).is_subset(&mine_set), "GET stuck agents: {}", r.text()),
                (_, "/worlds/fog/snapshot") => {
                    let s = r.json();
                    assert_eq!(agent_ids(&s["agents"]), mine_set, "snapshot agents");
                    assert_eq!(agent_ids(&s["quantized"]), mine_set, "snapshot quantized");
                }
                _ => {}
            }
        }
        // REST commands naming alice's agent.
        let cmds: Vec<(&str, String, Option<Value>)> = vec![
            ("DELETE", format!("/worlds/fog/agents/{h}"), None),
            ("PUT", format!("/worlds/fog/agents/{h}/behaviors"), Some(json!({"behaviors": []}))),
            ("POST", "/worlds/fog/move-to".into(), Some(json!({"agents": [h], "target": {"x": 5, "y": 5}}))),
        ];
        for (method, path, body) in &cmds {
            let bytes = body.as_ref().map(|b| b.to_string().into_bytes());
            let r = bob.raw(method, path, bytes.as_deref(), &[]).await;
            rest_calls += 1;
            assert_eq!((r.status, code_of(&r).as_deref()), (404, Some("unknown_agent")), "bob {method} {path}: {}", r.text());
            check_body(&format!("{method} {path}"), &r, &pos_text);
        }

        // WebSocket: a fresh rect (or whole-world) subscription on b2, a ping and commands
        // naming alice's agent on b1.
        let m = sub(&mut b2, areas[iterations % areas.len()].clone());
        assert!(matches!(request_checked(&mut b2, &mut w, "b2", &m).await, Outcome::Subscribed(_)));
        let rid = b1.rid();
        b1.send(&ClientMsg::Ping(proto::Ping { request_id: rid })).await;
        let pong = read_checked(&mut b1, &mut w, "b1", Instant::now() + WAIT, |m| matches!(m, ServerMsg::Pong(p) if p.request_id == rid)).await;
        assert!(pong.is_some(), "no pong");
        let ws_cmds = [
            (move_to_msg(b1.rid(), "fog", vec![h], 5.0, 5.0, 0.0), ErrorCode::UnknownAgent),
            (despawn(b1.rid(), "fog", vec![h]), ErrorCode::UnknownAgent),
            (ClientMsg::ResetBehaviors(proto::ResetBehaviors { request_id: b1.rid(), world: "fog".into(), agents: vec![h] }), ErrorCode::UnknownAgent),
            (set_behaviors(b1.rid(), "fog", vec![mine[0]], vec![face(h)]), ErrorCode::InvalidField),
        ];
        for (msg, code) in &ws_cmds {
            let e = error_of(request_checked(&mut b1, &mut w, "b1", msg).await);
            refused_cmds += 1;
            assert_eq!(e.code, *code, "{msg:?}: {e:?}");
            assert!(!w.hidden_pos.iter().any(|p| e.message.contains(&p[0].to_string())), "{e:?}");
        }
        // The rest of the turn: read (and check) what the subscriptions deliver.
        read_checked(&mut b1, &mut w, "b1", turn_end, |_| false).await;
        read_checked(&mut b2, &mut w, "b2", Instant::now() + Duration::from_millis(20), |_| false).await;
        iterations += 1;
    }
    // Drain what is left, then the controls: the watch saw bob's own agents all along, frames
    // flowed over the whole window, and alice's agents stood where the checks looked for them.
    read_checked(&mut b1, &mut w, "b1", Instant::now() + Duration::from_millis(300), |_| false).await;
    read_checked(&mut b2, &mut w, "b2", Instant::now() + Duration::from_millis(300), |_| false).await;
    assert!(despawned_one, "alice's despawn never happened");
    assert!(w.own_records > 0 && w.records > 0, "no agent record decoded (records {}, own {})", w.records, w.own_records);
    assert!(b1.last_tick >= start + 550, "b1's frames stopped at tick {} (start {start})", b1.last_tick);
    let held: BTreeSet<u32> = b1.agents().iter().map(|a| a.id).collect();
    assert_eq!(held, mine_set, "b1 holds other agents than bob's own");
    for (i, &id) in hers.iter().enumerate().take(3) {
        let v = admin.get(&format!("/worlds/fog/agents/{id}")).await.ok();
        assert_eq!(v["position"], start_views[i], "alice's agent {id} moved: the position checks looked in the wrong place");
    }
    eprintln!(
        "fog of war: {} ticks, {iterations} turns, {rest_calls} REST calls, {refused_cmds} refused WS commands, {} WS messages, {} records ({} bob's)",
        tick(&admin, "fog").await - start,
        w.messages,
        w.records,
        w.own_records
    );
}
