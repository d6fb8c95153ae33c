//! Live handoff between two real steerd processes (docs/handoff.md): the world, its players
//! and their agents move; clients follow `moved` and resume; the target's run re-runs bit for
//! bit from the whole log (`steerd replay --verify`); the cluster secret gates the transfer.

use std::time::{Duration, Instant};

use steer_proto::{self as proto, ClientMsg, ErrorCode, Outcome, ServerMsg};
use steerd_tests::*;

const SECRET: &str = "handoff-test-secret-0123456789";

fn cluster_server(tag: &str, secret: Option<&str>) -> Server {
    let mut args = vec!["--persistence".to_string()];
    if let Some(s) = secret {
        args.extend(["--cluster-secret".to_string(), s.to_string()]);
    }
    Server::fresh(tag, Opts { args, ..Opts::default() })
}

/// A client of `srv` subscribed to the whole of `world`, with `spawn` agents of its own.
async fn player(srv: &Server, world: &str, spawn: u32, at: [f32; 4]) -> (Ws, Vec<u32>) {
    let mut ws = Ws::connect(srv.addr).await;
    ws.hello(None).await;
    ws.subscribe(world, whole_world()).await;
    let mut agents = Vec::new();
    if spawn > 0 {
        let rid = ws.rid();
        match ws.request(&spawn_msg(rid, world, spawn, at, proto::Limits::default())).await {
            Outcome::Spawned(s) => agents = s.agents,
            other => panic!("spawn: {other:?}"),
        }
    }
    (ws, agents)
}

/// Reads until `moved` for `world` (applying frames meanwhile); answers it and the last state
/// tick seen before it.
async fn until_moved(ws: &mut Ws, world: &str) -> (proto::Moved, u64) {
    match ws.next_until(WAIT, |m| matches!(m, ServerMsg::Moved(x) if x.name == world)).await {
        Some(ServerMsg::Moved(m)) => (m, ws.last_tick),
        other => panic!("no `moved` for {world}: {other:?}"),
    }
}

/// The ticks of the next `n` state messages `ws` receives (fewer if none comes for [`WAIT`]): a
/// count, not a spell of wall time, so a loaded machine that streams late is still read.
async fn ticks_until(ws: &mut Ws, n: usize) -> Vec<u64> {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut ticks = Vec::new();
    while ticks.len() < n {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next(left).await {
            Next::Msg(ServerMsg::Cells(c)) => {
                if ticks.last() != Some(&c.tick) {
                    ticks.push(c.tick);
                }
            }
            Next::Msg(_) => {}
            Next::Timeout | Next::Closed(_) => break,
        }
    }
    ticks
}

/// A durable world with two connected players (one owning agents, one watching) moves from
/// server A to server B: both get `moved`, resume on B with their resume tokens, keep their
/// identity and agents, and command them there; B's first tick follows A's last without a gap
/// (nobody missed a tick's state); A answers the world's name with where it went and keeps
/// nothing of it; B's log — A's, then B's own — re-runs bit for bit (`steerd replay --verify`),
/// so B's `state_hash` sequence is an uninterrupted run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_and_its_players_move_to_another_server() {
    let a = cluster_server("handoff-a", Some(SECRET));
    let mut b = cluster_server("handoff-b", Some(SECRET));
    let (ha, hb) = (a.http(), b.http());
    create_world(&ha, "arena", "arena-base", &wander_scenario(200.0, 300)).await;
    let (mut p1, mine) = player(&a, "arena", 6, [20.0, 20.0, 60.0, 60.0]).await;
    let (mut p2, _) = player(&a, "arena", 0, [0.0; 4]).await;
    let who = p1.welcome.clone().unwrap();
    let watcher = p2.welcome.clone().unwrap();
    // Let it run, with an order in flight.
    let rid = p1.rid();
    assert!(matches!(p1.request(&move_to_msg(rid, "arena", mine.clone(), 150.0, 150.0, 0.0)).await, Outcome::Ok(_)));
    p1.drain(Duration::from_millis(700), Duration::from_millis(700)).await;

    let t0 = Instant::now();
    let r = ha.post("/worlds/arena/handoff", &json!({"to": format!("http://{}", b.addr)})).await.ok();
    let answered = t0.elapsed();
    assert_eq!(r["client_url"], format!("ws://{}/ws", b.addr), "{r}");
    assert!(r["sessions"].as_u64().unwrap() >= 2 && r["connections_told"].as_u64().unwrap() >= 2, "{r}");
    let frozen_tick = r["tick"].as_u64().unwrap();

    let (m1, last_a1) = until_moved(&mut p1, "arena").await;
    let (m2, last_a2) = until_moved(&mut p2, "arena").await;
    assert_eq!(m1.to, format!("ws://{}/ws", b.addr));
    assert_eq!(m2.to, m1.to);

    // Both follow at once, each with its resume token.
    let mut q1 = Ws::connect_url(&m1.to).await;
    let w1 = q1.hello_resume(None, &who.resume_token).await;
    let mut q2 = Ws::connect_url(&m2.to).await;
    let w2 = q2.hello_resume(None, &watcher.resume_token).await;
    assert_eq!((w1.player_id.as_str(), w2.player_id.as_str()), (who.player_id.as_str(), watcher.player_id.as_str()), "the sessions resumed on B");
    assert!(w1.worlds.iter().any(|w| w.name == "arena"), "{:?}", w1.worlds);

    // The restored subscriptions stream B's ticks: the first follows A's last with no gap,
    // then every tick in order.
    let ticks1 = ticks_until(&mut q1, 16).await;
    let ticks2 = ticks_until(&mut q2, 16).await;
    for (name, last_a, ticks) in [("owner", last_a1, &ticks1), ("watcher", last_a2, &ticks2)] {
        let first = *ticks.first().unwrap_or_else(|| panic!("{name}: no state from B"));
        assert!(first <= last_a + 1, "{name}: last tick on A {last_a}, first on B {first}: ticks missed");
        assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "{name}: ticks on B not consecutive: {ticks:?}");
    }

    // The owner keeps its agents on B and commands them.
    let rid = q1.rid();
    let out = q1.request(&move_to_msg(rid, "arena", mine.clone(), 30.0, 170.0, 0.0)).await;
    assert!(matches!(out, Outcome::Ok(_)), "MoveTo on B: {out:?}");
    // Another player may not command them there either.
    let rid = q2.rid();
    let out = q2.request(&move_to_msg(rid, "arena", mine.clone(), 30.0, 170.0, 0.0)).await;
    assert!(matches!(&out, Outcome::Error(e) if e.code == ErrorCode::Forbidden), "another player's MoveTo on B: {out:?}");
    let bw = hb.get("/worlds/arena").await.ok();
    assert_eq!(bw["agents"], 306, "{bw}");

    // A: the world is gone, its name says where (REST 410, WS `unknown_world` to a client
    // that arrives later), commands on the old connection are refused.
    let gone = ha.get("/worlds/arena").await;
    gone.expect(410);
    assert!(gone.text().contains("moved") && gone.text().contains(&m1.to), "410 names where it went: {}", gone.text());
    let mut late = a.ws().await;
    assert!(!late.welcome.as_ref().unwrap().worlds.iter().any(|w| w.name == "arena"), "A's Welcome lists no `arena`");
    let rid = late.rid();
    match late.request(&ClientMsg::Subscribe(proto::Subscribe { request_id: rid, world: "arena".into(), area: whole_world(), every_n_ticks: 1 })).await {
        Outcome::Error(e) => assert!(e.code == ErrorCode::UnknownWorld && e.message.contains("moved") && e.message.contains(&m1.to), "{e:?}"),
        other => panic!("a subscribe to the moved world on A: {other:?}"),
    }
    let rid = p1.rid();
    match p1.request(&move_to_msg(rid, "arena", mine.clone(), 1.0, 1.0, 0.0)).await {
        Outcome::Error(e) => assert!(e.code == ErrorCode::UnknownWorld && e.message.contains("moved"), "{e:?}"),
        other => panic!("a command on A after the move: {other:?}"),
    }
    let a_files = std::fs::read_dir(a.data_dir.join("worlds").join("arena")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(a_files, 0, "A keeps no stored state of the world it handed off");

    // B's log re-runs bit for bit, A's part and B's: every checkpoint matches.
    q1.drain(Duration::from_millis(500), Duration::from_millis(500)).await;
    hb.patch("/worlds/arena", &json!({"paused": true})).await.ok();
    b.terminate();
    assert!(b.wait_exit(Duration::from_secs(15)).is_some_and(|s| s.success()), "B stops cleanly");
    let out = std::process::Command::new(steerd_bin())
        .args(["replay", "--verify", "--json"])
        .arg(b.data_dir.join("worlds").join("arena"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "steerd replay --verify of B's log failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let rep: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(rep["final_tick"].as_u64().unwrap() > frozen_tick, "B ran past the freeze: {rep}");
    assert_eq!(rep["checks"], rep["checks_ok"], "{rep}");
    assert!(rep["checks"].as_u64().unwrap() >= 10, "{rep}");
    eprintln!("handoff: answered in {answered:?}, frozen at tick {frozen_tick}, B's log re-ran to tick {} with {} checkpoints", rep["final_tick"], rep["checks"]);
}

/// The players of `world` on `http` (`GET /worlds/{world}/players`): id → (agents owned,
/// connections, orphaned).
async fn players(http: &Http, world: &str) -> std::collections::BTreeMap<String, (u64, u64, bool)> {
    let rows = http.get(&format!("/worlds/{world}/players")).await.ok();
    rows.as_array()
        .expect("players array")
        .iter()
        .map(|r| (r["player"].as_str().unwrap().to_string(), (r["agents"].as_u64().unwrap(), r["connections"].as_u64().unwrap(), r["orphaned"].as_bool().unwrap())))
        .collect()
}

/// Polls `players` until `done` holds (≤ `within`); answers the last answer and whether it held.
async fn players_until(
    http: &Http,
    world: &str,
    within: Duration,
    done: impl Fn(&std::collections::BTreeMap<String, (u64, u64, bool)>) -> bool,
) -> (std::collections::BTreeMap<String, (u64, u64, bool)>, bool) {
    let deadline = Instant::now() + within;
    loop {
        let p = players(http, world).await;
        if done(&p) || Instant::now() >= deadline {
            let ok = done(&p);
            return (p, ok);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A steer-swarm process, stopped with SIGKILL if the test ends before it does.
struct Swarm(std::process::Child);

impl Drop for Swarm {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// steer-swarm bots (the real binary) connected to a durable world follow it when it is handed
/// off: every bot gets `moved`, resumes on B with its resume token, misses no tick's state,
/// keeps the agents it spawned on A and has a command acknowledged on B; no bot disconnects or
/// errors (but for `busy`, the answer to a command sent during the freeze). B sees the same
/// players, each owning its agents over a live connection. The swarm runs until every bot's
/// command was acknowledged on B (its `--status` says so per bot), then is told to stop
/// (SIGTERM): nothing here depends on how long anything takes, within generous bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_swarm_bots_follow_the_world_and_command_their_agents_there() {
    const BOTS: u64 = 6;
    const SPAWN: u64 = 2;
    let swarm = steer_swarm_bin().to_path_buf();
    let a = cluster_server("handoff-swarm-a", Some(SECRET));
    let b = cluster_server("handoff-swarm-b", Some(SECRET));
    let (ha, hb) = (a.http(), b.http());
    create_world(&ha, "arena", "arena-base", &wander_scenario(200.0, 300)).await;
    let report = a.data_dir.join("swarm-report.json");
    let status = a.data_dir.join("swarm-status.json");
    let errors = a.data_dir.join("swarm-stderr.txt");
    // `--duration` only bounds a run the test fails to stop; the test stops it.
    let mut bots = Swarm(
        std::process::Command::new(&swarm)
            .args(["--url", &format!("ws://{}/ws", a.addr), "--world", "arena", "--bots", &BOTS.to_string(), "--ramp", "300ms"])
            .args(["--duration", "600s", "--whole-world", "--spawn-per-bot", &SPAWN.to_string(), "--commands-per-sec", "1", "--seed", "4"])
            .arg("--report")
            .arg(&report)
            .arg("--status")
            .arg(&status)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&errors).expect("creating steer-swarm's stderr file"))
            .spawn()
            .expect("starting steer-swarm"),
    );

    // Every bot owns its agents on A; then they command them for a while.
    let owning = |p: &std::collections::BTreeMap<String, (u64, u64, bool)>| p.len() as u64 == BOTS && p.values().all(|&(n, c, o)| n == SPAWN && c >= 1 && !o);
    let (on_a, ready) = players_until(&ha, "arena", Duration::from_secs(60), owning).await;
    assert!(ready, "the bots own their agents on A: {on_a:?}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let t0 = Instant::now();
    let r = ha.post("/worlds/arena/handoff", &json!({"to": format!("http://{}", b.addr)})).await.ok();
    assert!(r["sessions"].as_u64().unwrap() >= BOTS, "{r}");

    // B: the same players, each owning its agents over a live connection.
    let (on_b, followed) = players_until(&hb, "arena", Duration::from_secs(60), owning).await;
    assert!(followed, "the bots own their agents on B: {on_b:?}");
    assert_eq!(on_a.keys().collect::<Vec<_>>(), on_b.keys().collect::<Vec<_>>(), "the same players on B");
    eprintln!("swarm handoff: every bot owns its agents on B {:?} after the handoff call", t0.elapsed());
    assert_eq!(hb.get("/worlds/arena").await.ok()["agents"], 300 + BOTS * SPAWN);
    ha.get("/worlds/arena").await.expect(410);

    // The swarm's live status: every bot has had a command acknowledged on B. Then it is told
    // to stop, and its own account follows.
    let deadline = Instant::now() + Duration::from_secs(120);
    let live = loop {
        // Written whole (renamed into place): a file that is there parses.
        let s: Option<serde_json::Value> = std::fs::read_to_string(&status).ok().and_then(|t| serde_json::from_str(&t).ok());
        if let Some(s) = s.filter(|s| s["bots_commanded_after_follow"].as_u64() == Some(BOTS)) {
            break s;
        }
        assert!(bots.0.try_wait().expect("waiting for steer-swarm").is_none(), "steer-swarm ended early:\n{}", std::fs::read_to_string(&errors).unwrap_or_default());
        assert!(Instant::now() < deadline, "not every bot had a command acknowledged on B within 120 s: {}", std::fs::read_to_string(&status).unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("swarm handoff: every bot commanded on B {:?} after the handoff call", t0.elapsed());
    assert_eq!(live["per_bot"].as_array().map(Vec::len), Some(BOTS as usize), "{live}");
    let st = std::process::Command::new("kill").args(["-TERM", &bots.0.id().to_string()]).status().expect("running kill");
    assert!(st.success(), "kill -TERM steer-swarm failed");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = bots.0.try_wait().expect("waiting for steer-swarm") {
            break st;
        }
        assert!(Instant::now() < deadline, "steer-swarm did not end within 30 s of SIGTERM");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
    assert!(status.success(), "steer-swarm failed ({status:?}):\n{stderr}");
    let rep: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let n = |k: &str| rep[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {rep:#}"));
    assert_eq!(n("bots_connected"), BOTS, "{rep:#}");
    assert_eq!(n("agents_spawned"), BOTS * SPAWN, "{rep:#}");
    assert_eq!(n("follows"), BOTS, "every bot followed: {rep:#}\n{stderr}");
    assert_eq!(n("commanded_after_follow"), BOTS, "every bot commanded its agents on B: {rep:#}\n{stderr}");
    assert_eq!(n("bots_commanded_after_follow"), BOTS, "{rep:#}");
    let rows = rep["per_bot"].as_array().unwrap_or_else(|| panic!("per_bot missing in {rep:#}"));
    assert_eq!(rows.len() as u64, BOTS, "{rep:#}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["follows"], 1, "bot {i} followed once: {row}");
        assert!(row["acked_since_follow"].as_u64() >= Some(1), "bot {i} commanded on B: {row}");
    }
    for k in ["disconnects", "connect_failures", "decode_errors", "checksum_errors", "chain_breaks", "tick_gaps", "command_timeouts", "server_errors"] {
        assert_eq!(n(k), 0, "{k}: {rep:#}\n{stderr}");
    }
    // The one refusal a handoff gives: a command sent while the world was frozen (tens of
    // milliseconds; on a busy machine hundreds) is answered `busy` (docs/handoff.md), at most
    // one per bot at one command a second.
    let busy = rep["command_error_codes"]["busy"].as_u64().unwrap_or(0);
    assert_eq!(n("command_errors"), busy, "no error but `busy` during the freeze: {rep:#}\n{stderr}");
    assert!(busy <= BOTS, "{busy} commands refused `busy`: {rep:#}");
    eprintln!(
        "swarm handoff: {} bots followed, {} commanded on B, {} commands with {} results ({busy} refused `busy` in the freeze), longest tick interval {} ms",
        n("follows"),
        n("commanded_after_follow"),
        n("commands_sent"),
        n("command_results"),
        rep["tick_interval_ms"]["max"]
    );
}

/// Without the right secret nothing moves: a target without a secret, or with another one,
/// refuses the transfer (the source answers 502 and the world runs on there, taking commands);
/// a source without a secret refuses to start (409); a world that is not durable is refused
/// (409). The server-to-server route answers 401 without the secret, 403 with a wrong one or
/// on a server that has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_secret_gates_every_transfer() {
    let a = cluster_server("handoff-gate-a", Some(SECRET));
    let b = cluster_server("handoff-gate-b", Some("another-cluster-secret-42"));
    let c = cluster_server("handoff-gate-c", None);
    let ha = a.http();
    create_world(&ha, "w", "w-base", &wander_scenario(100.0, 50)).await;
    for (to, why) in [(&b, "wrong cluster secret"), (&c, "has no cluster secret")] {
        let r = ha.post("/worlds/w/handoff", &json!({"to": format!("http://{}", to.addr)})).await;
        r.expect(502);
        assert!(r.text().contains("403") && r.text().contains(why), "{}", r.text());
        // Thawed: it ticks and takes commands here.
        let t = tick(&ha, "w").await;
        let t0 = Instant::now();
        while tick(&ha, "w").await <= t {
            assert!(t0.elapsed() < WAIT, "the world does not run on after a failed handoff (tick {t})");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ha.post("/worlds/w/agents", &json!({"group": "g", "count": 1, "area": {"type": "rect", "min_x": 1, "min_y": 1, "max_x": 9, "max_y": 9}})).await.expect(201);
    }
    let r = c.http().post("/worlds/demo/handoff", &json!({"to": format!("http://{}", a.addr)})).await;
    r.expect(409);
    assert!(r.text().contains("cluster secret"), "{}", r.text());
    ha.post("/worlds", &json!({"name": "volatile", "scenario": "w-base", "durable": false})).await.expect(201);
    let r = ha.post("/worlds/volatile/handoff", &json!({"to": format!("http://{}", b.addr)})).await;
    r.expect(409);
    assert!(r.text().contains("not durable"), "{}", r.text());
    let r = ha.post("/worlds/w/handoff", &json!({"to": "ftp://x"})).await;
    r.expect(422);

    // The server-to-server route itself.
    let body = b"STEERHND not really a package";
    let none = a.http().raw("POST", "/cluster/worlds/x", Some(body), &[("content-type", "application/octet-stream")]).await;
    assert_eq!(none.status, 401, "{}", none.text());
    let wrong = a.http().raw("POST", "/cluster/worlds/x", Some(body), &[("content-type", "application/octet-stream"), ("x-steerd-cluster-secret", "not-the-secret-at-all")]).await;
    assert_eq!(wrong.status, 403, "{}", wrong.text());
    let off = c.http().raw("POST", "/cluster/worlds/x", Some(body), &[("x-steerd-cluster-secret", SECRET)]).await;
    assert_eq!(off.status, 403, "{}", off.text());
    let bad = a.http().raw("POST", "/cluster/worlds/x", Some(body), &[("x-steerd-cluster-secret", SECRET)]).await;
    assert_eq!(bad.status, 400, "a malformed package: {}", bad.text());
    assert!(bad.text().contains("handoff package"), "{}", bad.text());
}

/// `drain.handoff_to`: at SIGTERM the durable world moves to the target before the server stops;
/// its connected player is told `moved` (not a 1001 close first) and resumes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_the_worlds_off_with_drain_handoff_to() {
    let b = cluster_server("handoff-drain-b", Some(SECRET));
    let mut a = Server::fresh(
        "handoff-drain-a",
        Opts { args: ["--persistence", "--cluster-secret", SECRET, "--handoff-to", &format!("http://{}", b.addr)].map(String::from).to_vec(), ..Opts::default() },
    );
    create_world(&a.http(), "arena", "arena-base", &wander_scenario(100.0, 40)).await;
    let (mut p, mine) = player(&a, "arena", 3, [10.0, 10.0, 30.0, 30.0]).await;
    let who = p.welcome.clone().unwrap();
    p.drain(Duration::from_millis(300), Duration::from_millis(300)).await;
    a.terminate();
    let (m, _) = until_moved(&mut p, "arena").await;
    assert!(a.wait_exit(Duration::from_secs(15)).is_some_and(|s| s.success()), "A stops cleanly after the handoff");
    let mut q = Ws::connect_url(&m.to).await;
    assert_eq!(q.hello_resume(None, &who.resume_token).await.player_id, who.player_id);
    let rid = q.rid();
    assert!(matches!(q.request(&move_to_msg(rid, "arena", mine, 50.0, 50.0, 0.0)).await, Outcome::Ok(_)));
    // B has a `demo` of its own: A's stays (refused by B, it stops with A as without a drain
    // target), and A says so.
    assert!(a.log().contains("drain: handoff failed") && a.log().contains("runs here already"), "{}", a.log_tail(20));
}
