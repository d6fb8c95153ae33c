//! Scenario storage across restarts and crashes.

use std::time::{Duration, Instant};

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

/// Agents and obstacles listed in a scenario file.
fn counts(scenario: &Value) -> (usize, usize) {
    let agents = scenario["groups"]
        .as_array()
        .map_or(0, |gs| gs.iter().map(|g| g["area"]["points"].as_array().map_or_else(|| g["count"].as_u64().unwrap_or(0) as usize, Vec::len)).sum());
    (agents, scenario["obstacles"].as_array().map_or(0, Vec::len))
}

fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str().map(str::to_string)).filter(|n| n.ends_with(".tmp")).collect())
        .unwrap_or_default()
}

/// Issue 5 (7): SIGKILL at a random moment of saving a multi-MB world leaves the scenario file
/// whole — the old version or the new one — and the next start sweeps the temp files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_saving_leaves_old_or_new_file() {
    let _heavy = heavy_lock().await;
    let dir = TempDir::new("kill9");
    let scen_dir = dir.path().join("scenarios");
    let file = scen_dir.join("big.json");
    // Version 0: the demo world plus 20,000 agents.
    let mut srv = Server::start(dir.path());
    let http = srv.http();
    http.patch("/worlds/demo", &json!({"paused": true})).await.ok();
    for _ in 0..2 {
        let spawn = json!({"group": "crowd", "count": 10000, "area": {"type": "rect", "min_x": 10, "min_y": 10, "max_x": 290, "max_y": 290}});
        http.post("/worlds/demo/agents", &spawn).await.expect(201);
    }
    let agents = shape(&http, "demo").await.0;
    assert!(agents >= 20_000);
    let t = Instant::now();
    http.post("/worlds/demo/save", &json!({"scenario": "big"})).await.ok();
    let save_time = t.elapsed();
    srv.kill9();
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > 1 << 20, "the saved world is only {size} bytes");
    eprintln!("kill -9 test: {agents} agents, {:.1} MB file, one save takes {save_time:?}", size as f64 / 1e6);

    let mut rng = Rng::from_clock();
    let (mut old_kept, mut new_kept, mut temps_seen) = (0, 0, 0);
    let started = Instant::now();
    let mut rounds = 0;
    while rounds < 30 && started.elapsed() < Duration::from_secs(50) {
        rounds += 1;
        let old = std::fs::read(&file).unwrap();
        let old_counts = counts(&serde_json::from_slice(&old).unwrap());
        let srv = Server::start_with(dir.path(), Opts::default().arg("--scenario", "big"));
        assert!(temp_files(&scen_dir).is_empty(), "round {rounds}: temp files not swept at start: {:?}", temp_files(&scen_dir));
        let http = srv.http();
        http.patch("/worlds/demo", &json!({"paused": true})).await.ok();
        // The new version has one more obstacle.
        let x = 20.0 + rounds as f64 * 8.0;
        http.post("/worlds/demo/obstacles", &json!({"center": {"x": x, "y": 3.0}, "radius": 0.5})).await.expect(201);
        let mut srv = srv;
        let h = http.clone();
        let save = tokio::spawn(async move { h.try_raw("POST", "/worlds/demo/save", Some(br#"{"scenario":"big"}"#), &[]).await });
        let wait_us = rng.below((save_time.as_micros() as u64).saturating_mul(3) / 2 + 1);
        tokio::time::sleep(Duration::from_micros(wait_us)).await;
        srv.kill9();
        save.abort();
        let _ = save.await;
        if !temp_files(&scen_dir).is_empty() {
            temps_seen += 1;
        }
        let now = std::fs::read(&file).unwrap_or_else(|e| panic!("round {rounds}: scenario file gone: {e}"));
        if now == old {
            old_kept += 1;
            continue;
        }
        let v: Value = serde_json::from_slice(&now).unwrap_or_else(|e| panic!("round {rounds}: torn scenario file ({} bytes): {e}", now.len()));
        assert_eq!(counts(&v), (old_counts.0, old_counts.1 + 1), "round {rounds}: neither the old nor the new version");
        new_kept += 1;
    }
    eprintln!("kill -9 test: {rounds} rounds: old file kept {old_kept}, new file {new_kept}, temp file left behind {temps_seen}");
    assert_eq!(old_kept + new_kept, rounds);
    assert!(rounds >= 10, "only {rounds} rounds in the time box");
    // The last start sweeps whatever the last kill left.
    let _srv = Server::start_with(dir.path(), Opts::default().arg("--scenario", "big"));
    assert!(temp_files(&scen_dir).is_empty(), "temp files not swept: {:?}", temp_files(&scen_dir));
}
