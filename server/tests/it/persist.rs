//! Scenario storage across restarts and crashes.

use std::time::Duration;

use serde_json::Value;
use steerd_tests::*;

/// Issue 5 (6): a world saved as a scenario, the server stopped with SIGTERM (exit 0) and a new
/// server started on the same data dir loads it back with the same agents, obstacles and walls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_scenario_survives_a_restart() {
    let dir = TempDir::new("restart");
    let mut srv = Server::start(dir.path());
    let http = srv.http();
    create_world(&http, "keep", "keep-base", &small_scenario(100.0, &[(20.0, 20.0, 3.0), (60.0, 30.0, 5.5)])).await;
    http.post("/worlds/keep/obstacles", &json!({"center": {"x": 33.3, "y": 71.7}, "radius": 2.25})).await.expect(201);
    http.post("/worlds/keep/walls", &json!({"a": {"x": 5.5, "y": 90}, "b": {"x": 45.25, "y": 90}})).await.expect(201);
    let spawn = json!({"group": "kept", "count": 25, "area": {"type": "rect", "min_x": 70, "min_y": 60, "max_x": 95, "max_y": 95}});
    http.post("/worlds/keep/agents", &spawn).await.expect(201);
    http.patch("/worlds/keep", &json!({"paused": true})).await.ok();
    let saved = http.get("/worlds/keep/snapshot").await.ok();
    http.post("/worlds/keep/save", &json!({"scenario": "kept"})).await.ok();
    srv.terminate();
    let st = srv.wait_exit(Duration::from_secs(15)).expect("exit within 15 s of SIGTERM");
    assert!(st.success(), "{st:?}");
    drop(srv);

    let srv = Server::start(dir.path());
    let http = srv.http();
    let list = http.get("/scenarios").await.ok();
    assert!(list.as_array().unwrap().iter().any(|s| s["name"] == "kept" && s["origin"] == "saved"), "{list}");
    http.post("/worlds", &json!({"name": "back", "scenario": "kept", "paused": true})).await.expect(201);
    let loaded = http.get("/worlds/back/snapshot").await.ok();
    compare_worlds(&saved, &loaded);
    // Loading into a running world works the same.
    http.post("/worlds/demo/load", &json!({"scenario": "kept"})).await.ok();
    http.patch("/worlds/demo", &json!({"paused": true})).await.ok();
    let s = http.get("/worlds/demo/snapshot").await.ok();
    assert_eq!(s["agents"].as_array().unwrap().len(), 25);
    assert_eq!(places(&s["obstacles"], &["center", "radius"]), places(&saved["obstacles"], &["center", "radius"]));
}

/// The listed fields of each element, sorted (ids may be renumbered on load).
fn places(list: &Value, fields: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.as_array().unwrap().iter().map(|o| fields.iter().map(|f| o[*f].to_string()).collect::<Vec<_>>().join(" ")).collect();
    v.sort();
    v
}

fn compare_worlds(saved: &Value, loaded: &Value) {
    assert_eq!(saved["agents"].as_array().unwrap().len(), 25);
    assert_eq!(loaded["agents"].as_array().unwrap().len(), 25, "agent count");
    assert_eq!(saved["obstacles"].as_array().unwrap().len(), 3);
    assert_eq!(places(&loaded["obstacles"], &["center", "radius"]), places(&saved["obstacles"], &["center", "radius"]), "obstacles");
    assert_eq!(places(&loaded["walls"], &["a", "b"]), places(&saved["walls"], &["a", "b"]), "walls");
    assert_eq!(places(&loaded["agents"], &["position", "group", "radius"]), places(&saved["agents"], &["position", "group", "radius"]), "agent positions");
}

/// Issue 5 (7): SIGKILL at a random moment of saving a multi-MB world leaves the scenario file
/// whole — the old version or the new one — and the next start sweeps the temp files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_saving_leaves_old_or_new_file() {
    let _heavy = heavy_lock().await;
    let f = kill9_while_saving(20_000, 30, Duration::from_secs(50)).await;
    eprintln!("kill -9 test: {f}");
    assert!(f.rounds >= 10, "only {} rounds in the time box", f.rounds);
}
