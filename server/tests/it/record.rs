//! Issue 19: recording over the real server (PATCH start on a running world, REST commands,
//! tick-rate change, download, list, delete; `--record` for every world) and `steerd replay
//! --verify` of what it wrote.

use std::time::Duration;

use serde_json::{Value, json};
use steerd_tests::*;

fn replay(file: &std::path::Path, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(steerd_bin()).arg("replay").arg(file).args(extra).output().expect("running steerd replay")
}

async fn wait_ticks(http: &Http, world: &str, n: u64) {
    let t0 = http.get(&format!("/worlds/{world}")).await.ok()["tick"].as_u64().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while http.get(&format!("/worlds/{world}")).await.ok()["tick"].as_u64().unwrap() < t0 + n {
        assert!(std::time::Instant::now() < deadline, "world {world} did not tick");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_world_records_its_commands_and_the_download_replays_exactly() {
    let srv = Server::fresh("record", Opts::default());
    let http = srv.http();
    wait_ticks(&http, "demo", 10).await;
    let info = http.get("/worlds/demo").await.ok();
    assert_eq!(info["recording"]["active"], false, "{info}");
    // Started on a running world: re-based on a snapshot, recorded from there.
    let info = http.patch("/worlds/demo", &json!({"recording": true, "recording_digests": true})).await.ok();
    assert_eq!(info["recording"]["active"], true, "{info}");
    let name = info["recording"]["name"].as_str().unwrap().to_string();
    let spawn = json!({"group": "rec", "count": 20, "area": {"type": "rect", "min_x": 10, "min_y": 10, "max_x": 30, "max_y": 30}});
    let ids = http.post("/worlds/demo/agents", &spawn).await.expect(201).json();
    wait_ticks(&http, "demo", 5).await;
    let ids: Vec<u64> = ids["agents"].as_array().or(ids.as_array()).map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default();
    assert!(!ids.is_empty());
    http.post("/worlds/demo/move-to", &json!({"agents": ids[..5], "target": {"x": 60, "y": 40}})).await.ok();
    http.post("/worlds/demo/obstacles", &json!({"center": {"x": 40, "y": 40}, "radius": 3})).await.expect(201);
    // Over the WebSocket too: a spawn and a MoveTo of a session's own agents.
    let mut ws = srv.ws().await;
    let rid = ws.rid();
    let mine = spawned(ws.request(&spawn_msg(rid, "demo", 4, [50.0, 50.0, 60.0, 60.0], steer_proto::Limits::default())).await);
    let rid = ws.rid();
    let r = ws.request(&move_to_msg(rid, "demo", mine.clone(), 20.0, 70.0, 1.0)).await;
    assert!(matches!(r, steer_proto::Outcome::Ok(_)), "MoveTo over WS: {r:?}");
    http.patch("/worlds/demo", &json!({"tick_rate": 40})).await.ok();
    wait_ticks(&http, "demo", 30).await;
    http.delete(&format!("/worlds/demo/agents/{}", ids[7])).await.expect(204);
    wait_ticks(&http, "demo", 45).await;
    // A recording being written cannot be deleted.
    http.delete(&format!("/recordings/{name}")).await.expect(409);
    let info = http.patch("/worlds/demo", &json!({"recording": false})).await.ok();
    assert_eq!(info["recording"]["active"], false, "{info}");
    assert!(info["recording"]["stopped"].is_string(), "{info}");

    let r = http.get("/worlds/demo/recording").await;
    assert_eq!(r.status, 200);
    assert!(r.body.starts_with(b"STEERREC"), "{:?}", &r.body[..16.min(r.body.len())]);
    let file = srv.data_dir.join("downloaded.rec");
    std::fs::write(&file, &r.body).unwrap();
    let out = replay(&file, &["--verify"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let j = replay(&file, &["--verify", "--json", "--threads", "2"]);
    assert!(j.status.success(), "{}", String::from_utf8_lossy(&j.stderr));
    let rep: Value = serde_json::from_slice(&j.stdout).unwrap();
    // REST spawn, move-to, obstacle, despawn; WS spawn and move-to.
    assert!(rep["commands"].as_u64().unwrap() >= 6, "{rep}");
    assert!(rep["checks"].as_u64().unwrap() >= 3 && rep["checks"] == rep["checks_ok"], "{rep}");
    assert!(rep["end"].is_array(), "{rep}");

    let list = http.get("/recordings").await.ok();
    assert!(list.as_array().unwrap().iter().any(|e| e["name"] == name.as_str() && e["active"] == false && e["bytes"].as_u64() == Some(r.body.len() as u64)), "{list}");
    http.delete("/recordings/..%2Fscenarios").await.expect(400);
    http.delete("/recordings/nope").await.expect(404);
    http.delete(&format!("/recordings/{name}")).await.expect(204);
    http.get("/worlds/demo/recording").await.expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_flag_records_every_world_from_its_start_until_shutdown() {
    let mut srv = Server::fresh("record-all", Opts { args: vec!["--record".into()], ..Opts::default() });
    let http = srv.http();
    let info = http.get("/worlds/demo").await.ok();
    assert_eq!(info["recording"]["active"], true, "{info}");
    wait_ticks(&http, "demo", 25).await;
    http.post("/worlds/demo/reset", &json!({})).await.ok();
    wait_ticks(&http, "demo", 25).await;
    let name = info["recording"]["name"].as_str().unwrap().to_string();
    srv.terminate();
    let st = srv.wait_exit(Duration::from_secs(15)).expect("exit within 15 s of SIGTERM");
    assert!(st.success(), "{st:?}");
    let file = srv.data_dir.join("recordings").join(format!("{name}.rec"));
    let j = replay(&file, &["--verify", "--json"]);
    assert!(j.status.success(), "{}", String::from_utf8_lossy(&j.stderr));
    let rep: Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(rep["segments"], 2, "{rep}");
    assert!(rep["end"].is_array() && rep["checks"].as_u64().unwrap() >= 2 && rep["checks"] == rep["checks_ok"], "{rep}");
}
