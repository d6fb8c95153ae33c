//! Issue 19 (3): a shipped recording opened as a read-only replay world over the real server:
//! WebSocket subscribers follow it like any world; play, pause, seek backwards and forwards
//! (each seek's state equals `steerd replay FILE --until T --snapshot`, and costs fewer ticks
//! than the keyframe interval), play to the end, and every mutating command is refused.

use std::time::Duration;

use serde_json::{Value, json};
use steer_proto::{ErrorCode, Outcome, QAgent};
use steerd_tests::*;

/// Keyframe interval set for the test (the recording has 200 ticks).
const K: u64 = 25;

/// `steerd replay FILE --until T --snapshot out.json`: the state it writes.
fn replay_snapshot(file: &std::path::Path, tick: u64, out: &std::path::Path) -> Value {
    let o = std::process::Command::new(steerd_bin())
        .arg("replay")
        .arg(file)
        .args(["--until", &tick.to_string(), "--snapshot"])
        .arg(out)
        .output()
        .expect("running steerd replay");
    assert!(o.status.success(), "steerd replay --until {tick}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

async fn replay_state(http: &Http) -> Value {
    http.get("/worlds/r/replay").await.ok()
}

/// The replay world's state equals what `steerd replay --until` gives for its tick: the state
/// hash, every agent's exact position, velocity and orientation over REST, and the client's
/// view built from the WebSocket frames equals the quantized snapshot.
async fn assert_state_is(http: &Http, ws: &mut Ws, expected: &Value) {
    let r = replay_state(http).await;
    assert_eq!(r["tick"], expected["tick"], "{r}");
    assert_eq!(r["state_hash"], expected["state_hash"], "replay world at tick {}: {r}", r["tick"]);
    let snap = http.get("/worlds/r/snapshot").await.ok();
    // Both sides are f32s (`steerd replay` writes them widened to f64): compared as f32 bits.
    let exact = |v: &Value| -> Vec<Vec<u32>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let (p, v) = (&a["position"], &a["velocity"]);
                [&a["id"], &p[0], &p[1], &v[0], &v[1], &a["orientation"]].iter().map(|x| (x.as_f64().unwrap() as f32).to_bits()).collect()
            })
            .collect()
    };
    let (got, want) = (exact(&snap["agents"]), exact(&expected["agents"]));
    assert!(!want.is_empty());
    assert_eq!(got, want, "agents at tick {}", r["tick"]);
    let mut quantized: Vec<QAgent> = serde_json::from_value(snap["quantized"].clone()).unwrap();
    quantized.sort_by_key(|a| a.id);
    // The seek's reset frame and keyframes reach the subscriber (the world is paused).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while ws.agents() != quantized {
        assert!(std::time::Instant::now() < deadline, "the WebSocket view did not reach tick {}'s state", r["tick"]);
        ws.drain(Duration::from_millis(100), Duration::from_millis(500)).await;
    }
}

async fn seek(http: &Http, tick: u64) -> Value {
    let r = http.post("/worlds/r/replay/seek", &json!({"tick": tick})).await.ok();
    let s = &r["last_seek"];
    assert_eq!(s["asked"], tick, "{r}");
    let simulated = s["ticks_simulated"].as_u64().unwrap();
    // Bounded: never more than the keyframe interval, whatever the distance.
    assert!(simulated < K, "seek to {tick} simulated {simulated} ticks (keyframes every {K}): {r}");
    assert_eq!(s["tick"].as_u64().unwrap() - s["from"].as_u64().unwrap(), simulated, "{r}");
    r
}

async fn wait_replay(http: &Http, what: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = replay_state(http).await;
        if done(&r) {
            return r;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {r}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_replays_as_a_read_only_world_with_bounded_seeks() {
    let cfg_dir = TempDir::new("replay-cfg");
    let cfg = cfg_dir.path().join("steerd.toml");
    std::fs::write(&cfg, format!("[limits]\nreplay_keyframe_every = {K}\nreplay_max_keyframes = 64\n")).unwrap();
    let srv = Server::fresh("replay-world", Opts::default().arg("--config", cfg.to_string_lossy().to_string()));
    let http = srv.http();
    let recordings = srv.data_dir.join("recordings");
    std::fs::create_dir_all(&recordings).unwrap();
    let shipped = repo_root().join("tests/recordings/patrol-edits.rec");
    std::fs::copy(&shipped, recordings.join("patrol-edits.rec")).unwrap();
    std::fs::copy(repo_root().join("tests/recordings/crossing-midrun.rec"), recordings.join("crossing-midrun.rec")).unwrap();

    // Refused openings name the field and the reason.
    let r = http.post("/worlds", &json!({"name": "m", "replay": "crossing-midrun"})).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("replay") && r.text().contains("2 segments"), "{}", r.text());
    http.post("/worlds", &json!({"name": "m", "replay": "nope"})).await.expect(404);
    http.post("/worlds", &json!({"name": "m", "replay": "../scenarios/x"})).await.expect(422);
    http.post("/worlds", &json!({"name": "m", "replay": "patrol-edits", "scenario": "patrol"})).await.expect(422);

    // Opened: one pass over the recording checked all its checkpoints and kept a keyframe
    // every K ticks.
    let info = http.post("/worlds", &json!({"name": "r", "replay": "patrol-edits.rec", "paused": true})).await.expect(201).json();
    let rp = &info["replay"];
    assert_eq!(rp["recording"], "patrol-edits", "{info}");
    assert_eq!((rp["tick"].as_u64(), rp["end_tick"].as_u64(), rp["playing"].as_bool()), (Some(0), Some(200), Some(false)), "{info}");
    let v = &rp["verification"];
    assert!(v["checks"].as_u64().unwrap() >= 10 && v["checks"] == v["checks_ok"] && v["divergences"] == 0, "{info}");
    assert_eq!((rp["keyframes"].as_u64(), rp["keyframe_interval"].as_u64()), (Some(200 / K + 1), Some(K)), "{info}");
    assert!(rp["keyframe_bytes"].as_u64().unwrap() > 0, "{info}");
    assert_eq!(rp["open_ticks"], 200, "{info}");
    let live = http.get("/worlds/demo").await.ok();
    assert!(live["replay"].is_null(), "{live}");

    // A subscriber sees it like any world.
    let mut ws = srv.ws().await;
    ws.hello(None).await;
    ws.subscribe("r", whole_world()).await;
    let snap_dir = TempDir::new("replay-snaps");
    let at0 = replay_snapshot(&shipped, 0, &snap_dir.path().join("0.json"));
    assert_state_is(&http, &mut ws, &at0).await;

    // Play, then pause: the tick moves, the frames follow.
    let deltas = ws.deltas;
    assert_eq!(http.post("/worlds/r/replay/play", &json!({})).await.ok()["playing"], true);
    wait_replay(&http, "playing to tick 30", |r| r["tick"].as_u64() >= Some(30)).await;
    let paused = http.post("/worlds/r/replay/pause", &json!({})).await.ok();
    assert_eq!(paused["playing"], false);
    let t = paused["tick"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(replay_state(&http).await["tick"].as_u64(), Some(t), "paused means paused");
    assert!(ws.read_until(WAIT, |w| w.deltas > deltas + 10).await, "deltas while playing: {} then {}", deltas, ws.deltas);
    let here = replay_snapshot(&shipped, t, &snap_dir.path().join("t.json"));
    assert_state_is(&http, &mut ws, &here).await;

    // Seeks forward and backward, on and off the recorded checkpoints.
    let mut simulated = 0;
    for target in [180u64, 40, 137, 3, 199, 100, 60] {
        let r = seek(&http, target).await;
        simulated += r["last_seek"]["ticks_simulated"].as_u64().unwrap();
        let expected = replay_snapshot(&shipped, target, &snap_dir.path().join(format!("{target}.json")));
        assert_state_is(&http, &mut ws, &expected).await;
    }
    // A seek back to a keyframe simulates nothing; forward a few ticks from there goes on from
    // the current state.
    assert_eq!(seek(&http, 50).await["last_seek"]["ticks_simulated"], 0);
    let r = seek(&http, 53).await;
    assert_eq!((r["last_seek"]["from"].as_u64(), r["last_seek"]["ticks_simulated"].as_u64()), (Some(50), Some(3)), "{r}");
    simulated += 3;
    // Beyond the end: clamped to it.
    let r = seek(&http, 1_000_000).await;
    assert_eq!((r["tick"].as_u64(), r["last_seek"]["tick"].as_u64()), (Some(200), Some(200)), "{r}");
    simulated += r["last_seek"]["ticks_simulated"].as_u64().unwrap();
    let end = replay_snapshot(&shipped, 200, &snap_dir.path().join("end.json"));
    assert_state_is(&http, &mut ws, &end).await;
    let r = replay_state(&http).await;
    assert_eq!(r["seek_ticks"].as_u64(), Some(simulated), "{r}");
    let m = http.get("/metrics").await.ok_text();
    assert_eq!(metric(&m, "steerd_replay_seek_ticks_total"), simulated as f64, "{m}");
    assert_eq!(metric(&m, "steerd_replay_seeks_total"), 10.0);
    assert_eq!(metric(&m, "steerd_replay_divergences_total"), 0.0);

    // Playing past the end pauses at the end.
    seek(&http, 185).await;
    http.post("/worlds/r/replay/speed", &json!({"speed": 4})).await.ok();
    http.post("/worlds/r/replay/play", &json!({})).await.ok();
    let r = wait_replay(&http, "playing to the end", |r| r["playing"] == false).await;
    assert_eq!((r["tick"].as_u64(), r["speed"].as_f64()), (Some(200), Some(4.0)), "{r}");
    assert_state_is(&http, &mut ws, &end).await;
    // Play at the end stays there.
    assert_eq!(http.post("/worlds/r/replay/play", &json!({})).await.ok()["playing"], false);
    assert_eq!(r["verification"]["divergences"], 0, "{r}");

    // Every change is refused, naming why; nothing changes.
    seek(&http, 120).await;
    let before = replay_state(&http).await["state_hash"].clone();
    let agent = http.get("/worlds/r/snapshot").await.ok()["agents"][0]["id"].as_u64().unwrap();
    let spawn = json!({"group": "x", "count": 2, "area": {"type": "rect", "min_x": 10, "min_y": 10, "max_x": 30, "max_y": 30}});
    let refused: Vec<(&str, String, Value)> = vec![
        ("POST", "/worlds/r/agents".into(), spawn),
        ("POST", "/worlds/r/move-to".into(), json!({"agents": [agent], "target": {"x": 5, "y": 5}})),
        ("DELETE", format!("/worlds/r/agents/{agent}"), Value::Null),
        ("PUT", format!("/worlds/r/agents/{agent}/behaviors"), json!({"behaviors": []})),
        ("POST", "/worlds/r/obstacles".into(), json!({"center": {"x": 40, "y": 40}, "radius": 3})),
        ("POST", "/worlds/r/walls".into(), json!({"a": {"x": 1, "y": 1}, "b": {"x": 9, "y": 9}})),
        ("PATCH", "/worlds/r".into(), json!({"tick_rate": 40})),
        ("PATCH", "/worlds/r".into(), json!({"recording": true})),
        ("POST", "/worlds/r/step".into(), json!({"ticks": 5})),
        ("POST", "/worlds/r/reset".into(), json!({})),
        ("POST", "/worlds/r/load".into(), json!({"scenario": "patrol"})),
    ];
    for (method, path, body) in refused {
        let path = path.as_str();
        let r = match method {
            "POST" => http.post(path, &body).await,
            "PUT" => http.put(path, &body).await,
            "PATCH" => http.patch(path, &body).await,
            _ => http.delete(path).await,
        };
        assert_eq!(r.status, 409, "{method} {path}: {}", r.text());
        assert!(r.text().contains("read-only replay"), "{method} {path}: {}", r.text());
    }
    let rid = ws.rid();
    let err = error_of(ws.request(&spawn_msg(rid, "r", 3, [10.0, 10.0, 20.0, 20.0], steer_proto::Limits::default())).await);
    assert_eq!(err.code, ErrorCode::Forbidden, "{err:?}");
    assert!(err.message.contains("read-only replay"), "{err:?}");
    let rid = ws.rid();
    let o = ws.request(&move_to_msg(rid, "r", vec![agent as u32], 5.0, 5.0, 1.0)).await;
    assert!(matches!(&o, Outcome::Error(e) if e.message.contains("read-only replay")), "{o:?}");
    let after = replay_state(&http).await;
    assert_eq!((after["state_hash"].clone(), after["tick"].as_u64()), (before, Some(120)), "{after}");
    // Pausing through PATCH is fine (it changes the playback, not the world).
    http.patch("/worlds/r", &json!({"paused": true})).await.ok();

    // Controls that make no sense are refused too.
    let r = http.post("/worlds/r/replay/speed", &json!({"speed": 0})).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("speed"), "{}", r.text());
    http.post("/worlds/r/replay/speed", &json!({"speed": 1e9})).await.expect(422);
    let r = http.post("/worlds/demo/replay/seek", &json!({"tick": 3})).await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(r.text().contains("not a replay world"), "{}", r.text());
    http.post("/worlds/r/replay/seek", &json!({"tick": -1})).await.expect(422);
    // The server is fine, and the replay world answers.
    assert_eq!(replay_state(&http).await["tick"], 120);
    http.delete("/worlds/r").await.expect(204);
    ws.close().await;
}

/// `steerd replay FILE --until T --snapshot state.json`, a bare file name as docs/record-replay.md
/// shows it: written into the working directory, exit 0.
#[test]
fn replay_snapshot_to_a_bare_file_name() {
    let dir = TempDir::new("replay-bare");
    let rec = repo_root().join("tests/recordings/patrol-edits.rec");
    let o = std::process::Command::new(steerd_bin())
        .current_dir(dir.path())
        .arg("replay")
        .arg(&rec)
        .args(["--until", "20", "--snapshot", "state.json"])
        .output()
        .expect("running steerd replay");
    assert!(o.status.success(), "steerd replay --snapshot state.json: {}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(dir.path().join("state.json")).unwrap()).unwrap();
    assert_eq!(v["tick"], 20, "{v}");
}
