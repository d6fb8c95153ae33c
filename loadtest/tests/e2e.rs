//! End to end: a real `steerd` on 127.0.0.1:0 and 20 bots for 3 s.
//!
//! The steerd binary is built by this test with `cargo build --release -p steerd` (the `CARGO`
//! that runs the test, the same target directory: `CARGO_TARGET_DIR` if set, else the one this
//! test binary lives in) and found at `<target>/release/steerd`. `STEERD_BIN` overrides both.
//! The swarm binary is cargo's `CARGO_BIN_EXE_steer-swarm`.

// Test helpers: a failed setup step should panic with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `<target>`: `CARGO_TARGET_DIR`, else three levels above this test binary
/// (`<target>/<profile>/deps/e2e-…`).
fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        let d = PathBuf::from(d);
        return if d.is_absolute() { d } else { workspace_root().join(d) };
    }
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

fn steerd_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("STEERD_BIN") {
        return PathBuf::from(p);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = target_dir();
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "steerd", "--target-dir"])
        .arg(&target)
        .current_dir(workspace_root())
        .status()
        .expect("running cargo build for steerd");
    assert!(status.success(), "cargo build --release -p steerd failed");
    let bin = target.join("release").join(format!("steerd{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.is_file(), "{} not found after building", bin.display());
    bin
}

/// Kills the server when the test ends, however it ends.
struct Server {
    child: Child,
    addr: String,
    _data: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start_server(extra: &[&str]) -> Server {
    let data = std::env::temp_dir().join(format!("steer-swarm-e2e-{}-{}", std::process::id(), extra.len()));
    std::fs::create_dir_all(&data).unwrap();
    let data = TempDir(data);
    let mut child = Command::new(steerd_bin())
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data.0)
        .args(extra)
        .current_dir(workspace_root())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting steerd");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(a) = line.strip_prefix("steerd listening on http://") {
                let _ = tx.send(a.trim().to_string());
            }
        }
    });
    let addr = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(a) => a,
        Err(_) => {
            let _ = child.kill();
            panic!("steerd did not print its address within 30 s");
        }
    };
    Server { child, addr, _data: data }
}

/// Runs steer-swarm against `server` with `args` (its `--url` and `--report` added) and returns
/// the report and stderr, once it exited with success.
fn swarm(server: &Server, tag: &str, args: &[&str]) -> (serde_json::Value, String) {
    let report = std::env::temp_dir().join(format!("steer-swarm-e2e-{tag}-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_steer-swarm"))
        .args(["--url", &format!("ws://{}/ws", server.addr)])
        .args(args)
        .arg("--report")
        .arg(&report)
        .output()
        .expect("running steer-swarm");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "steer-swarm failed ({:?}):\n{stderr}", out.status);
    let json = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    (json, stderr)
}

/// The report's figure `k` (a missing one fails the test, showing the report).
fn num(json: &serde_json::Value, k: &str) -> f64 {
    json[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {json:#}"))
}

/// Checks a `--skim` report of `bots` bots (`passive` of them passive) for about 2.5 s at
/// 20 Hz: every bot connected, no error, disconnect or missed tick (beyond `more_zeros`), all
/// but the first 4 skimming, and those 4 decoding and verifying what the server sent.
fn check_skim(json: &serde_json::Value, stderr: &str, bots: f64, passive: f64, more_zeros: &[&str]) {
    let n = |k: &str| num(json, k);
    assert_eq!(n("bots_connected"), bots, "{json:#}");
    assert_eq!(n("passive_bots"), passive, "{json:#}");
    for k in ["disconnects", "decode_errors", "checksum_errors", "chain_breaks", "tick_gaps"].iter().chain(more_zeros) {
        assert_eq!(n(k), 0.0, "{k}: {json:#}\n{stderr}");
    }
    let (skimmed, ticks) = (n("skimmed_messages"), n("ticks_seen"));
    assert!(skimmed > (bots - 4.0) * 20.0, "{skimmed} messages skimmed: {json:#}");
    assert!(ticks > skimmed + 4.0 * 20.0, "{ticks} ticks seen, {skimmed} skimmed: {json:#}");
    assert!(n("keyframes") >= 4.0 && n("deltas") > 0.0, "{json:#}");
    assert!(json["frame_lateness_ms"]["p99"].as_f64().is_some(), "{json:#}");
}

#[test]
fn twenty_bots_for_three_seconds() {
    let server = start_server(&["--admin-token", "e2e-token"]);
    let pid = server.child.id().to_string();
    let (json, stderr) = swarm(
        &server,
        "twenty",
        &[
            "--world", "demo", "--bots", "20", "--ramp", "500ms", "--duration", "3s", "--commands-per-sec", "0.5",
            "--spawn-per-bot", "1", "--aoi", "100x100", "--pan-every", "1s", "--admin-token", "e2e-token", "--seed", "42",
            "--quiet", "--server-pid", &pid, "--fail-if", "decode_errors>0,checksum_errors>0,disconnects>0,connect_failures>0",
        ],
    );
    let n = |k: &str| num(&json, k);
    assert_eq!(n("bots_connected"), 20.0, "{json:#}");
    for k in ["disconnects", "decode_errors", "checksum_errors", "chain_breaks", "command_errors"] {
        assert_eq!(n(k), 0.0, "{k}: {json:#}\n{stderr}");
    }
    assert!(n("frames_received") > 100.0, "{json:#}");
    assert!(n("bytes_per_agent_update") > 0.0, "{json:#}");
    assert!(n("pans") > 0.0, "{json:#}");
    for k in ["cmd_rtt_ms", "frame_lateness_ms", "connect_ms"] {
        assert!(json[k]["p99"].as_f64().is_some(), "{k}: {json:#}");
        assert!(json[k]["max"].as_f64().is_some(), "{k}: {json:#}");
    }
    assert!(json["server_tick_ms_p99"].as_f64().is_some(), "{json:#}");
}

/// `--skim`: 12 whole-world subscribers, 9 of them passive; all but the first 4 bots skim (the
/// 4 still verify). Every message is counted, every tick seen, and the verifying bots still
/// decode and check what the server sends.
#[test]
fn skimming_bots_count_every_tick() {
    let server = start_server(&["--admin-token", "e2e-token"]);
    let (json, stderr) = swarm(
        &server,
        "skim",
        &["--world", "demo", "--bots", "12", "--ramp", "300ms", "--duration", "3s", "--whole-world", "--passive", "0.75", "--skim", "--admin-token", "e2e-token", "--quiet"],
    );
    check_skim(&json, &stderr, 12.0, 9.0, &[]);
}

/// `--skim` with active bots (the capacity ladder's server ceiling): the 4 that skim still
/// spawn their agents and command them, every tick is seen, and the first 4 verify.
#[test]
fn active_bots_skim_and_still_command() {
    let server = start_server(&["--admin-token", "e2e-token"]);
    let (json, stderr) = swarm(
        &server,
        "skim-active",
        &[
            "--world", "demo", "--bots", "8", "--ramp", "300ms", "--duration", "3s", "--aoi", "100x100", "--spawn-per-bot", "1",
            "--commands-per-sec", "2", "--skim", "--admin-token", "e2e-token", "--seed", "5", "--quiet",
        ],
    );
    check_skim(&json, &stderr, 8.0, 0.0, &["command_errors", "command_timeouts"]);
    // Every bot spawned its agent, the 4 skimming ones too, and commanded it.
    assert_eq!(num(&json, "agents_spawned"), 8.0, "{json:#}");
    assert!(num(&json, "commands_sent") > 0.0 && num(&json, "command_results") > 0.0, "{json:#}");
}

#[test]
fn fail_if_trips_and_bad_usage_is_refused() {
    let bin = env!("CARGO_BIN_EXE_steer-swarm");
    let bad = Command::new(bin).args(["--fail-if", "nonsense>1"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown metric"));
    // Nothing listens on port 9 of localhost: every bot fails to connect.
    let out = Command::new(bin)
        .args(["--url", "ws://127.0.0.1:9/ws", "--bots", "3", "--duration", "1s", "--quiet", "--metrics-url", "none"])
        .args(["--connect-timeout", "1s", "--fail-if", "bots_connected<3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FAIL bots_connected<3"));
}

/// Told to stop (SIGTERM) long before `--duration`: the bots close cleanly and the report is
/// written; `--status` showed the run live (every bot connected) and says at the end that it
/// is done.
#[test]
fn sigterm_ends_the_run_with_a_report() {
    let server = start_server(&["--admin-token", "e2e-token"]);
    let dir = std::env::temp_dir().join(format!("steer-swarm-e2e-stop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _dir = TempDir(dir.clone());
    let (report, status) = (dir.join("report.json"), dir.join("status.json"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_steer-swarm"))
        .args(["--url", &format!("ws://{}/ws", server.addr), "--world", "demo", "--bots", "5", "--duration", "600s"])
        .args(["--spawn-per-bot", "1", "--commands-per-sec", "2", "--admin-token", "e2e-token", "--quiet", "--report"])
        .arg(&report)
        .arg("--status")
        .arg(&status)
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting steer-swarm");
    let t0 = std::time::Instant::now();
    let live = loop {
        let s: Option<serde_json::Value> = std::fs::read_to_string(&status).ok().and_then(|t| serde_json::from_str(&t).ok());
        if let Some(s) = s.filter(|s| s["bots_online"].as_u64() == Some(5) && s["command_results"].as_u64() > Some(0)) {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the bots never all connected and commanded: {}", std::fs::read_to_string(&status).unwrap_or_default());
        }
        assert!(child.try_wait().unwrap().is_none(), "steer-swarm ended early");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(live["done"], false, "{live}");
    assert_eq!(live["per_bot"].as_array().map(Vec::len), Some(5), "{live}");
    let st = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "steer-swarm failed ({:?}):\n{stderr}", out.status);
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(num(&json, "duration_s") < 600.0, "{json:#}");
    assert_eq!(num(&json, "bots_connected"), 5.0, "{json:#}");
    for k in ["disconnects", "decode_errors", "checksum_errors", "chain_breaks", "command_errors", "command_timeouts"] {
        assert_eq!(num(&json, k), 0.0, "{k}: {json:#}");
    }
    let rows = json["per_bot"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{json:#}");
    assert_eq!(rows.iter().map(|r| r["commands_acked"].as_u64().unwrap()).sum::<u64>() as f64, num(&json, "command_results"), "every result acknowledged: {json:#}");
    let last: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&status).unwrap()).unwrap();
    assert_eq!((last["stopping"].as_bool(), last["done"].as_bool(), last["bots_online"].as_u64()), (Some(true), Some(true), Some(0)), "{last}");
}
