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
    // Let the chain run for a while (≥ 40 ticks of a moving world).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        bin.next(Duration::from_millis(50)).await;
        js.next(Duration::from_millis(50)).await;
        batched.next(Duration::from_millis(50)).await;
    }
    http.patch("/worlds/demo", &json!({"paused": true})).await.ok();
    bin.drain(Duration::from_millis(500), Duration::from_secs(10)).await;
    js.drain(Duration::from_millis(500), Duration::from_secs(10)).await;
    batched.drain(Duration::from_millis(500), Duration::from_secs(10)).await;
    let snap = http.get("/worlds/demo/snapshot").await.ok();
    let expected = quantized(&snap);
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
