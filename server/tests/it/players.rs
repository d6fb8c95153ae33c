//! Issue 14: players, sessions and authority — identity (player tokens, dev mode), ownership by
//! player, resume within the grace period, the orphan policy, quotas, and visibility decided by
//! the server (every frame decoded).

use std::time::Duration;

use steer_proto::{self as proto, ClientMsg, Encoding, ErrorCode, Outcome, Role, ServerMsg};
use steerd_tests::*;

const SECRET: &str = "players-test-secret-0123456789";

/// A player token signed with `secret`, expiring `ttl` seconds from now (negative: expired).
fn token_with(secret: &str, sub: &str, role: &str, ttl: i64, worlds: Option<&[&str]>, team: Option<&str>) -> String {
    let exp = (steerd::auth::now_secs() as i64 + ttl).max(0) as u64;
    let claims = steerd::auth::Claims {
        sub: sub.into(),
        role: Some(role.into()),
        worlds: worlds.map(|w| w.iter().map(|s| s.to_string()).collect()),
        team: team.map(str::to_string),
        exp,
        nbf: None,
        iat: None,
    };
    steerd::auth::mint(secret, &claims).unwrap()
}

fn token(sub: &str) -> String {
    token_with(SECRET, sub, "player", 3600, None, None)
}

/// A server with player tokens required and the `[players]` settings given (TOML body).
fn server(tag: &str, players_toml: &str) -> Server {
    let dir = TempDir::new(&format!("{tag}-cfg"));
    let cfg = dir.path().join("steerd.toml");
    std::fs::write(&cfg, format!("[auth]\nplayer_jwt_secret = \"{SECRET}\"\n\n[players]\n{players_toml}\n")).unwrap();
    let srv = Server::fresh(tag, Opts::default().arg("--config", cfg.to_string_lossy().to_string()).arg("--admin-token", "adm"));
    // The config file is read at start; the dir can go.
    drop(dir);
    srv
}

/// Connects and says Hello with `hello`; answers the connection and its Welcome, or the error.
async fn join(srv: &Server, msg: ClientMsg) -> (Ws, Result<proto::Welcome, proto::ErrorBody>) {
    let mut ws = Ws::connect(srv.addr).await;
    ws.send(&msg).await;
    let r = match ws.next_until(WAIT, |m| matches!(m, ServerMsg::Welcome(_) | ServerMsg::Error(_))).await {
        Some(ServerMsg::Welcome(w)) => Ok(w),
        Some(ServerMsg::Error(e)) => Err(e),
        other => panic!("no answer to Hello: {other:?}"),
    };
    (ws, r)
}

fn hello_with(token: Option<&str>, resume: Option<&str>) -> ClientMsg {
    ClientMsg::Hello(proto::Hello { protocol_version: proto::PROTOCOL_VERSION, token: token.map(str::to_string), encoding: Encoding::Binary, resume: resume.map(str::to_string) })
}

async fn player(srv: &Server, sub: &str) -> (Ws, proto::Welcome) {
    let (ws, w) = join(srv, hello_with(Some(&token(sub)), None)).await;
    (ws, w.unwrap_or_else(|e| panic!("{sub} refused: {e:?}")))
}

fn spawn_at(ws: &mut Ws, world: &str, count: u32, r: [f32; 4]) -> ClientMsg {
    spawn_msg(ws.rid(), world, count, r, proto::Limits::default())
}

async fn agent_ids(http: &Http, world: &str) -> Vec<u32> {
    let s = http.get(&format!("/worlds/{world}/snapshot")).await.ok();
    s["agents"].as_array().unwrap().iter().map(|a| a["id"].as_u64().unwrap() as u32).collect()
}

/// Player A spawns 3 agents, drops, and resumes within the grace period: its subscription comes
/// back with keyframes that equal the server's state, and MoveTo on its agents succeeds. Player
/// B's MoveTo on them is `forbidden`; a second connection of A commands them. (The grace is a
/// minute, so "within" holds however slowly this machine gets there; past the grace is
/// `every_connection_gone_past_the_grace_despawns_the_agents`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_within_grace_keeps_the_agents_and_their_command() {
    let srv = server("resume", "session_grace_secs = 60\norphan_policy = \"despawn\"");
    let http = srv.http().with_token("adm");
    let (mut a, wa) = player(&srv, "alice").await;
    assert_eq!((wa.player_id.as_str(), wa.role, wa.session_grace_secs), ("alice", Role::Player, 60));
    assert!(wa.resume_token.len() >= 32, "resume token {:?}", wa.resume_token);
    a.subscribe("demo", whole_world()).await;
    let msg = spawn_at(&mut a, "demo", 3, [10.0, 10.0, 30.0, 30.0]);
    let mine = spawned(a.request(&msg).await);
    assert_eq!(mine.len(), 3);
    let open = metric(&http.get("/metrics").await.ok_text(), "steerd_connections");
    a.close().await;

    // Within the grace period: resume, once the server has seen the drop. The world is paused
    // so that the resynced state can be compared with the server's exactly, and stepped once:
    // a resumed subscription starts from the newest frame's keyframes, and a world paused
    // before its first tick has published none (this test can get here that fast).
    let t0 = std::time::Instant::now();
    while metric(&http.get("/metrics").await.ok_text(), "steerd_connections") >= open {
        assert!(t0.elapsed() < WAIT, "the server still counts alice's connection");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    http.patch("/worlds/demo", &json!({"paused": true})).await.ok();
    http.post("/worlds/demo/step", &json!({"ticks": 1})).await.ok();
    let (mut a2, w2) = join(&srv, hello_with(None, Some(&wa.resume_token))).await;
    let w2 = w2.expect("resume refused");
    assert_eq!((w2.player_id.as_str(), w2.role), ("alice", Role::Player));
    assert_ne!(w2.resume_token, wa.resume_token, "a resume token is used once");
    let snap = http.get("/worlds/demo/snapshot").await.ok();
    let mut server_q: Vec<proto::QAgent> = serde_json::from_value(snap["quantized"].clone()).unwrap();
    server_q.sort_by_key(|q| q.id);
    // Read until the resynced view equals the server's (bounded against a hang only).
    while a2.keyframes == 0 || a2.agents() != server_q {
        match a2.next(WAIT).await {
            Next::Msg(_) => {}
            Next::Timeout | Next::Closed(_) => break,
        }
    }
    assert!(a2.keyframes > 0, "no keyframes after the resume");
    assert_eq!(a2.agents(), server_q, "the resynced state differs from the server's");
    for id in &mine {
        assert!(a2.agents().iter().any(|q| q.id == *id), "own agent {id} not in the resynced state");
    }
    http.patch("/worlds/demo", &json!({"paused": false})).await.ok();
    let rid = a2.rid();
    let r = a2.request(&move_to_msg(rid, "demo", mine.clone(), 60.0, 60.0, 1.0)).await;
    assert!(r.is_ok(), "MoveTo after resume: {r:?}");
    // The old token does not resume again.
    let (_x, again) = join(&srv, hello_with(None, Some(&wa.resume_token))).await;
    assert_eq!(again.unwrap_err().code, ErrorCode::Unauthorized);

    // Player B may not command them.
    let (mut b, _) = player(&srv, "bob").await;
    let rid = b.rid();
    let e = error_of(b.request(&move_to_msg(rid, "demo", mine.clone(), 5.0, 5.0, 0.0)).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::Forbidden, Some("agents")), "{e:?}");

    // A second connection of alice (same token) commands them too.
    let (mut a3, _) = player(&srv, "alice").await;
    let rid = a3.rid();
    assert!(a3.request(&move_to_msg(rid, "demo", mine.clone(), 70.0, 70.0, 1.0)).await.is_ok());
    assert_eq!(agent_ids(&http, "demo").await.iter().filter(|id| mine.contains(id)).count(), 3, "alice's agents are all there");
    drop(a2);
}

/// Every connection of player A gone for longer than the grace period (policy `despawn`): its
/// agents are removed, and A, back with a fresh connection, gets the `despawned` event it
/// missed; player B saw nothing of it as a command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_gone_past_the_grace_despawns_the_agents() {
    let srv = server("despawn", "session_grace_secs = 1\norphan_policy = \"despawn\"");
    let http = srv.http().with_token("adm");
    let (mut a, _) = player(&srv, "alice").await;
    let msg = spawn_at(&mut a, "demo", 3, [10.0, 10.0, 30.0, 30.0]);
    let mine = spawned(a.request(&msg).await);
    assert_eq!(mine.len(), 3);
    let (a2, _) = player(&srv, "alice").await;
    let (mut b, _) = player(&srv, "bob").await;
    // Waits for the condition (however long past the grace the server takes to act).
    a.close().await;
    a2.close().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let ids = agent_ids(&http, "demo").await;
        if !mine.iter().any(|m| ids.contains(m)) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "alice's agents still there long after the grace period");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // B saw nothing of it as a command; A, back, gets the event it missed.
    let (mut a4, _) = player(&srv, "alice").await;
    let got = a4
        .next_until(WAIT, |m| matches!(m, ServerMsg::Event(e) if matches!(&e.event, proto::EventKind::Despawned(d) if mine.iter().all(|x| d.agents.contains(x)))))
        .await;
    assert!(got.is_some(), "alice did not get `despawned` for {mine:?}; events: {:?}", a4.events);
    let players = http.get("/worlds/demo/players").await.ok();
    let alice = players.as_array().unwrap().iter().find(|p| p["player"] == "alice").cloned();
    if let Some(p) = alice {
        assert_eq!(p["agents"], 0, "{players}");
    }
    b.ping().await;
}

/// Events about a player's agents reach every connection of that player, subscribed or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_events_reach_every_connection_unsubscribed() {
    let srv = server("owner-events", "");
    let (mut a, _) = player(&srv, "alice").await;
    let (mut a_other, _) = player(&srv, "alice").await;
    let msg = spawn_at(&mut a, "demo", 1, [100.0, 100.0, 101.0, 101.0]);
    let ids = spawned(a.request(&msg).await);
    let rid = a.rid();
    assert!(a.request(&move_to_msg(rid, "demo", ids.clone(), 104.0, 100.0, 0.5)).await.is_ok());
    for ws in [&mut a, &mut a_other] {
        let got = ws.next_until(Duration::from_secs(20), |m| matches!(m, ServerMsg::Event(e) if e.event == proto::EventKind::DestinationReached(proto::AgentEvent { agent: ids[0] }))).await;
        assert!(got.is_some(), "no destination_reached without a subscription; events {:?}", ws.events);
        assert_eq!(ws.keyframes + ws.deltas, 0, "frames without a subscription");
    }
}

/// Forged, expired, wrong-world and malformed tokens get `unauthorized` with a reason; without
/// a token (player tokens required) too; a spectator commands nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_are_unauthorized() {
    let srv = server("tokens", "");
    let cases = [
        (Some(token_with("some-other-secret-0123456789", "mallory", "player", 3600, None, None)), "signature"),
        (Some(token_with(SECRET, "alice", "player", -3600, None, None)), "expired"),
        (Some("not.a.jwt".to_string()), "malformed"),
        (Some(token_with(SECRET, "alice", "admin", 3600, None, None)), "role"),
        (None, "required"),
    ];
    for (tok, reason) in cases {
        let (mut ws, r) = join(&srv, hello_with(tok.as_deref(), None)).await;
        let e = r.expect_err("a bad token was welcomed");
        assert_eq!(e.code, ErrorCode::Unauthorized, "{e:?}");
        assert!(e.message.contains(reason), "reason `{}` does not say {reason}", e.message);
        assert!(ws.expect_close(WAIT).await.is_some());
    }
    // A token for other worlds: welcomed without `demo`, and `demo` is unauthorized.
    let t = token_with(SECRET, "carol", "player", 3600, Some(&["arena"]), None);
    let (mut ws, w) = join(&srv, hello_with(Some(&t), None)).await;
    assert!(w.unwrap().worlds.iter().all(|w| w.name != "demo"));
    let rid = ws.rid();
    let r = ws.request(&ClientMsg::Subscribe(proto::Subscribe { request_id: rid, world: "demo".into(), area: whole_world(), every_n_ticks: 1 })).await;
    let e = error_of(r);
    assert_eq!(e.code, ErrorCode::Unauthorized, "{e:?}");
    assert!(e.message.contains("not valid for world `demo`"), "{}", e.message);
    let msg = spawn_at(&mut ws, "demo", 1, [1.0, 1.0, 2.0, 2.0]);
    assert_eq!(error_of(ws.request(&msg).await).code, ErrorCode::Unauthorized);
    // The same over REST: 401 with the reason.
    let http = srv.http();
    let body = json!({"group": "g", "count": 1, "area": {"type": "rect", "min_x": 1, "min_y": 1, "max_x": 2, "max_y": 2}});
    let r = http.with_token(&t).post("/worlds/demo/agents", &body).await;
    assert_eq!(r.status, 401, "{}", r.text());
    let r = http.with_token(&token_with(SECRET, "alice", "player", -3600, None, None)).post("/worlds/demo/agents", &body).await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("expired"));
    // A valid player token on REST spawns agents owned by that player.
    let r = http.with_token(&token("dave")).post("/worlds/demo/agents", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["agents"][0].as_u64().unwrap() as u32;
    let (mut dave, _) = player(&srv, "dave").await;
    let rid = dave.rid();
    assert!(dave.request(&move_to_msg(rid, "demo", vec![id], 9.0, 9.0, 0.0)).await.is_ok());
    // A spectator watches everything and commands nothing.
    let (mut spec, w) = join(&srv, hello_with(Some(&token_with(SECRET, "sam", "spectator", 3600, None, None)), None)).await;
    assert_eq!(w.unwrap().role, Role::Spectator);
    spec.subscribe("demo", whole_world()).await;
    let rid = spec.rid();
    assert_eq!(error_of(spec.request(&move_to_msg(rid, "demo", vec![id], 9.0, 9.0, 0.0)).await).code, ErrorCode::Forbidden);
    let msg = spawn_at(&mut spec, "demo", 1, [1.0, 1.0, 2.0, 2.0]);
    assert_eq!(error_of(spec.request(&msg).await).code, ErrorCode::Forbidden);
}

/// The 257th agent of a player is refused with `quota_exceeded` and changes nothing; another
/// player and the admin are not limited by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_257th_agent_is_a_quota_error() {
    let srv = server("quota", "");
    let http = srv.http().with_token("adm");
    let (mut a, _) = player(&srv, "alice").await;
    let msg = spawn_at(&mut a, "demo", 200, [1.0, 1.0, 100.0, 100.0]);
    assert_eq!(spawned(a.request(&msg).await).len(), 200);
    let msg = spawn_at(&mut a, "demo", 56, [1.0, 1.0, 100.0, 100.0]);
    assert_eq!(spawned(a.request(&msg).await).len(), 56);
    let before = agent_ids(&http, "demo").await;
    let msg = spawn_at(&mut a, "demo", 1, [1.0, 1.0, 100.0, 100.0]);
    let e = error_of(a.request(&msg).await);
    assert_eq!(e.code, ErrorCode::QuotaExceeded, "{e:?}");
    assert!(e.message.contains("256"), "{}", e.message);
    assert_eq!(agent_ids(&http, "demo").await, before, "a refused spawn changed the world");
    // Over REST with alice's token: the same quota.
    let body = json!({"group": "g", "count": 1, "area": {"type": "rect", "min_x": 1, "min_y": 1, "max_x": 2, "max_y": 2}});
    let r = http.with_token(&token("alice")).post("/worlds/demo/agents", &body).await;
    assert_eq!((r.status, r.json()["error"].as_str()), (429, Some("quota_exceeded")), "{}", r.text());
    assert_eq!(agent_ids(&http, "demo").await, before);
    // Another player may spawn; the admin is exempt.
    let (mut b, _) = player(&srv, "bob").await;
    let msg = spawn_at(&mut b, "demo", 1, [1.0, 1.0, 2.0, 2.0]);
    assert_eq!(spawned(b.request(&msg).await).len(), 1);
    let mut admin = Ws::connect(srv.addr).await;
    let w = admin.hello(Some("adm")).await;
    assert_eq!(w.role, Role::Admin);
    let msg = spawn_at(&mut admin, "demo", 300, [1.0, 1.0, 100.0, 100.0]);
    assert_eq!(spawned(admin.request(&msg).await).len(), 300);
    // Connections per player are bounded too (default 8).
    let mut extra = Vec::new();
    for _ in 0..7 {
        extra.push(player(&srv, "alice").await.0);
    }
    let (_ws, r) = join(&srv, hello_with(Some(&token("alice")), None)).await;
    assert_eq!(r.unwrap_err().code, ErrorCode::QuotaExceeded);
}

/// Dev mode (no player key): anonymous clients get a fresh id each, and a flood of them cannot
/// push a world past its quotas (agents per player, the world's own cap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_flood_cannot_exceed_quotas() {
    let srv = Server::fresh("devflood", Opts::default().arg("--max-agents-per-world", "1500").arg("--max-agents-per-player", "100"));
    let http = srv.http();
    let health = http.get("/health").await.ok();
    assert_eq!(health["auth"], "dev", "{health}");
    let base = agent_ids(&http, "demo").await.len();
    let mut ids = std::collections::HashSet::new();
    let mut refused = 0;
    let mut clients = Vec::new();
    for _ in 0..20 {
        let mut ws = Ws::connect(srv.addr).await;
        let w = ws.hello(None).await;
        assert!(w.player_id.starts_with("anon-") && w.role == Role::Player, "{w:?}");
        assert!(ids.insert(w.player_id.clone()), "anonymous id {} given twice", w.player_id);
        for _ in 0..2 {
            let msg = spawn_at(&mut ws, "demo", 100, [1.0, 1.0, 300.0, 300.0]);
            match ws.request(&msg).await {
                Outcome::Spawned(s) => assert_eq!(s.agents.len(), 100),
                Outcome::Error(e) => {
                    assert_eq!(e.code, ErrorCode::QuotaExceeded, "{e:?}");
                    refused += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        clients.push(ws);
    }
    let n = agent_ids(&http, "demo").await.len();
    assert!(n <= 1500, "the world grew to {n} agents past its cap of 1500");
    // Each client's second spawn passes its 100-agent quota: refused; and the world filled up.
    assert!(refused >= 20, "only {refused} spawns refused");
    assert!(n > base, "nobody could spawn");
}

/// An `owned` world: a player subscribed to `whole_world` decodes, over 600 ticks, no record of
/// an agent outside the AOI cells that intersect the vision discs of its own agents (it sees
/// foreign agents as its agents come near them, and never the far ones). A spectator sees all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_visibility_hides_what_a_player_cannot_see() {
    const R: f32 = 60.0;
    let srv = server("fog", &format!("[players.worlds.fog]\nvisibility = \"owned\"\nvision_radius = {R}\n"));
    let admin = srv.http().with_token("adm");
    // 1000×1000, 300 wanderers of nobody's everywhere.
    let mut sc = wander_scenario(1000.0, 300);
    sc["edge"] = json!("clamp");
    create_world(&admin, "fog", "fogsc", &sc).await;
    let (mut a, w) = player(&srv, "alice").await;
    let info = w.worlds.iter().find(|x| x.name == "fog").unwrap().clone();
    let q = w.quantization;
    let mut spec = Ws::connect(srv.addr).await;
    spec.send(&hello_with(Some(&token_with(SECRET, "sam", "spectator", 3600, None, None)), None)).await;
    spec.next_until(WAIT, |m| matches!(m, ServerMsg::Welcome(_))).await.unwrap();
    spec.subscribe("fog", whole_world()).await;
    // Alice's two scouts start in a corner, then cross the map.
    let msg = spawn_msg(a.rid(), "fog", 2, [20.0, 20.0, 60.0, 60.0], proto::Limits { max_speed: Some(30.0), ..proto::Limits::default() });
    let mine = spawned(a.request(&msg).await);
    a.subscribe("fog", whole_world()).await;
    let rid = a.rid();
    assert!(a.request(&move_to_msg(rid, "fog", mine.clone(), 900.0, 900.0, 5.0)).await.is_ok());
    let diag = info.aoi_cell_size * std::f32::consts::SQRT_2;
    let start = tick(&admin, "fog").await;
    let mut seen_foreign = std::collections::HashSet::new();
    let mut records = 0u64;
    let mut last = start;
    while last < start + 600 {
        let m = match a.next(Duration::from_secs(10)).await {
            Next::Msg(m) => m,
            other => panic!("stream ended: {other:?}"),
        };
        // Own agents as the client holds them now (at most a tick off the record's).
        let own: Vec<[f32; 2]> = a.agents().iter().filter(|x| mine.contains(&x.id)).map(|x| q.dequantize(x).0).collect();
        // Everything the client now holds of the message's cells is what the server revealed.
        let (wid, cells): (u32, Vec<u32>) = match &m {
            ServerMsg::Keyframe(k) => {
                last = last.max(k.tick);
                (k.world, vec![k.cell])
            }
            ServerMsg::Delta(d) => {
                last = last.max(d.tick);
                (d.world, vec![d.cell])
            }
            ServerMsg::Cells(c) => {
                last = last.max(c.tick);
                (c.world, c.entries.iter().map(|e| e.cell()).collect())
            }
            _ => continue,
        };
        let recs: Vec<proto::QAgent> = cells.iter().flat_map(|&cell| a.state.cell(wid, cell).map(|c| c.agents().to_vec()).unwrap_or_default()).collect();
        for r in recs {
            records += 1;
            if mine.contains(&r.id) {
                continue;
            }
            let p = q.dequantize(&r).0;
            let near = own.iter().any(|o| ((o[0] - p[0]).powi(2) + (o[1] - p[1]).powi(2)).sqrt() <= R + diag + 5.0);
            assert!(near, "tick {last}: decoded agent {} at {p:?}, farther than vision {R} + a cell from own agents {own:?}", r.id);
            seen_foreign.insert(r.id);
        }
    }
    assert!(records > 0, "no records at all");
    assert!(!seen_foreign.is_empty(), "the scouts saw no foreign agent in 600 ticks");
    assert!(seen_foreign.len() < 300, "alice saw every agent");
    // The spectator saw everything, the scouts included.
    // (Unread for 600 ticks, it is resynced from keyframes: read until they are in.)
    spec.read_until(WAIT, |w| w.agents().len() == 302).await;
    let all = spec.agents();
    assert_eq!(all.len(), 302, "spectator holds {} agents", all.len());
    // A `whole_world` subscription in an owned world narrows: the player's state holds far fewer.
    assert!(a.agents().len() < 302);
}

/// `GET /worlds/{w}/players`, kick (`DELETE`), and handing an agent to a player (`PUT
/// /worlds/{w}/agents/{id}/owner`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_list_kick_and_reassign() {
    let srv = server("ops", "orphan_policy = \"keep\"");
    let http = srv.http().with_token("adm");
    let (mut a, _) = player(&srv, "alice").await;
    let msg = spawn_at(&mut a, "demo", 2, [1.0, 1.0, 10.0, 10.0]);
    let ids = spawned(a.request(&msg).await);
    let players = http.get("/worlds/demo/players").await.ok();
    let row = players.as_array().unwrap().iter().find(|p| p["player"] == "alice").cloned().unwrap_or_else(|| panic!("{players}"));
    assert_eq!((row["agents"].as_u64(), row["connections"].as_u64(), row["role"].as_str()), (Some(2), Some(1), Some("player")), "{row}");
    // Players may not list (admin only).
    assert_eq!(srv.http().with_token(&token("alice")).get("/worlds/demo/players").await.status, 403);
    // Hand one agent to bob: bob commands it, alice no longer.
    let r = http.put(&format!("/worlds/demo/agents/{}/owner", ids[0]), &json!({"player": "bob"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (mut b, _) = player(&srv, "bob").await;
    let rid = b.rid();
    assert!(b.request(&move_to_msg(rid, "demo", vec![ids[0]], 5.0, 5.0, 0.0)).await.is_ok());
    let rid = a.rid();
    assert_eq!(error_of(a.request(&move_to_msg(rid, "demo", vec![ids[0]], 5.0, 5.0, 0.0)).await).code, ErrorCode::Forbidden);
    // Kick alice: her connection closes with 4003; `keep` leaves her agent.
    let r = http.delete("/worlds/demo/players/alice").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(a.expect_close(WAIT).await, Some(4003));
    assert!(agent_ids(&http, "demo").await.contains(&ids[1]));
    assert_eq!(http.delete("/worlds/demo/players/nobody").await.status, 404);
    // Only the admin may reassign.
    let r = srv.http().with_token(&token("bob")).put(&format!("/worlds/demo/agents/{}/owner", ids[1]), &json!({"player": "bob"})).await;
    assert_eq!(r.status, 403, "{}", r.text());
}

/// Under `owned` visibility a behaviour's target that leaves its owner's vision acts as gone:
/// bob's agent faces alice's agent while it is in sight; once alice moves it out of bob's
/// vision, bob gets exactly one `target_lost` event for (his agent, her agent), and the `face`
/// entry is gone from his agent. A target he never saw is refused when the command is given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_leaves_vision_is_lost_once() {
    let srv = server("target-lost", "[players.worlds.fog]\nvisibility = \"owned\"\nvision_radius = 20\n");
    let admin = srv.http().with_token("adm");
    create_world(&admin, "fog", "fogsc", &small_scenario(400.0, &[])).await;
    let (mut a, _) = player(&srv, "alice").await;
    let (mut b, _) = player(&srv, "bob").await;
    let fast = proto::Limits { max_speed: Some(40.0), ..proto::Limits::default() };
    let msg = spawn_msg(a.rid(), "fog", 1, [50.0, 50.0, 51.0, 51.0], fast.clone());
    let hers = spawned(a.request(&msg).await);
    let msg = spawn_msg(b.rid(), "fog", 1, [60.0, 50.0, 61.0, 51.0], fast);
    let his = spawned(b.request(&msg).await);
    let face = |rid: u32, target: u32| {
        ClientMsg::SetBehaviors(proto::SetBehaviors {
            request_id: rid,
            world: "fog".into(),
            agents: his.clone(),
            behaviors: vec![proto::BehaviorEntry::from(proto::Behavior::Face(proto::Face {
                target: proto::Target::Agent(proto::AgentRef { agent: target }),
                align: proto::AlignParams::default(),
            }))],
        })
    };
    // A target bob cannot see (an admin agent far away) is refused, naming the field.
    let far = admin.post("/worlds/fog/agents", &json!({"group": "far", "count": 1, "area": {"type": "rect", "min_x": 350, "min_y": 350, "max_x": 351, "max_y": 351}})).await.ok();
    let far_id = far["agents"][0].as_u64().unwrap() as u32;
    let msg = face(b.rid(), far_id);
    let e = error_of(b.request(&msg).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidField, Some("behaviors[0].params.target")), "{e:?}");
    // Alice's agent, 10 units away, is in sight: accepted.
    let msg = face(b.rid(), hers[0]);
    assert!(b.request(&msg).await.is_ok());
    let bob = srv.http().with_token(&token("bob"));
    assert_eq!(bob.get(&format!("/worlds/fog/agents/{}", his[0])).await.ok()["behaviors"], json!(["face"]));
    // She walks away; bob's agent loses sight of it.
    let msg = move_to_msg(a.rid(), "fog", hers.clone(), 350.0, 50.0, 1.0);
    assert!(a.request(&msg).await.is_ok());
    let lost = b
        .next_until(Duration::from_secs(20), |m| matches!(m, ServerMsg::Event(e) if matches!(e.event, proto::EventKind::TargetLost(_))))
        .await
        .unwrap_or_else(|| panic!("no target_lost within 20 s"));
    let ServerMsg::Event(proto::Event { event: proto::EventKind::TargetLost(t), .. }) = lost else { unreachable!() };
    assert_eq!((t.agent, t.target), (his[0], hers[0]));
    assert_eq!(bob.get(&format!("/worlds/fog/agents/{}", his[0])).await.ok()["behaviors"], json!([]), "the face entry is removed");
    assert_eq!(bob.get(&format!("/worlds/fog/agents/{}", hers[0])).await.json()["error"], "unknown_agent", "her agent is hidden now");
    // Exactly one: no second target_lost over the next second.
    let again = b.next_until(Duration::from_secs(1), |m| matches!(m, ServerMsg::Event(e) if matches!(e.event, proto::EventKind::TargetLost(_)))).await;
    assert!(again.is_none(), "a second target_lost: {again:?}");
}

/// Under `owned` visibility with spawn zones, a player spawns only inside its (team's) zones or
/// where it sees now: a scout next to the enemy is refused, and the refused spawn changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawns_stay_in_zones_or_in_sight() {
    let srv = server(
        "zones",
        "[players.worlds.fog]\nvisibility = \"owned\"\nvision_radius = 60\n\n[[players.worlds.fog.spawn_zones]]\nteam = \"red\"\nmin = [0.0, 0.0]\nmax = [50.0, 50.0]\n",
    );
    let admin = srv.http().with_token("adm");
    create_world(&admin, "fog", "fogsc", &small_scenario(400.0, &[])).await;
    let (mut a, _) = join(&srv, hello_with(Some(&token_with(SECRET, "alice", "player", 3600, None, Some("red"))), None)).await;
    a.welcome.as_ref().expect("alice joined");
    let (mut b, _) = player(&srv, "bob").await;
    let count = |http: Http| async move { http.get("/worlds/fog").await.ok()["agents"].as_u64().unwrap() };
    let spawn = |ws: &mut Ws, r: [f32; 4]| spawn_msg(ws.rid(), "fog", 1, r, proto::Limits::default());
    // In her team's zone: accepted.
    let msg = spawn(&mut a, [10.0, 10.0, 20.0, 20.0]);
    assert_eq!(spawned(a.request(&msg).await).len(), 1);
    // Next to where nobody of hers sees: refused, nothing spawned.
    let before = count(admin.clone()).await;
    let msg = spawn(&mut a, [300.0, 300.0, 301.0, 301.0]);
    let e = error_of(a.request(&msg).await);
    assert_eq!(e.code, ErrorCode::Forbidden, "{e:?}");
    assert!(e.message.contains("spawn zones"), "{}", e.message);
    assert_eq!(count(admin.clone()).await, before, "a refused spawn changed the world");
    // Outside the zone but inside her sight (her agent is within 10 of (15, 15), vision 60).
    let msg = spawn(&mut a, [52.0, 12.0, 53.0, 13.0]);
    assert_eq!(spawned(a.request(&msg).await).len(), 1, "a spawn within sight is allowed");
    // Bob has no zone and sees nothing: every spawn is refused. The admin is exempt.
    let msg = spawn(&mut b, [10.0, 10.0, 20.0, 20.0]);
    assert_eq!(error_of(b.request(&msg).await).code, ErrorCode::Forbidden);
    admin.post("/worlds/fog/agents", &json!({"group": "any", "count": 1, "area": {"type": "rect", "min_x": 300, "min_y": 300, "max_x": 301, "max_y": 301}})).await.expect(201);
}
