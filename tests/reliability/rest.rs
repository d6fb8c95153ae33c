//! REST tests: 13 (limits), 14 (crash-safe save), 15 (scenario names), 16 (authorization).

use std::time::Duration;

use steer_proto::{self as proto, ErrorCode};
use steerd_tests::*;

use crate::{Cfg, Outcome, config, gate, no_panic};

/// Test 13: a too-large body → 413, count caps → 422, non-finite numbers (1e39 overflows f32)
/// → 400/422, each a JSON error; the world is unchanged.
pub async fn t13_rest_limits(_cfg: Cfg) -> Outcome {
    let (_c, opts) = config("max_body_bytes = 65536\nmax_spawn = 100\nmax_agents_per_world = 300");
    let srv = Server::fresh("t13", opts);
    let http = srv.http();
    create_world(&http, "w", "w", &small_scenario(100.0, &[(50.0, 50.0, 5.0)])).await;
    let before = shape(&http, "w").await;
    let mut seen = Vec::new();
    let mut expect = |what: &str, r: Resp, codes: &[u16]| {
        gate(codes.contains(&r.status), || format!("{what}: {} {}", r.status, r.text()));
        let j = r.json();
        gate(j["error"].is_string() && j["message"].is_string(), || format!("{what}: not a JSON error: {}", r.text()));
        seen.push(format!("{what} {}", r.status));
    };
    let big = format!(r#"{{"group":"g","count":1,"area":{{"type":"rect","min_x":1,"min_y":1,"max_x":2,"max_y":2}},"pad":"{}"}}"#, "x".repeat(70_000));
    expect("body over max_body_bytes", http.raw("POST", "/worlds/w/agents", Some(big.as_bytes()), &[]).await, &[413]);
    let spawn = |n: u32| json!({"group": "g", "count": n, "area": {"type": "rect", "min_x": 1, "min_y": 1, "max_x": 90, "max_y": 90}});
    expect("spawn over max_spawn", http.post("/worlds/w/agents", &spawn(101)).await, &[422]);
    http.post("/worlds/w/agents", &spawn(100)).await.expect(201);
    http.post("/worlds/w/agents", &spawn(100)).await.expect(201);
    http.post("/worlds/w/agents", &spawn(100)).await.expect(201);
    let full = shape(&http, "w").await;
    expect("spawn over max_agents_per_world", http.post("/worlds/w/agents", &spawn(1)).await, &[422]);
    let r = http.raw("POST", "/worlds/w/obstacles/random", Some(br#"{"count": 100000000}"#), &[]).await;
    expect("random obstacles beyond the cap", r, &[400, 422]);
    let nf = |v: &str| format!(r#"{{"center":{{"x":{v},"y":5}},"radius":1}}"#);
    expect("obstacle x = 1e39", http.raw("POST", "/worlds/w/obstacles", Some(nf("1e39").as_bytes()), &[]).await, &[400, 422]);
    expect("obstacle x = -1e39", http.raw("POST", "/worlds/w/obstacles", Some(nf("-1e39").as_bytes()), &[]).await, &[400, 422]);
    expect("obstacle x = NaN", http.raw("POST", "/worlds/w/obstacles", Some(nf("NaN").as_bytes()), &[]).await, &[400, 422]);
    let mv = r#"{"agents":[0],"target":{"x":1e39,"y":0}}"#;
    expect("move-to target 1e39", http.raw("POST", "/worlds/w/move-to", Some(mv.as_bytes()), &[]).await, &[400, 422]);
    expect("tick_rate 1e39", http.raw("PATCH", "/worlds/w", Some(br#"{"tick_rate":1e39}"#), &[]).await, &[400, 422]);
    let after = shape(&http, "w").await;
    gate(after == full, || format!("the world changed: {:?} → {:?}", full.0, after.0));
    gate(full.0 == before.0 + 300 && full.1 == before.1, || "the accepted spawns are not in the world".into());
    no_panic(&srv);
    Outcome::Pass(format!("{}; each a JSON error; agents and obstacles unchanged by every refused call", seen.join(", ")))
}

/// Test 14: kill -9 at a random moment while saving a multi-MB scenario: the file is always the
/// old or the new one, whole; stray temp files are swept at start (shared with `it::persist`).
pub async fn t14_crash_safe_save(cfg: Cfg) -> Outcome {
    let agents = cfg.pick(40_000, 80_000);
    let rounds = cfg.pick(20, 200);
    // The time box bounds a hang, not the speed: a slow machine runs the same rounds, later.
    let f = kill9_while_saving(agents, rounds, Duration::from_secs(cfg.pick(600, 1200))).await;
    gate(f.rounds >= rounds.min(10), || format!("only {} rounds in the time box", f.rounds));
    Outcome::Pass(format!("kill -9 while saving: {f}"))
}

/// Test 15: hostile scenario names → 400 on PUT, GET and DELETE; nothing is written outside
/// the data dir (its parent is watched) and nothing outside is read.
pub async fn t15_scenario_names(_cfg: Cfg) -> Outcome {
    let parent = TempDir::new("t15");
    let data = parent.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(parent.path().join("secret.json"), r#"{"name":"secret"}"#).unwrap();
    let srv = Server::start(&data);
    let http = srv.http();
    let list = |p: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_dir(p).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    let parent_before = list(parent.path());
    let long = "a".repeat(300);
    let names: Vec<(&str, String)> = vec![
        ("../x", "..%2Fx".into()),
        ("../secret", "..%2Fsecret".into()),
        ("..", "..".into()),
        ("%2e%2e%2fx", "%2e%2e%2fx".into()),
        ("absolute /tmp/x", "%2Ftmp%2Fx".into()),
        ("backslash ..\\x", "..%5Cx".into()),
        ("NUL", "a%00b".into()),
        ("overlong (300 chars)", long.clone()),
        ("fullwidth look-alike", "%EF%BD%98".into()),
        ("right-to-left override", "x%E2%80%AEnosj".into()),
        ("Cyrillic look-alike", "%D0%B0bc".into()),
        ("leading dot", ".hidden".into()),
        ("space", "a%20b".into()),
        ("empty", "".into()),
    ];
    let body = small_scenario(10.0, &[]);
    let mut n = 0;
    for (what, enc) in &names {
        for (method, b) in [("PUT", Some(body.to_string())), ("GET", None), ("DELETE", None)] {
            let path = format!("/scenarios/{enc}");
            let r = http.raw(method, &path, b.as_deref().map(str::as_bytes), &[]).await;
            // The empty name is no route of its own (`/scenarios/` → 404/405); all others 400.
            let ok = if enc.is_empty() { (400..=405).contains(&r.status) } else { r.status == 400 };
            gate(ok, || format!("{method} /scenarios/<{what}>: {} {}", r.status, r.text()));
            n += 1;
        }
    }
    // Also as a world's scenario and as a save target.
    let r = http.post("/worlds", &json!({"name": "w", "scenario": "../secret"})).await;
    gate(r.status == 400, || format!("create world from ../secret: {} {}", r.status, r.text()));
    let r = http.post("/worlds/demo/save", &json!({"scenario": "../x"})).await;
    gate(r.status == 400, || format!("save as ../x: {} {}", r.status, r.text()));
    gate(list(parent.path()) == parent_before, || format!("files appeared beside the data dir: {:?}", list(parent.path())));
    gate(!std::path::Path::new("/tmp/x").exists() || std::fs::metadata("/tmp/x").is_ok_and(|m| m.modified().is_ok_and(|t| t.elapsed().map_or(true, |e| e > Duration::from_secs(600)))), || "/tmp/x was written".into());
    no_panic(&srv);
    Outcome::Pass(format!("{} names × PUT/GET/DELETE ({n} calls) + world create + save → 400; nothing written or read outside the data dir", names.len()))
}

/// Test 16: the authorization matrix.
pub async fn t16_authorization(_cfg: Cfg) -> Outcome {
    let token = "t16-secret";
    let srv = Server::fresh("t16", Opts::default().arg("--admin-token", token));
    let http = srv.http();
    let mut rows = Vec::new();
    // REST.
    let r = http.post("/worlds/demo/obstacles", &json!({"center": {"x": 5, "y": 5}, "radius": 1})).await;
    gate(r.status == 401 && r.json()["error"] == "unauthorized", || format!("no token: {} {}", r.status, r.text()));
    rows.push("REST no token 401");
    let r = http.with_token("wrong").post("/worlds/demo/obstacles", &json!({"center": {"x": 5, "y": 5}, "radius": 1})).await;
    gate(r.status == 401 && r.json()["error"] == "unauthorized", || format!("wrong token: {} {}", r.status, r.text()));
    rows.push("wrong token 401");
    http.with_token(token).post("/worlds/demo/obstacles", &json!({"center": {"x": 5, "y": 5}, "radius": 1})).await.expect(201);
    rows.push("right token 201");
    let r = http.get("/worlds/demo").await;
    gate(r.status == 401, || format!("tokenless read on a secured server: {} {}", r.status, r.text()));
    http.with_token(token).get("/worlds/demo").await.expect(200);
    http.get("/health").await.expect(200);
    rows.push("reads need a token (401 without), /health public");
    // WebSocket (protocol 3, issue 14): with no player secret the server is in dev mode, so a
    // client without a token is an anonymous player that spawns agents of its own; an unknown
    // token is refused (`unauthorized`) and closed 4001.
    let mut anon = srv.ws().await;
    let rid = anon.rid();
    let own = spawned(anon.request(&spawn_msg(rid, "demo", 1, [5.0, 5.0, 6.0, 6.0], proto::Limits::default())).await);
    gate(own.len() == 1, || format!("anonymous (dev-mode) player's spawn: {own:?}"));
    rows.push("WS without token = dev-mode player, spawns its own");
    let mut wrong = Ws::connect(srv.addr).await;
    wrong.send(&hello(Some("nope"), proto::Encoding::Binary)).await;
    gate(wrong.expect_close(WAIT).await == Some(4001), || "wrong WS token not closed 4001".into());
    rows.push("WS wrong token close 4001");
    // Someone else's agent.
    let mut a = Ws::connect(srv.addr).await;
    a.hello(Some(token)).await;
    let rid = a.rid();
    let theirs = spawned(a.request(&spawn_msg(rid, "demo", 1, [5.0, 5.0, 6.0, 6.0], proto::Limits::default())).await);
    let rid = anon.rid();
    let e = error_of(anon.request(&move_to_msg(rid, "demo", theirs.clone(), 1.0, 1.0, 0.0)).await);
    gate(e.code == ErrorCode::Forbidden, || format!("someone else's agent: {e:?}"));
    rows.push("someone else's agent forbidden");
    // Foreign Origin at the upgrade.
    let (_, st) = crate::abuse::raw_upgrade(srv.addr, &[("Origin", "http://evil.example")]).await;
    gate(st == 403, || format!("foreign Origin: {st}"));
    rows.push("foreign Origin 403 at the upgrade");
    let (_, st) = crate::abuse::raw_upgrade(srv.addr, &[]).await;
    gate(st == 101, || format!("no Origin (non-browser client): {st}"));
    rows.push("no Origin 101");
    no_panic(&srv);
    Outcome::Pass(rows.join(", "))
}
