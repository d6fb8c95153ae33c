//! Issue 16: one `cells` message per tick for binary clients, shared between subscriptions of
//! the same cells and rate; `every_n_ticks`; nothing sent for a world at rest.

use serde_json::json;
use std::time::{Duration, Instant};
use steer_proto::{self as proto, ClientMsg, Encoding, ErrorCode, Outcome, ServerMsg};
use steerd_tests::*;

/// A counter of `/metrics` (the sum of the lines of that name).
async fn metric(http: &Http, name: &str) -> f64 {
    let text = http.get("/metrics").await.text();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| k.trim_end_matches("_total").ends_with(name))
        .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
        .sum()
}

async fn subscribe_every(ws: &mut Ws, world: &str, every_n_ticks: u32) -> Outcome {
    let rid = ws.rid();
    ws.request(&ClientMsg::Subscribe(proto::Subscribe { request_id: rid, world: world.into(), area: whole_world(), every_n_ticks })).await
}

/// Reads for `wait`, keeping every `cells` message (their entries are applied by `Ws`).
async fn cells_for(ws: &mut Ws, wait: Duration) -> Vec<proto::Cells> {
    let mut out = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < wait {
        if let Next::Msg(ServerMsg::Cells(c)) = ws.next(Duration::from_millis(50)).await {
            out.push(c);
        }
    }
    out
}

/// Reads `ws` until a `cells` message of tick `last` has come (at most 30 s), keeping every
/// `cells` message: a condition, not a wall time, so a delayed frame is still read.
async fn cells_through(ws: &mut Ws, last: u64) -> Vec<proto::Cells> {
    let mut out = Vec::new();
    let t0 = Instant::now();
    while out.last().is_none_or(|c: &proto::Cells| c.tick < last) {
        assert!(t0.elapsed() < Duration::from_secs(30), "no cells message of tick {last} within 30 s (last: {:?})", out.last().map(|c: &proto::Cells| c.tick));
        if let Next::Msg(ServerMsg::Cells(c)) = ws.next(Duration::from_millis(100)).await {
            out.push(c);
        }
    }
    out
}

/// Waits until `world` has run `n` ticks from now (a count, not a wall time: a slow machine
/// runs them later, never fewer), calling `read` between polls to keep the clients read.
async fn run_ticks(http: &Http, world: &str, n: u64, mut read: impl AsyncFnMut()) {
    let start = tick(http, world).await;
    let t0 = Instant::now();
    while tick(http, world).await < start + n {
        assert!(t0.elapsed() < Duration::from_secs(120), "world {world} did not run {n} ticks in 120 s");
        read().await;
    }
}

/// Pauses `world` and steps it to the next tick that is a multiple of `n` (at least one step),
/// so that every rate's last message is the paused state.
async fn pause_on_multiple(http: &Http, world: &str, n: u64) -> u64 {
    http.patch(&format!("/worlds/{world}"), &json!({"paused": true})).await.ok();
    let t = tick(http, world).await;
    let steps = n - t % n;
    let r = http.post(&format!("/worlds/{world}/step"), &json!({"ticks": steps})).await.ok();
    r["tick"].as_u64().expect("tick")
}

/// Whole-world binary subscribers get one `cells` message per tick, the same bytes for all of
/// them (built once: the shared-message metrics say so), and their views equal the snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_world_subscribers_share_one_cells_message_per_tick() {
    let srv = Server::fresh("fanout-shared", Opts::default());
    let http = srv.http();
    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut ws = srv.ws().await;
        ws.subscribe("demo", whole_world()).await;
        clients.push(ws);
    }
    let mut got: Vec<Vec<proto::Cells>> = vec![Vec::new(); clients.len()];
    run_ticks(&http, "demo", 60, async || {
        for (ws, got) in clients.iter_mut().zip(got.iter_mut()) {
            got.extend(cells_for(ws, Duration::from_millis(30)).await);
        }
    })
    .await;
    let last = pause_on_multiple(&http, "demo", 1).await;
    for (ws, got) in clients.iter_mut().zip(got.iter_mut()) {
        got.extend(cells_through(ws, last).await);
        // Nothing after the paused tick (a later message fails the checks below).
        got.extend(cells_for(ws, Duration::from_millis(300)).await);
    }
    let expected = quantized(&http.get("/worlds/demo/snapshot").await.ok());
    assert!(expected.len() > 50, "the demo world has agents");
    for (k, (ws, got)) in clients.iter().zip(&got).enumerate() {
        assert!(got.len() > 20, "client {k}: {} cells messages", got.len());
        // One message per tick, every tick at most once, never a per-cell frame.
        let ticks: Vec<u64> = got.iter().map(|c| c.tick).collect();
        assert!(ticks.windows(2).all(|w| w[0] < w[1]), "client {k}: ticks not increasing: {ticks:?}");
        let entries: u64 = got.iter().map(|c| c.entries.len() as u64).sum();
        assert_eq!(entries, ws.keyframes + ws.deltas, "client {k}: all state came in cells messages");
        assert!(ws.deltas > 2 * ws.cells_messages, "client {k}: {} delta entries in {} messages", ws.deltas, ws.cells_messages);
        assert_eq!(*ticks.last().expect("a message"), last, "client {k}: the last message is the paused tick");
        assert_eq!(ws.agents(), expected, "client {k}: view differs from the snapshot");
    }
    // After their keyframes, the three received identical messages for the ticks they share.
    let steady = |g: &Vec<proto::Cells>| g.iter().filter(|c| c.entries.iter().all(|e| matches!(e, proto::CellEntry::Delta(_)))).cloned().collect::<Vec<_>>();
    let (a, b) = (steady(&got[0]), steady(&got[1]));
    let shared: Vec<_> = a.iter().filter_map(|m| b.iter().find(|n| n.tick == m.tick).map(|n| (m, n))).collect();
    assert!(shared.len() > 20, "{} ticks in common", shared.len());
    for (m, n) in &shared {
        assert_eq!(proto::encode_binary(&ServerMsg::Cells((*m).clone())).unwrap(), proto::encode_binary(&ServerMsg::Cells((*n).clone())).unwrap(), "tick {}", m.tick);
    }
    let (built, hits) = (metric(&http, "cells_messages_built").await, metric(&http, "cells_shared_hits").await);
    assert!(hits >= built, "3 subscribers of the same cells: {hits} shared hits for {built} builds");
    assert!(metric(&http, "ws_messages_sent").await > 0.0);
}

/// `every_n_ticks = 4`: state comes only on multiples of 4 (after the keyframes), deltas span 4
/// ticks, fewer bytes than every tick, and the view still equals the snapshot, for a binary and
/// a JSON client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_n_ticks_sends_state_on_its_ticks_only() {
    let srv = Server::fresh("fanout-rate", Opts::default());
    let http = srv.http();
    let mut every = srv.ws().await;
    let mut slow = srv.ws().await;
    let mut js = Ws::connect_with(srv.addr, None, Encoding::Json).await.expect("json connect");
    js.hello(None).await;
    every.subscribe("demo", whole_world()).await;
    assert!(matches!(subscribe_every(&mut slow, "demo", 4).await, Outcome::Subscribed(_)));
    assert!(matches!(subscribe_every(&mut js, "demo", 4).await, Outcome::Subscribed(_)));
    let (b_every, b_slow) = (every.bytes, slow.bytes);
    let mut got = Vec::new();
    run_ticks(&http, "demo", 60, async || {
        got.extend(cells_for(&mut slow, Duration::from_millis(30)).await);
        cells_for(&mut every, Duration::from_millis(20)).await;
        js.drain(Duration::from_millis(10), Duration::from_millis(30)).await;
    })
    .await;
    let (b_every, b_slow) = (every.bytes - b_every, slow.bytes - b_slow);
    let last = pause_on_multiple(&http, "demo", 4).await;
    got.extend(cells_through(&mut slow, last).await);
    got.extend(cells_for(&mut slow, Duration::from_millis(300)).await);
    let expected = quantized(&http.get("/worlds/demo/snapshot").await.ok());
    for ws in [&mut every, &mut js] {
        assert!(ws.read_until(Duration::from_secs(30), |w| w.last_tick >= last && w.agents() == expected).await, "{:?}: the view never reached the paused state", ws.enc);
    }
    let keyed = got.iter().take_while(|c| c.entries.iter().any(|e| matches!(e, proto::CellEntry::Keyframe(_)))).count();
    let first = got.first().map_or(0, |c| c.tick);
    let rest = got.get(keyed..).unwrap_or_default();
    assert!(rest.len() > 5, "{} messages after the keyframes", rest.len());
    for c in rest {
        assert_eq!((c.tick % 4, c.span), (0, 4), "state on tick {} (span {})", c.tick, c.span);
        for e in &c.entries {
            if let proto::CellEntry::Delta(d) = e {
                // Chained on a multiple of 4, or on the state the keyframes gave (the rate's cells
                // started then).
                assert!(d.base_tick % 4 == 0 || d.base_tick <= first, "a delta from {} to {}", d.base_tick, d.tick);
            }
        }
    }
    assert!(b_slow < b_every, "every 4th tick: {b_slow} bytes, every tick: {b_every}");
    assert_eq!(got.last().map(|c| c.tick), Some(last));
    for ws in [&every, &slow, &js] {
        assert_eq!(ws.agents(), expected, "{:?}: view differs from the snapshot", ws.enc);
    }
    assert!(js.deltas > 5 && js.cells_messages == 0, "JSON: per-cell frames ({} deltas)", js.deltas);
    for bad in [0, 21] {
        let Outcome::Error(e) = subscribe_every(&mut slow, "demo", bad).await else { panic!("every_n_ticks {bad} accepted") };
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidField, Some("every_n_ticks")), "{}", e.message);
    }
}

/// A world whose agents do not move sends nothing after the keyframes: no message at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_at_rest_sends_nothing() {
    let srv = Server::fresh("fanout-rest", Opts::default());
    let http = srv.http();
    let still = json!({
        "name": "still",
        "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 200, "y": 200}},
        "edge": "clamp",
        "tick_rate": 20,
        "seed": 1,
        "groups": [{"name": "rocks", "count": 200, "area": {"type": "rect", "min_x": 10, "min_y": 10, "max_x": 190, "max_y": 190}, "behaviors": []}],
    });
    http.put("/scenarios/still", &still).await.ok();
    http.post("/worlds", &json!({"name": "still", "scenario": "still"})).await.expect(201);
    let mut ws = srv.ws().await;
    let cells = ws.subscribe("still", whole_world()).await.len() as u64;
    // The keyframes first, one per cell, however late they come (a loaded machine can take
    // longer than any fixed spell, and a keyframe read after it would count as "sent at rest").
    assert!(ws.read_until(WAIT, |w| w.keyframes >= cells).await, "{} keyframes of {cells} cells", ws.keyframes);
    assert_eq!((ws.keyframes, ws.deltas), (cells, 0), "only keyframes at first, one per cell");
    // 20 ticks (counted: however slowly they run), read all along.
    let mut later = Vec::new();
    run_ticks(&http, "still", 20, async || later.extend(cells_for(&mut ws, Duration::from_millis(100)).await)).await;
    later.extend(cells_for(&mut ws, Duration::from_millis(300)).await);
    assert!(later.is_empty(), "a world at rest sent {} messages", later.len());
    assert_eq!(ws.agents().len(), 200);
}

/// Reads every client in turn for `wait`.
async fn read_all(clients: &mut [Ws], wait: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < wait {
        for ws in clients.iter_mut() {
            cells_for(ws, Duration::from_millis(50)).await;
        }
    }
}

/// Steady whole-world subscribers are sent their frames by the world's fan-out writers (the
/// metrics count them as members and count the writers' socket writes); a world reset is not
/// steady, so the writers hand them back to their send tasks, which resync them from keyframes,
/// and they join again. With `limits.fanout_writers = 0` the send tasks send everything. Either
/// way no chain breaks (the test client panics on one), every checksum holds and every view
/// ends equal to the snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_writers_send_steady_subscribers_and_hand_them_back_on_a_reset() {
    for writers in [2u32, 0] {
        let dir = TempDir::new("fanout-writers-cfg");
        let cfg = dir.path().join("steerd.toml");
        std::fs::write(&cfg, format!("[limits]\nfanout_writers = {writers}\n")).unwrap();
        let srv = Server::fresh("fanout-writers", Opts::default().arg("--config", cfg.to_string_lossy().to_string()));
        let http = srv.http();
        let mut clients = Vec::new();
        for _ in 0..4 {
            let mut ws = srv.ws().await;
            ws.subscribe("demo", whole_world()).await;
            clients.push(ws);
        }
        // 40 ticks read (counted, not timed); with writers, until every steady subscriber has
        // joined its fan-out (a condition: a slow machine joins them later, not never).
        run_ticks(&http, "demo", 40, async || read_all(&mut clients, Duration::from_millis(100)).await).await;
        if writers > 0 {
            let t0 = Instant::now();
            while metric(&http, "fanout_members").await < 4.0 && t0.elapsed() < Duration::from_secs(30) {
                read_all(&mut clients, Duration::from_millis(100)).await;
            }
        }
        let (members, writes) = (metric(&http, "fanout_members").await, metric(&http, "fanout_writes").await);
        if writers == 0 {
            assert_eq!((members, writes), (0.0, 0.0), "no fan-out writers");
        } else {
            assert_eq!(members, 4.0, "every steady subscriber is a fan-out member");
            assert!(writes >= 4.0, "{writes} fan-out writes");
        }
        let keys_before: Vec<u64> = clients.iter().map(|ws| ws.keyframes).collect();
        let msgs_before: Vec<u64> = clients.iter().map(|ws| ws.cells_messages).collect();
        http.post("/worlds/demo/reset", &json!({})).await.ok();
        run_ticks(&http, "demo", 40, async || read_all(&mut clients, Duration::from_millis(100)).await).await;
        if writers > 0 {
            let t0 = Instant::now();
            while metric(&http, "fanout_members").await < 4.0 && t0.elapsed() < Duration::from_secs(30) {
                read_all(&mut clients, Duration::from_millis(100)).await;
            }
        }
        for (k, ws) in clients.iter().enumerate() {
            assert!(ws.keyframes > keys_before[k], "client {k}: keyframes after the reset ({} before, {} after)", keys_before[k], ws.keyframes);
            assert!(ws.cells_messages > msgs_before[k] + 10, "client {k}: frames after the reset");
        }
        if writers > 0 {
            assert!(metric(&http, "fanout_handbacks").await >= 4.0, "the reset handed every member back");
            assert_eq!(metric(&http, "fanout_members").await, 4.0, "and they joined again");
        }
        let last = pause_on_multiple(&http, "demo", 1).await;
        let expected = quantized(&http.get("/worlds/demo/snapshot").await.ok());
        assert!(expected.len() > 50, "the demo world has agents");
        for ws in clients.iter_mut() {
            ws.read_until(Duration::from_secs(30), |w| w.last_tick >= last && w.agents() == expected).await;
        }
        for (k, ws) in clients.iter().enumerate() {
            assert_eq!(ws.agents(), expected, "fanout_writers = {writers}, client {k}: view differs from the snapshot");
        }
    }
}
