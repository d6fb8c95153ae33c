//! Test 21: durable worlds under `kill -9` (docs/persistence.md).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use steer_proto::{ClientMsg, Limits, ServerMsg};
use steerd_tests::*;

use super::{Cfg, Outcome, gate, no_panic};

const WORLD: &str = "durable";

/// A bot: spawns a few agents, then sends them MoveTo orders as fast as their results come.
async fn bot(addr: std::net::SocketAddr, seed: u64) {
    let mut ws = Ws::connect(addr).await;
    ws.hello(None).await;
    let mut rng = fastrand::Rng::with_seed(seed);
    let x = rng.f32() * 180.0;
    let y = rng.f32() * 180.0;
    let rid = ws.rid();
    let agents = match ws.request(&spawn_msg(rid, WORLD, 3, [x, y, x + 15.0, y + 15.0], Limits::default())).await {
        steer_proto::Outcome::Spawned(s) => s.agents,
        _ => return,
    };
    loop {
        let rid = ws.rid();
        let msg: ClientMsg = move_to_msg(rid, WORLD, agents.clone(), rng.f32() * 200.0, rng.f32() * 200.0, 1.0);
        ws.request(&msg).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Adds obstacles one after another through REST, each at a centre of its own, and keeps the
/// centres whose `201` came back: under `every_command` each of them is on disk.
async fn obstacle_writer(http: Http, acked: Arc<Mutex<Vec<f32>>>, start: u32) {
    for k in start.. {
        let x = 1.0 + f64::from(k % 19_000) * 0.01;
        let body = json!({"center": {"x": x, "y": 100.0}, "radius": 0.25});
        let Some(r) = http.try_raw("POST", &format!("/worlds/{WORLD}/obstacles"), Some(body.to_string().as_bytes()), &[]).await else { return };
        if r.status == 201 {
            acked.lock().unwrap().push(x as f32);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A player that stays connected: its resume token, player id and agents.
async fn keeper(addr: std::net::SocketAddr) -> (Ws, String, String, Vec<u32>) {
    let mut ws = Ws::connect(addr).await;
    let w = ws.hello(None).await;
    let rid = ws.rid();
    let agents = match ws.request(&spawn_msg(rid, WORLD, 2, [90.0, 90.0, 110.0, 110.0], Limits::default())).await {
        steer_proto::Outcome::Spawned(s) => s.agents,
        other => panic!("keeper spawn: {other:?}"),
    };
    (ws, w.resume_token, w.player_id, agents)
}

/// Resumes the keeper's session on the restarted server with its old token, and commands its
/// agents: Ok(what) or Err(why).
async fn resume_keeper(addr: std::net::SocketAddr, token: &str, player: &str, agents: &[u32]) -> Result<String, String> {
    let mut ws = Ws::connect(addr).await;
    let hello = ClientMsg::Hello(steer_proto::Hello { protocol_version: steer_proto::PROTOCOL_VERSION, token: None, encoding: ws.enc, resume: Some(token.to_string()) });
    ws.send(&hello).await;
    match ws.next_until(Duration::from_secs(10), |m| matches!(m, ServerMsg::Welcome(_) | ServerMsg::Error(_))).await {
        Some(ServerMsg::Welcome(w)) if w.player_id == player => {}
        other => return Err(format!("resume refused: {other:?}")),
    }
    let rid = ws.rid();
    match ws.request(&move_to_msg(rid, WORLD, agents.to_vec(), 20.0, 20.0, 1.0)).await {
        steer_proto::Outcome::Error(e) => Err(format!("its agents are not its own after the resume: {e:?}")),
        _ => Ok(format!("{player} resumed and commanded {} agents", agents.len())),
    }
}

fn key(c: &Value) -> f32 {
    c[0].as_f64().unwrap_or(0.0) as f32
}

/// The log of the world, copied aside and replayed with `steerd replay DIR --verify --json`.
fn replay_copy(data: &std::path::Path, round: usize) -> Value {
    let src = data.join("worlds").join(WORLD);
    let dst = data.join(format!("copy-{round}"));
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    let out = std::process::Command::new(steerd_bin()).arg("replay").arg(&dst).args(["--verify", "--json", "--threads", "2"]).output().unwrap();
    gate(out.status.success(), || format!("steerd replay --verify of the log failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("replay --json: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

pub async fn t21_crash_torture(cfg: Cfg) -> Outcome {
    let rounds = cfg.pick(3, 20);
    let bots = cfg.pick(20, 50);
    let data = TempDir::new("durable");
    let mut opts = Opts::default().arg("--fsync", "every_command");
    opts.args.push("--persistence".into());
    let mut rng = Rng::from_clock();
    let mut acked_total = 0usize;
    let mut recovered_ticks = Vec::new();
    let mut recovery_secs: f64 = 0.0;
    let mut srv = Server::start_with(data.path(), opts.clone());
    create_world(&srv.http(), WORLD, "wander", &wander_scenario(200.0, 300)).await;
    let mut next_obstacle = 0u32;
    for round in 0..rounds {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for b in 0..bots {
            tasks.push(tokio::spawn(bot(srv.addr, (round * 1000 + b) as u64)));
        }
        tasks.push(tokio::spawn(obstacle_writer(srv.http(), acked.clone(), next_obstacle)));
        // A player connected at the kill: its session is logged within a second of opening.
        let (keep, token, player, keeper_agents) = keeper(srv.addr).await;
        // A random moment: 1.5 to 4 s into the round.
        tokio::time::sleep(Duration::from_millis(1500 + rng.below(2500))).await;
        srv.kill9();
        drop(keep);
        for t in &tasks {
            t.abort();
        }
        let acked: Vec<f32> = acked.lock().unwrap().clone();
        next_obstacle += acked.len() as u32 + 1000;
        acked_total += acked.len();
        let replayed = replay_copy(data.path(), round);
        srv = Server::start_with(data.path(), opts.clone());
        let http = srv.http();
        let info = http.get(&format!("/worlds/{WORLD}")).await.ok();
        let rec = &info["persistence"]["recovered"];
        gate(rec.is_object(), || format!("round {round}: the world was not recovered: {info}"));
        gate(info["persistence"]["durable"] == json!(true), || format!("round {round}: not durable after recovery: {info}"));
        // The restored state is the replay's of the same log at the same tick.
        gate(rec["tick"] == replayed["final_tick"] && rec["state_hash"] == replayed["final_state_hash"], || {
            format!("round {round}: recovered {rec} but steerd replay of the log ends at tick {} state_hash {}", replayed["final_tick"], replayed["final_state_hash"])
        });
        gate(replayed["checks"].as_u64().unwrap_or(0) > 0 && replayed["checks"] == replayed["checks_ok"], || format!("round {round}: checkpoints {replayed}"));
        // Every command that got its result is in it.
        let obstacles = http.get(&format!("/worlds/{WORLD}/obstacles")).await.ok();
        let have: Vec<f32> = obstacles.as_array().unwrap().iter().map(|o| key(&o["center"])).collect();
        let lost: Vec<&f32> = acked.iter().filter(|k| !have.iter().any(|h| (*h - **k).abs() < 1e-4)).collect();
        gate(lost.is_empty(), || format!("round {round}: {} of {} acknowledged obstacles are missing after recovery (e.g. {:?})", lost.len(), acked.len(), lost.first()));
        // The bots' agents kept their owners.
        let players = http.get(&format!("/worlds/{WORLD}/players")).await.ok();
        let owning = players.as_array().map_or(0, |p| p.iter().filter(|p| p["agents"].as_u64().unwrap_or(0) > 0).count());
        gate(owning > 0, || format!("round {round}: no player owns an agent after recovery: {players}"));
        // The connected player resumes with its old resume token and still owns its agents.
        let resumed = resume_keeper(srv.addr, &token, &player, &keeper_agents).await;
        gate(resumed.is_ok(), || format!("round {round}: {}", resumed.clone().err().unwrap_or_default()));
        recovered_ticks.push(rec["tick"].as_u64().unwrap_or(0));
        recovery_secs = recovery_secs.max(rec["seconds"].as_f64().unwrap_or(0.0));
        no_panic(&srv);
    }
    srv.terminate();
    Outcome::Pass(format!(
        "{rounds} kill -9 under {bots} bots (every_command): each restart equal to `steerd replay` of its log (ticks {recovered_ticks:?}), all {acked_total} acknowledged obstacles kept, owners kept, a connected player resumed with its token each time; slowest recovery {recovery_secs:.2} s"
    ))
}
