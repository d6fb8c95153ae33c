//! WebSocket sessions against the real server: commands, the frame chain, shutdown.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use steer_proto::{self as proto, Encoding, EventKind, Outcome, ServerMsg};
use steerd_tests::*;

/// Issue 5 (1): Spawn + MoveTo over WS; every agent reports `DestinationReached` and is at the
/// target in both the snapshot and the client's view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_and_move_to_reach_the_target() {
    let srv = Server::fresh("moveto", Opts::default());
    let http = srv.http();
    create_world(&http, "arena", "arena", &small_scenario(100.0, &[(50.0, 50.0, 6.0)])).await;
    let mut ws = srv.ws().await;
    let world_id = ws.welcome.as_ref().and_then(|w| w.worlds.iter().find(|i| i.name == "arena")).expect("arena in Welcome").id;
    ws.subscribe("arena", whole_world()).await;
    let limits = proto::Limits { max_speed: Some(15.0), max_accel: Some(30.0), ..Default::default() };
    let rid = ws.rid();
    let ids = spawned(ws.request(&spawn_msg(rid, "arena", 5, [10.0, 10.0, 20.0, 20.0], limits)).await);
    assert_eq!(ids.len(), 5);
    // One `spawned` event lists them all (not one event per agent).
    let ev = ws.next_until(WAIT, |m| matches!(m, ServerMsg::Event(e) if matches!(e.event, EventKind::Spawned(_)))).await;
    match ev {
        Some(ServerMsg::Event(proto::Event { event: EventKind::Spawned(s), .. })) => assert_eq!((s.group.as_str(), &s.agents), ("g", &ids)),
        other => panic!("no spawned event: {other:?}"),
    }
    // The new agents show up in the view.
    let t0 = Instant::now();
    while !ids.iter().all(|id| ws.agents().iter().any(|a| a.id == *id)) {
        assert!(t0.elapsed() < Duration::from_secs(5), "spawned agents never appeared in the view");
        ws.next(Duration::from_millis(200)).await;
    }
    // Across the obstacle at the centre.
    let (tx, ty) = (80.0f32, 80.0f32);
    let rid = ws.rid();
    let r = ws.request(&move_to_msg(rid, "arena", ids.clone(), tx, ty, 1.0)).await;
    assert!(matches!(r, Outcome::Ok(_)), "MoveTo: {r:?}");
    let reached = |ws: &Ws| -> BTreeSet<u32> {
        ws.events
            .iter()
            .filter(|e| e.world == world_id)
            .filter_map(|e| match &e.event {
                EventKind::DestinationReached(a) => Some(a.agent),
                _ => None,
            })
            .collect()
    };
    let t0 = Instant::now();
    while !ids.iter().all(|id| reached(&ws).contains(id)) {
        assert!(t0.elapsed() < Duration::from_secs(30), "DestinationReached for only {:?} of {ids:?}", reached(&ws));
        ws.next(Duration::from_millis(200)).await;
    }
    // Each once.
    let n = ws.events.iter().filter(|e| matches!(e.event, EventKind::DestinationReached(_))).count();
    assert_eq!(n, ids.len(), "one DestinationReached per agent");
    // Where they stopped: near the target (a formation round it), per the server and per the view.
    let snap = http.get("/worlds/arena/snapshot").await.ok();
    let q = ws.state.quantization().to_owned();
    ws.drain(Duration::from_millis(300), Duration::from_secs(2)).await;
    for id in &ids {
        let a = snap["agents"].as_array().unwrap().iter().find(|a| a["id"] == *id).expect("agent in snapshot");
        let (x, y) = (a["position"][0].as_f64().unwrap() as f32, a["position"][1].as_f64().unwrap() as f32);
        let d = ((x - tx).powi(2) + (y - ty).powi(2)).sqrt();
        assert!(d < 6.0, "agent {id} stopped {d} from the target (snapshot {x},{y})");
        let v = ws.agents().into_iter().find(|a| a.id == *id).expect("agent in view");
        let (p, _, _) = q.dequantize(&v);
        let d = ((p[0] - tx).powi(2) + (p[1] - ty).powi(2)).sqrt();
        assert!(d < 6.0, "agent {id} is {d} from the target in the client's view");
    }
}


/// Issue 5 (2): keyframes + deltas (in `cells` messages for binary clients, issue 16), applied by
/// `ClientState`, equal the snapshot's quantized agents exactly once the world is paused, for a
/// binary and a JSON client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frame_chain_equals_snapshot() {
    let srv = Server::fresh("chain", Opts::default());
    let http = srv.http();
    let mut bin = srv.ws().await;
    let mut js = Ws::connect_with(srv.addr, None, Encoding::Json).await.expect("json connect");
    js.hello(None).await;
    let mut batched = Ws::connect_batched(srv.addr).await;
    let cells = bin.subscribe("demo", whole_world()).await;
    assert_eq!(js.subscribe("demo", whole_world()).await, cells);
    assert_eq!(batched.subscribe("demo", whole_world()).await, cells);
    // Let the chain run for a while: 60 ticks of a moving world (counted, not timed: a slow
    // machine runs them later, never fewer).
    let start = tick(&http, "demo").await;
    let t0 = Instant::now();
    while tick(&http, "demo").await < start + 60 {
        assert!(t0.elapsed() < Duration::from_secs(120), "the demo world did not run 60 ticks");
        for _ in 0..4 {
            bin.next(Duration::from_millis(10)).await;
            js.next(Duration::from_millis(10)).await;
            batched.next(Duration::from_millis(10)).await;
        }
    }
    http.patch("/worlds/demo", &json!({"paused": true})).await.ok();
    let snap = http.get("/worlds/demo/snapshot").await.ok();
    let expected = quantized(&snap);
    let paused = snap["tick"].as_u64().unwrap();
    for ws in [&mut bin, &mut js, &mut batched] {
        let enc = ws.enc;
        assert!(ws.read_until(Duration::from_secs(30), |w| w.last_tick >= paused && w.agents() == expected).await, "{enc:?}: the view never reached the paused tick {paused}'s state (at tick {})", ws.last_tick);
    }
    // Nothing after the paused state.
    for ws in [&mut bin, &mut js, &mut batched] {
        ws.drain(Duration::from_millis(300), Duration::from_secs(2)).await;
    }
    assert!(expected.len() > 50, "demo world has agents");
    // Binary (protocol 4): a tick's entries of every changed cell arrive in one `cells` message;
    // JSON keeps a message per cell.
    assert!(cells.len() >= 4, "the demo world spans several AOI cells ({})", cells.len());
    for ws in [&bin, &batched] {
        assert!(ws.deltas > 2 * ws.cells_messages, "{} delta entries in {} cells messages", ws.deltas, ws.cells_messages);
    }
    assert_eq!(js.cells_messages, 0, "JSON: per-cell frames");
    assert!(batched.binary_frames <= batched.messages, "batched: {} frames for {} messages", batched.binary_frames, batched.messages);
    assert_eq!(bin.binary_frames, bin.messages, "unbatched: one message per frame");
    for ws in [&bin, &js, &batched] {
        assert_eq!(ws.keyframes, cells.len() as u64, "{:?}: one keyframe per cell, no resync", ws.enc);
        assert!(ws.deltas > 40, "{:?}: only {} deltas", ws.enc, ws.deltas);
        assert_eq!(ws.last_tick, snap["tick"].as_u64().unwrap(), "{:?}: last delta is the paused tick", ws.enc);
        assert_eq!(ws.agents(), expected, "{:?}: client view differs from the snapshot", ws.enc);
    }
    // Paused means no more frames.
    let t = tick(&http, "demo").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(tick(&http, "demo").await, t);
}

/// A world created paused has never ticked, yet a subscriber sees its state at once: the
/// keyframes of its scenario's agents, exactly the snapshot's, at tick 0 (the world publishes
/// its starting state whenever it does not tick at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_created_paused_shows_its_state_to_a_subscriber_at_once() {
    let srv = Server::fresh("paused-keyframes", Opts::default());
    let http = srv.http();
    http.put("/scenarios/still", &wander_scenario(200.0, 40)).await.ok();
    http.post("/worlds", &json!({"name": "still", "scenario": "still", "paused": true})).await.expect(201);
    let snap = http.get("/worlds/still/snapshot").await.ok();
    let expected = quantized(&snap);
    assert_eq!((snap["tick"].as_u64(), expected.len()), (Some(0), 40), "a paused new world at tick 0 with its 40 agents");
    let mut ws = srv.ws().await;
    ws.subscribe("still", whole_world()).await;
    assert!(
        ws.read_until(WAIT, |w| w.agents() == expected).await,
        "no keyframe of the paused world's {} agents within {WAIT:?} (the view holds {})",
        expected.len(),
        ws.agents().len()
    );
    assert!(ws.keyframes > 0 && ws.last_tick == 0, "keyframes {}, a delta of tick {}", ws.keyframes, ws.last_tick);
    // Still paused: nothing ran.
    assert_eq!(tick(&http, "still").await, 0);
}

/// Issue 5 (8): SIGTERM sends close 1001 to connected clients, autosaves, and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_closes_with_1001_and_exits_0() {
    let mut srv = Server::fresh("shutdown", Opts::default());
    srv.http().patch("/worlds/demo", &json!({"autosave": true})).await.ok();
    let mut a = srv.ws().await;
    a.subscribe("demo", whole_world()).await;
    let mut b = Ws::connect_with(srv.addr, None, Encoding::Json).await.expect("connect");
    b.hello(None).await;
    // Frames flow before the signal.
    assert!(a.next_until(WAIT, is_delta).await.is_some());
    srv.terminate();
    assert_eq!(a.expect_close(Duration::from_secs(10)).await, Some(1001), "subscriber");
    assert_eq!(b.expect_close(Duration::from_secs(10)).await, Some(1001), "idle client");
    let st = srv.wait_exit(Duration::from_secs(15)).expect("steerd did not exit within 15 s of SIGTERM");
    assert!(st.success(), "exit status {st:?}");
    let saved = srv.data_dir.as_path().join("scenarios/demo-autosave.json");
    let text = std::fs::read_to_string(&saved).expect("autosave written at shutdown");
    serde_json::from_str::<serde_json::Value>(&text).expect("autosave is JSON");
}

/// A group that appears between a `subscribe` command and the start of its subscription (the
/// connection's send task busy meanwhile) is in the `subscribed` result, or follows as that
/// world's `groups` event: never announced to nobody. The send task is held in a blocked write:
/// a JSON connection (no fan-out: the send task writes every frame) with a 4 KiB receive buffer
/// stops reading a busy world; the subscribe then waits in the task's queue while the new group
/// is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_published_before_the_subscription_starts_is_announced() {
    let _heavy = heavy_lock().await;
    // A blocked write closes the client (4008) after `limits.write_timeout_ms`: a minute here, so
    // the write this test holds blocked outlasts whatever a loaded machine makes of the pause
    // below and the requests after it (the default 5 s is not far from them).
    let srv = Server::fresh("groups-start", Opts::default().arg("--write-timeout-ms", "60000"));
    let http = srv.http();
    create_world(&http, "busy", "busy", &wander_scenario(300.0, 3000)).await;
    http.post("/worlds", &serde_json::json!({"name": "quiet"})).await.expect(201);
    let mut ws = Ws::connect_small_buffer_with(srv.addr, 4096, Encoding::Json).await;
    let quiet = ws.welcome.as_ref().and_then(|w| w.worlds.iter().find(|i| i.name == "quiet")).expect("quiet in Welcome").id;
    ws.subscribe("busy", whole_world()).await;
    // Not reading: the server's socket backs up and its send task blocks in a write.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let rid = ws.rid();
    ws.send(&proto::ClientMsg::Subscribe(proto::Subscribe { request_id: rid, world: "quiet".into(), area: whole_world(), every_n_ticks: 1 })).await;
    let spawn = serde_json::json!({"group": "late", "count": 1, "area": {"type": "circle", "x": 50, "y": 50, "radius": 1}});
    http.post("/worlds/quiet/agents", &spawn).await.expect(201);
    let t0 = tick(&http, "quiet").await;
    while tick(&http, "quiet").await < t0 + 3 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let groups = match ws.result(rid).await {
        Outcome::Subscribed(s) => s.groups,
        other => panic!("subscribe failed: {other:?}"),
    };
    if !groups.iter().any(|g| g == "late") {
        let ev = ws
            .next_until(Duration::from_secs(5), |m| {
                matches!(m, ServerMsg::Event(e) if e.world == quiet && matches!(&e.event, EventKind::Groups(g) if g.groups.iter().any(|n| n == "late")))
            })
            .await;
        assert!(ev.is_some(), "the group `late` was in neither the subscribed result ({groups:?}) nor a later groups event");
    }
}
