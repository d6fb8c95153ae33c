use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use steer_proto::{self as proto, ServerMsg};

use crate::*;

// ------------------------------------------------------------------------------ throughput

/// Throughput figures of a world watched by many clients.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Subscribed clients.
    pub clients: usize,
    /// Seconds measured.
    pub seconds: f64,
    /// World ticks per second held.
    pub ticks_per_sec: f64,
    /// Mean tick duration (simulation step), ms.
    pub mean_tick_ms: f64,
    /// Ticks dropped by the world for being late, during the run.
    pub overruns: f64,
    /// Bytes per second the server reports sending (`steerd_bytes_sent`).
    pub server_bytes_per_sec: f64,
    /// Bytes per second the clients received (WebSocket payloads).
    pub client_bytes_per_sec: f64,
    /// Keyframes per second over all clients.
    pub keyframes_per_sec: f64,
    /// Deltas per second over all clients.
    pub deltas_per_sec: f64,
    /// Events per second over all clients.
    pub events_per_sec: f64,
    /// Server CPU, in cores (1.0 = one core busy).
    pub server_cpu_cores: f64,
    /// Server RSS at the end, MiB.
    pub rss_mib: f64,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} clients × 100×100 area, {:.1} s: {:.1} ticks/s held (mean tick {:.2} ms, {} overruns), server sent {:.0} KB/s ({:.1} KB/s per client), clients received {:.0} KB/s ({:.0} keyframes/s, {:.0} deltas/s, {:.0} events/s); server CPU {:.2} cores, RSS {:.0} MiB",
            self.clients,
            self.seconds,
            self.ticks_per_sec,
            self.mean_tick_ms,
            self.overruns,
            self.server_bytes_per_sec / 1e3,
            self.server_bytes_per_sec / 1e3 / self.clients.max(1) as f64,
            self.client_bytes_per_sec / 1e3,
            self.keyframes_per_sec,
            self.deltas_per_sec,
            self.events_per_sec,
            self.server_cpu_cores,
            self.rss_mib,
        )
    }
}

/// Connects `clients` binary clients to world `demo` of `srv`, each subscribed to its own
/// 100×100 area (a 10×10 grid of areas from the world's lower corner) and reading from the
/// moment it subscribed; after 2 s of warm-up, measures for `run`. Every client applies its
/// frames (a chain break panics).
pub async fn measure_swarm(srv: &Server, clients: usize, run: Duration) -> Figures {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let http = srv.http();
    // bytes, keyframes, deltas, events over all clients
    let counts: Arc<[AtomicU64; 4]> = Arc::new(Default::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let mut ws = srv.ws().await;
        let b = ws
            .welcome
            .as_ref()
            .and_then(|w| w.worlds.iter().find(|w| w.name == "demo"))
            .expect("demo in Welcome")
            .bounds;
        let (x, y) = (
            b.min_x + (i % 10) as f32 * 100.0,
            b.min_y + (i / 10 % 10) as f32 * 100.0,
        );
        ws.subscribe("demo", rect_area(x + 0.5, y + 0.5, x + 99.5, y + 99.5))
            .await;
        let (counts, stop) = (counts.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut last = [0u64; 4];
            while !stop.load(Ordering::Relaxed) {
                if let Next::Closed(c) = ws.next(Duration::from_millis(200)).await {
                    panic!("server closed a client ({c:?})");
                }
                let now = [ws.bytes, ws.keyframes, ws.deltas, ws.events.len() as u64];
                for k in 0..4 {
                    counts[k].fetch_add(now[k] - last[k], Ordering::Relaxed);
                }
                last = now;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let snap = || {
        counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect::<Vec<u64>>()
    };
    let (metrics0, tick0, cpu0, c0, t0) = (
        http.get("/metrics").await.ok_text(),
        tick(&http, "demo").await,
        srv.cpu_seconds(),
        snap(),
        Instant::now(),
    );
    tokio::time::sleep(run).await;
    let (metrics1, tick1, cpu1, c1, secs) = (
        http.get("/metrics").await.ok_text(),
        tick(&http, "demo").await,
        srv.cpu_seconds(),
        snap(),
        t0.elapsed().as_secs_f64(),
    );
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .expect("client stuck")
            .expect("client failed");
    }
    let d = |name: &str| metric(&metrics1, name) - metric(&metrics0, name);
    let c = |k: usize| (c1[k] - c0[k]) as f64 / secs;
    let tick_count = d("steerd_tick_duration_seconds_count");
    Figures {
        clients,
        seconds: secs,
        ticks_per_sec: (tick1 - tick0) as f64 / secs,
        mean_tick_ms: if tick_count > 0.0 {
            d("steerd_tick_duration_seconds_sum") / tick_count * 1e3
        } else {
            0.0
        },
        overruns: d("steerd_tick_overruns_total"),
        server_bytes_per_sec: d("steerd_bytes_sent_total") / secs,
        client_bytes_per_sec: c(0),
        keyframes_per_sec: c(1),
        deltas_per_sec: c(2),
        events_per_sec: c(3),
        server_cpu_cores: (cpu1 - cpu0) / secs,
        rss_mib: srv.rss_kib() as f64 / 1024.0,
    }
}

// ------------------------------------------------------------------------- crash-safe save

/// Agents and obstacles listed in a scenario file.
pub fn scenario_counts(scenario: &Value) -> (usize, usize) {
    let agents = scenario["groups"].as_array().map_or(0, |gs| {
        gs.iter()
            .map(|g| {
                g["area"]["points"]
                    .as_array()
                    .map_or_else(|| g["count"].as_u64().unwrap_or(0) as usize, Vec::len)
            })
            .sum()
    });
    (agents, scenario["obstacles"].as_array().map_or(0, Vec::len))
}

/// Names of the `*.tmp` files in `dir`.
pub fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

/// What [`kill9_while_saving`] saw.
#[derive(Debug, Clone, Copy)]
pub struct KillFigures {
    /// Agents in the saved world.
    pub agents: usize,
    /// Size of the scenario file, bytes.
    pub file_bytes: u64,
    /// Kill rounds run.
    pub rounds: u32,
    /// Rounds after which the old file was there, whole.
    pub old_kept: u32,
    /// Rounds after which the new file was there, whole.
    pub new_kept: u32,
    /// Rounds that left a temp file behind (swept by the next start).
    pub temps_left: u32,
}

impl std::fmt::Display for KillFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rounds on a {:.1} MB file ({} agents): old kept {}, new kept {}, torn 0, temp files left {} (all swept at start)",
            self.rounds,
            self.file_bytes as f64 / 1e6,
            self.agents,
            self.old_kept,
            self.new_kept,
            self.temps_left
        )
    }
}

/// Issue 5 (7), test 14 of docs/reliability.md: SIGKILL at a random moment of saving a multi-MB world
/// (the demo world plus `agents` agents) leaves the scenario file whole — the old version or the
/// new one (one more obstacle) — and every start sweeps the temp files. Runs up to `rounds`
/// kill rounds within `time_box`; panics on a torn file or an unswept temp file.
pub async fn kill9_while_saving(agents: usize, rounds: u32, time_box: Duration) -> KillFigures {
    let dir = TempDir::new("kill9");
    let scen_dir = dir.path().join("scenarios");
    let file = scen_dir.join("big.json");
    let mut srv = Server::start(dir.path());
    let http = srv.http();
    http.patch("/worlds/demo", &json!({"paused": true}))
        .await
        .ok();
    let mut left = agents;
    while left > 0 {
        let n = left.min(10_000);
        let spawn = json!({"group": "crowd", "count": n, "area": {"type": "rect", "min_x": 10, "min_y": 10, "max_x": 290, "max_y": 290}});
        http.post("/worlds/demo/agents", &spawn).await.expect(201);
        left -= n;
    }
    let total = shape(&http, "demo").await.0;
    assert!(total >= agents);
    let t = Instant::now();
    http.post("/worlds/demo/save", &json!({"scenario": "big"}))
        .await
        .ok();
    let save_time = t.elapsed();
    srv.kill9();
    let size = std::fs::metadata(&file).expect("the saved file").len();
    assert!(size > 1 << 20, "the saved world is only {size} bytes");

    let mut rng = Rng::from_clock();
    let mut f = KillFigures {
        agents: total,
        file_bytes: size,
        rounds: 0,
        old_kept: 0,
        new_kept: 0,
        temps_left: 0,
    };
    let started = Instant::now();
    while f.rounds < rounds && started.elapsed() < time_box {
        f.rounds += 1;
        let round = f.rounds;
        let old = std::fs::read(&file).expect("the scenario file");
        let old_counts =
            scenario_counts(&serde_json::from_slice(&old).expect("the old file is JSON"));
        let srv = Server::start_with(dir.path(), Opts::default().arg("--scenario", "big"));
        assert!(
            temp_files(&scen_dir).is_empty(),
            "round {round}: temp files not swept at start: {:?}",
            temp_files(&scen_dir)
        );
        let http = srv.http();
        http.patch("/worlds/demo", &json!({"paused": true}))
            .await
            .ok();
        // The new version has one more obstacle.
        let x = 20.0 + f64::from(round % 30) * 8.0;
        let y = 3.0 + f64::from(round / 30) * 2.0;
        http.post(
            "/worlds/demo/obstacles",
            &json!({"center": {"x": x, "y": y}, "radius": 0.5}),
        )
        .await
        .expect(201);
        let mut srv = srv;
        let h = http.clone();
        let save = tokio::spawn(async move {
            h.try_raw(
                "POST",
                "/worlds/demo/save",
                Some(br#"{"scenario":"big"}"#),
                &[],
            )
            .await
        });
        let wait_us = rng.below((save_time.as_micros() as u64).saturating_mul(3) / 2 + 1);
        tokio::time::sleep(Duration::from_micros(wait_us)).await;
        srv.kill9();
        save.abort();
        let _ = save.await;
        if !temp_files(&scen_dir).is_empty() {
            f.temps_left += 1;
        }
        let now = std::fs::read(&file)
            .unwrap_or_else(|e| panic!("round {round}: scenario file gone: {e}"));
        if now == old {
            f.old_kept += 1;
            continue;
        }
        let v: Value = serde_json::from_slice(&now).unwrap_or_else(|e| {
            panic!(
                "round {round}: torn scenario file ({} bytes): {e}",
                now.len()
            )
        });
        assert_eq!(
            scenario_counts(&v),
            (old_counts.0, old_counts.1 + 1),
            "round {round}: neither the old nor the new version"
        );
        f.new_kept += 1;
    }
    assert_eq!(f.old_kept + f.new_kept, f.rounds);
    // The last start sweeps whatever the last kill left.
    let _srv = Server::start_with(dir.path(), Opts::default().arg("--scenario", "big"));
    assert!(
        temp_files(&scen_dir).is_empty(),
        "temp files not swept: {:?}",
        temp_files(&scen_dir)
    );
    f
}

/// What a message carries of cell state: a keyframe, a delta, or (protocol 4, binary) a `cells`
/// message with keyframe and/or delta entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateMsg {
    /// The message's tick (a keyframe's state tick).
    pub tick: u64,
    /// It carries a checksum.
    pub checksum: bool,
    /// It carries a keyframe.
    pub keyframe: bool,
    /// It carries a delta.
    pub delta: bool,
}

/// The cell state `m` carries, if any.
pub fn state_of(m: &ServerMsg) -> Option<StateMsg> {
    match m {
        ServerMsg::Keyframe(k) => Some(StateMsg {
            tick: k.tick,
            checksum: k.checksum.is_some(),
            keyframe: true,
            delta: false,
        }),
        ServerMsg::Delta(d) => Some(StateMsg {
            tick: d.tick,
            checksum: d.checksum.is_some(),
            keyframe: false,
            delta: true,
        }),
        ServerMsg::Cells(c) => Some(StateMsg {
            tick: c.tick,
            checksum: c.checksum.is_some(),
            keyframe: c
                .entries
                .iter()
                .any(|e| matches!(e, proto::CellEntry::Keyframe(_))),
            delta: c
                .entries
                .iter()
                .any(|e| matches!(e, proto::CellEntry::Delta(_))),
        }),
        _ => None,
    }
}

/// `m` carries a delta (a `delta`, or a `cells` message with a delta entry).
pub fn is_delta(m: &ServerMsg) -> bool {
    state_of(m).is_some_and(|s| s.delta)
}

/// The snapshot's quantized agents (`GET /worlds/{w}/snapshot`), sorted by id.
pub fn quantized(snap: &Value) -> Vec<proto::QAgent> {
    let mut v: Vec<proto::QAgent> =
        serde_json::from_value(snap["quantized"].clone()).expect("snapshot.quantized");
    v.sort_by_key(|a| a.id);
    v
}
