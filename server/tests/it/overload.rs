//! Issue 15 (1): a world whose tick takes longer than its period keeps answering every request
//! (reads, PATCH, DELETE, commands, SIGTERM), says it is overloaded, and `DELETE` ends its thread.
//!
//! Every wait here is a bound against hanging ("answered within 10 s"), not a timing threshold.

use std::time::{Duration, Instant};

use steer_proto::Outcome;
use steerd_tests::*;

/// `method path` answered within [`WAIT`] (panics naming the request otherwise).
async fn answered(http: &Http, method: &str, path: &str, body: Option<&serde_json::Value>) -> Resp {
    let b = body.map(|b| b.to_string());
    match tokio::time::timeout(WAIT, http.try_raw(method, path, b.as_deref().map(str::as_bytes), &[])).await {
        Ok(Some(r)) => r,
        Ok(None) => panic!("{method} {path}: connection failed"),
        Err(_) => panic!("{method} {path}: not answered within {WAIT:?} (the world is wedged)"),
    }
}

/// Names of the server's threads (`/proc/<pid>/task/*/comm`).
fn threads(srv: &Server) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{}/task", srv.pid())) else { return Vec::new() };
    rd.flatten().filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok()).map(|s| s.trim().to_string()).collect()
}

/// Waits (≤ 10 s) until no thread of the server is named `name`.
async fn thread_ends(srv: &Server, name: &str) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < WAIT {
        if !threads(srv).iter().any(|t| t == name) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Waits (≤ 10 s) until the world reports overruns (its tick is longer than its period).
async fn overrunning(http: &Http, world: &str) -> u64 {
    let t0 = Instant::now();
    loop {
        let v = answered(http, "GET", &format!("/worlds/{world}"), None).await.ok();
        let n = v["overruns"].as_u64().unwrap_or(0);
        if n > 0 {
            return n;
        }
        assert!(t0.elapsed() < WAIT, "world `{world}` never overran: the test world is too small to overload the tick ({v})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The wedge, first reproduction: `PATCH {"tick_rate": 1000}` on a world whose tick takes longer
/// than 1 ms. Afterwards GET /worlds, GET /worlds/{w}, PATCH, a command, /health, /metrics and
/// DELETE are all answered; /health and /metrics say the world is overloaded; DELETE ends the
/// world's thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_world_keeps_answering_and_delete_ends_its_thread() {
    let _heavy = heavy_lock().await;
    let srv = Server::fresh("overload", Opts::default());
    let http = srv.http();
    create_world(&http, "hot", "hot", &wander_scenario(600.0, 20_000)).await;
    assert!(threads(&srv).iter().any(|t| t == "world-hot"), "world thread runs: {:?}", threads(&srv));
    // `demo` is paused: a paused world drops no tick however busy the machine is, so its
    // `overloaded: false` below shows the flag is per world, not the host's luck.
    answered(&http, "PATCH", "/worlds/demo", Some(&json!({"paused": true}))).await.ok();
    answered(&http, "PATCH", "/worlds/hot", Some(&json!({"tick_rate": 1000}))).await.ok();
    overrunning(&http, "hot").await;
    // Every kind of request is still answered, many times over.
    for i in 0..5 {
        let list = answered(&http, "GET", "/worlds", None).await.ok();
        assert!(list.as_array().unwrap().iter().any(|w| w["name"] == "hot"), "{list}");
        answered(&http, "GET", "/worlds/hot", None).await.ok();
        answered(&http, "GET", "/worlds/hot/obstacles", None).await.ok();
        answered(&http, "PATCH", "/worlds/hot", Some(&json!({"autosave": i % 2 == 0}))).await.ok();
        let spawn = json!({"group": "late", "count": 1, "area": {"type": "rect", "min_x": 10, "min_y": 10, "max_x": 20, "max_y": 20}});
        answered(&http, "POST", "/worlds/hot/agents", Some(&spawn)).await.expect(201);
    }
    // The other world is not held up either.
    answered(&http, "GET", "/worlds/demo", None).await.ok();
    // It says so.
    // (Polled, bounded: the effective rate is measured over one-second windows.)
    let t0 = Instant::now();
    let health = loop {
        let h = answered(&http, "GET", "/health", None).await.ok();
        let eff = h["worlds"]["hot"]["effective_tick_rate"].as_f64().unwrap();
        if h["worlds"]["hot"]["overloaded"] == true && eff < 1000.0 {
            break h;
        }
        assert!(t0.elapsed() < WAIT, "/health does not say `hot` is overloaded: {h}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(health["status"], "ok", "an overloaded world is alive: {health}");
    assert_eq!(health["worlds"]["demo"]["overloaded"], false, "{health}");
    assert!(health["overloaded_worlds"].as_array().unwrap().iter().any(|w| w == "hot"), "{health}");
    let m = answered(&http, "GET", "/metrics", None).await.ok_text();
    assert!(m.contains("steerd_world_overloaded{world=\"hot\"} 1"), "{m}");
    assert!(m.contains("steerd_world_effective_tick_rate{world=\"hot\"}"), "{m}");
    // A step while overloaded is answered too.
    answered(&http, "POST", "/worlds/hot/step", Some(&json!({"ticks": 50}))).await.ok();
    // DELETE answers and ends the thread.
    answered(&http, "DELETE", "/worlds/hot", None).await.expect(204);
    assert!(thread_ends(&srv, "world-hot").await, "world thread still running after DELETE: {:?}", threads(&srv));
    answered(&http, "GET", "/worlds/hot", None).await.expect(404);
    answered(&http, "GET", "/worlds", None).await.ok();
}

/// SIGTERM drains an overloaded world: the autosave is written and the process exits 0 within
/// the shutdown timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_an_overloaded_world_with_its_autosave() {
    let _heavy = heavy_lock().await;
    let mut srv = Server::fresh("overload-term", Opts::default());
    let http = srv.http();
    create_world(&http, "hot", "hot", &wander_scenario(600.0, 20_000)).await;
    answered(&http, "PATCH", "/worlds/hot", Some(&json!({"tick_rate": 1000, "autosave": true}))).await.ok();
    overrunning(&http, "hot").await;
    let mut ws = srv.ws().await;
    ws.subscribe("hot", rect_area(1.0, 1.0, 99.0, 99.0)).await;
    srv.terminate();
    // Bound: the default shutdown_timeout (10 s) plus slack.
    let st = srv.wait_exit(Duration::from_secs(20)).expect("steerd did not exit after SIGTERM");
    assert!(st.success(), "exit status {st:?}");
    let saved = srv.data_dir.as_path().join("scenarios/hot-autosave.json");
    let text = std::fs::read_to_string(&saved).expect("autosave of the overloaded world written at shutdown");
    let v: serde_json::Value = serde_json::from_str(&text).expect("autosave is JSON");
    let agents: u64 = v["groups"].as_array().unwrap().iter().map(|g| g["count"].as_u64().unwrap_or(0)).sum();
    assert_eq!(agents, 20_000, "the autosave holds the world's agents");
}

/// The wedge, second reproduction: one anonymous WebSocket client spawning agents again and
/// again into a fast world. Every spawn is answered — with the agents, or past the world's
/// agent cap with `quota_exceeded` — and REST keeps answering meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawning_client_cannot_wedge_a_world() {
    let _heavy = heavy_lock().await;
    // The per-player cap (next test) is raised so that one client can reach the world's cap.
    let srv = Server::fresh("spawn-flood", Opts::default().arg("--max-agents-per-world", "24000").arg("--max-agents-per-player", "100000"));
    let http = srv.http();
    let mut sc = small_scenario(600.0, &[]);
    sc["tick_rate"] = json!(1000);
    create_world(&http, "flood", "flood", &sc).await;
    let mut ws = srv.ws().await;
    let mut spawned_total = 0usize;
    let mut refused = 0;
    for i in 0..14 {
        let rid = ws.rid();
        ws.send(&spawn_msg(rid, "flood", 2000, [0.0, 0.0, 600.0, 600.0], steer_proto::Limits::default())).await;
        match ws.result(rid).await {
            Outcome::Spawned(s) => spawned_total += s.agents.len(),
            Outcome::Error(e) => {
                assert_eq!((e.code, e.field.as_deref()), (steer_proto::ErrorCode::QuotaExceeded, Some("count")), "spawn {i}: {e:?}");
                assert!(e.message.contains("is full"), "spawn {i}: {e:?}");
                refused += 1;
            }
            other => panic!("spawn {i}: {other:?}"),
        }
        answered(&http, "GET", "/worlds", None).await.ok();
        ws.ping().await;
    }
    assert_eq!(spawned_total, 24_000, "spawns fill the world up to its cap");
    assert_eq!(refused, 2, "spawns past the cap are refused");
    overrunning(&http, "flood").await;
    // Still answered once overloaded.
    let rid = ws.rid();
    ws.send(&spawn_msg(rid, "flood", 1, [0.0, 0.0, 10.0, 10.0], steer_proto::Limits::default())).await;
    let e = error_of(ws.result(rid).await);
    assert_eq!((e.code, e.field.as_deref()), (steer_proto::ErrorCode::QuotaExceeded, Some("count")), "{e:?}");
    answered(&http, "GET", "/worlds/flood", None).await.ok();
    answered(&http, "DELETE", "/worlds/flood", None).await.expect(204);
    assert!(thread_ends(&srv, "world-flood").await, "world thread still running after DELETE: {:?}", threads(&srv));
}

/// One anonymous player may own at most `players.max_agents_per_player` agents in a world:
/// its spawns beyond that are refused (`quota_exceeded` `count`), while another player can
/// still spawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_cannot_fill_a_world() {
    let srv = Server::fresh("session-cap", Opts::default().arg("--max-agents-per-player", "5000"));
    let mut a = srv.ws().await;
    for i in 0..5 {
        let rid = a.rid();
        let ids = spawned(a.request(&spawn_msg(rid, "demo", 1000, [1.0, 1.0, 50.0, 50.0], steer_proto::Limits::default())).await);
        assert_eq!(ids.len(), 1000, "spawn {i}");
    }
    let rid = a.rid();
    let e = error_of(a.request(&spawn_msg(rid, "demo", 1, [1.0, 1.0, 50.0, 50.0], steer_proto::Limits::default())).await);
    assert_eq!((e.code, e.field.as_deref()), (steer_proto::ErrorCode::QuotaExceeded, Some("count")), "{e:?}");
    let mut b = srv.ws().await;
    let rid = b.rid();
    assert_eq!(spawned(b.request(&spawn_msg(rid, "demo", 10, [1.0, 1.0, 50.0, 50.0], steer_proto::Limits::default())).await).len(), 10);
}

/// The `error`, and the field the `message` names, of a REST refusal (422 `invalid_field`).
fn refused(r: &Resp, field: &str) {
    assert_eq!(r.status, 422, "expected 422 naming `{field}`: {}", r.text());
    let v = r.json();
    assert_eq!(v["error"], "invalid_field", "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains(&format!("`{field}`")), "the message names `{field}`: {v}");
}

/// Test 12's wedge (the `--long` schemathesis run): spawns into a rectangle lying almost wholly
/// outside a 200×200 world, repeated with growing counts. The sim clamps such agents onto the
/// world's edge, nearly all onto one corner, and its contact pass then costs agents² per round:
/// on the old code, after ~4,000 agents a tick took seconds, then minutes, and the world
/// answered nothing meanwhile (`POST /worlds/0/agents` not answered within 10 s). Every call is
/// now answered at once, the pile refused naming `area`; the other spawns that made a tick cost
/// agents² are refused naming their field (REST and an anonymous WebSocket player alike); and
/// the world keeps answering and ticking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pile_of_agents_cannot_wedge_a_world() {
    let _heavy = heavy_lock().await;
    let srv = Server::fresh("pile", Opts::default());
    let http = srv.http();
    answered(&http, "POST", "/worlds", Some(&json!({"name": "0"}))).await.expect(201);
    // schemathesis's calls, in its order and with its values.
    let outside = json!({"type": "rect", "min_x": -1.5, "min_y": -1000000.0, "max_x": 0.0, "max_y": 126333.45});
    for count in [1, 2, 4, 7, 11, 16, 26, 46, 86, 166, 326, 646, 1286, 2566, 4486, 4486, 4486] {
        let r = answered(&http, "POST", "/worlds/0/agents", Some(&json!({"group": "evaders", "count": count, "area": outside}))).await;
        if r.status != 201 {
            refused(&r, "area");
        }
        answered(&http, "GET", "/worlds/0", None).await.ok();
    }
    // The world ticks on and answers meanwhile (on the old code its tick took minutes here).
    ticks_on(&http, "0", 10).await;
    // A pile inside the bounds: 5,000 on one point.
    let point = json!({"type": "rect", "min_x": 50, "min_y": 50, "max_x": 50, "max_y": 50});
    refused(&answered(&http, "POST", "/worlds/0/agents", Some(&json!({"group": "p", "count": 5000, "area": point}))).await, "count");
    // One huge agent, one fast agent: each would widen every agent's contact query for good.
    let whole = json!({"type": "rect", "min_x": 0, "min_y": 0, "max_x": 200, "max_y": 200});
    let one = |limits: serde_json::Value| json!({"group": "x", "count": 1, "area": whole, "limits": limits});
    refused(&answered(&http, "POST", "/worlds/0/agents", Some(&one(json!({"radius": 1000})))).await, "limits.radius");
    refused(&answered(&http, "POST", "/worlds/0/agents", Some(&one(json!({"max_speed": 1000000})))).await, "limits.max_speed");
    // A crowd larger than its world: 100 of radius 10 cover 31,416 of 40,000; 200 would not fit.
    let big = json!({"group": "big", "count": 100, "area": whole, "limits": {"radius": 10}});
    answered(&http, "POST", "/worlds/0/agents", Some(&big)).await.expect(201);
    let r = answered(&http, "POST", "/worlds/0/agents", Some(&big)).await;
    refused(&r, "count");
    assert!(r.text().contains("max_agent_cover"), "{}", r.text());
    // An anonymous player over WebSocket is refused alike, naming the field.
    let mut ws = srv.ws().await;
    let rid = ws.rid();
    let fast = steer_proto::Limits { max_speed: Some(1e6), ..Default::default() };
    let e = error_of(ws.request(&spawn_msg(rid, "0", 1, [10.0, 10.0, 20.0, 20.0], fast)).await);
    assert_eq!((e.code, e.field.as_deref()), (steer_proto::ErrorCode::InvalidField, Some("limits.max_speed")), "{e:?}");
    let rid = ws.rid();
    let huge = steer_proto::Limits { radius: Some(1000.0), ..Default::default() };
    let e = error_of(ws.request(&spawn_msg(rid, "0", 1, [10.0, 10.0, 20.0, 20.0], huge)).await);
    assert_eq!((e.code, e.field.as_deref()), (steer_proto::ErrorCode::InvalidField, Some("limits.radius")), "{e:?}");
    // An ordinary spawn is still accepted, and the world keeps answering and ticking.
    let rid = ws.rid();
    assert_eq!(spawned(ws.request(&spawn_msg(rid, "0", 200, [1.0, 1.0, 199.0, 199.0], steer_proto::Limits::default())).await).len(), 200);
    ticks_on(&http, "0", 10).await;
}

/// Waits until `world` has run `n` more ticks, each `GET` answered within [`WAIT`] and the
/// whole within [`WAIT`] (a bound against a wedge, not a timing threshold).
async fn ticks_on(http: &Http, world: &str, n: u64) {
    let path = format!("/worlds/{world}");
    let t0 = answered(http, "GET", &path, None).await.ok()["tick"].as_u64().unwrap();
    let start = Instant::now();
    loop {
        let t = answered(http, "GET", &path, None).await.ok()["tick"].as_u64().unwrap();
        if t >= t0 + n {
            return;
        }
        assert!(start.elapsed() < WAIT, "world `{world}` ran {} ticks in {WAIT:?}", t - t0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Obstacles as large as a large world: each fills every cell of the world's obstacle index,
/// which is rebuilt on the tick after each change. On the old code 400 of radius 1e6 in a world
/// of ±1e6 made a tick take 12 s and the server 6 GB; now the index's entries are bounded
/// (`limits.max_static_cells`): the second such obstacle, a wall across the world and a move
/// that grows an obstacle are refused naming their field, and the world keeps ticking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn world_sized_obstacles_cannot_wedge_a_world() {
    let srv = Server::fresh("big-statics", Opts::default());
    let http = srv.http();
    let big = json!({"bounds": {"min": {"x": -1000000, "y": -1000000}, "max": {"x": 1000000, "y": 1000000}}});
    create_world(&http, "big", "big", &big).await;
    let huge = json!({"center": {"x": 0, "y": 0}, "radius": 1000000});
    answered(&http, "POST", "/worlds/big/obstacles", Some(&huge)).await.expect(201);
    refused(&answered(&http, "POST", "/worlds/big/obstacles", Some(&huge)).await, "radius");
    let across = json!({"a": {"x": -1000000, "y": -1000000}, "b": {"x": 1000000, "y": 1000000}});
    refused(&answered(&http, "POST", "/worlds/big/walls", Some(&across)).await, "b");
    let small = answered(&http, "POST", "/worlds/big/obstacles", Some(&json!({"center": {"x": 5000, "y": 5000}, "radius": 10}))).await.ok();
    let id = small["id"].as_u64().unwrap();
    refused(&answered(&http, "PATCH", &format!("/worlds/big/obstacles/{id}"), Some(&json!({"center": {"x": 0, "y": 0}, "radius": 1000000}))).await, "radius");
    assert_eq!(answered(&http, "GET", "/worlds/big", None).await.ok()["obstacles"], 2, "refused calls changed nothing");
    ticks_on(&http, "big", 10).await;
}
