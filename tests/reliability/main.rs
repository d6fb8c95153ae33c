//! The reliability suite: the 21 tests of `docs/reliability.md` driving the real
//! release binary from outside. Run it with `tests/reliability/run.sh [--long]`, which installs
//! the tools (cargo-fuzz, cargo-deny, schemathesis in a venv, iproute2) and builds the binaries.
//!
//! ```text
//! STEERD_BIN=target/release/steerd reliability [--long] [--only 1,4,6]
//! ```
//!
//! Each test prints `test N name: PASS — figures` (or `FAIL — why`, `SKIP — why`). The default
//! (short) mode fits the README test command: its gates are correctness (codes, counts, bounds,
//! memory), never the host's speed; timings are printed as figures, and where a pass line of
//! docs/reliability.md is a timing, the short mode gates it generously and says so in the line.
//! `--long` runs the full durations (10-minute fuzzing per target, 30-minute soak, …).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod abuse;
mod durable;
mod load;
mod rest;
mod tools;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use steerd_tests::*;

/// Run settings.
#[derive(Debug, Clone)]
pub struct Cfg {
    /// Full durations.
    pub long: bool,
    /// The repository root.
    pub root: std::path::PathBuf,
}

impl Cfg {
    /// `short` in the default mode, `long` with `--long`.
    pub fn pick<T>(&self, short: T, long: T) -> T {
        if self.long { long } else { short }
    }
}

/// The outcome of one test: its figures, or why it was skipped.
pub enum Outcome {
    /// Passed, with the figures measured.
    Pass(String),
    /// Not run, with the reason.
    Skip(String),
}

type TestFn = fn(Cfg) -> Pin<Box<dyn Future<Output = Outcome> + Send>>;

macro_rules! tests {
    ($($n:literal $name:literal $f:path),* $(,)?) => {
        &[$(($n, $name, (|c| Box::pin($f(c))) as TestFn)),*]
    };
}

const TESTS: &[(u32, &str, TestFn)] = tests![
    1 "fuzz decoders and command apply" tools::t01_fuzz,
    2 "non-finite and extreme commands" abuse::t02_extreme_commands,
    3 "headless soak" tools::t03_headless_soak,
    4 "WebSocket frame abuse" abuse::t04_frame_abuse,
    5 "malformed-command barrage" abuse::t05_barrage,
    6 "slow readers" load::t06_slow_readers,
    7 "bandwidth-starved client" load::t07_starved_client,
    8 "delta chain under lag" load::t08_delta_chain,
    9 "tick overrun" load::t09_tick_overrun,
    10 "connection flood and reconnect storm" load::t10_flood,
    11 "slowloris" load::t11_slowloris,
    12 "schemathesis" tools::t12_schemathesis,
    13 "REST limits" rest::t13_rest_limits,
    14 "crash-safe save" rest::t14_crash_safe_save,
    15 "scenario names" rest::t15_scenario_names,
    16 "authorization matrix" rest::t16_authorization,
    17 "command flood" abuse::t17_command_flood,
    18 "panic containment" abuse::t18_panic_containment,
    19 "soak" load::t19_soak,
    20 "supply chain" tools::t20_supply_chain,
    21 "crash torture (durable worlds)" durable::t21_crash_torture,
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The starved client of test 7 runs as a child process inside its network namespace.
    if args.first().map(String::as_str) == Some("--starved-client") {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        rt.block_on(load::starved_client_main(&args[1..]));
        return;
    }
    let mut long = false;
    let mut only: Option<Vec<u32>> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--long" => long = true,
            "--only" => only = it.next().map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect()),
            "-h" | "--help" => {
                println!("reliability [--long] [--only 1,4,6]   (STEERD_BIN=path: the server binary; default: the steerd beside this binary)\nsee tests/reliability/run.sh and docs/reliability.md");
                return;
            }
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    use_sibling_steerd();
    let root = std::env::var_os("STEERD_REPO").map_or_else(repo_root, std::path::PathBuf::from);
    let cfg = Cfg { long, root };
    raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let started = Instant::now();
    println!("reliability suite ({} mode), steerd {}", if long { "long" } else { "short" }, steerd_bin().display());
    let mut rows: Vec<(u32, &str, &str, String, f64)> = Vec::new();
    for &(n, name, f) in TESTS {
        if only.as_ref().is_some_and(|o| !o.contains(&n)) {
            continue;
        }
        let t0 = Instant::now();
        let cfg = cfg.clone();
        let r = rt.block_on(async move { tokio::spawn(f(cfg)).await });
        let secs = t0.elapsed().as_secs_f64();
        let (verdict, text) = match r {
            Ok(Outcome::Pass(fig)) => ("PASS", fig),
            Ok(Outcome::Skip(why)) => ("SKIP", why),
            Err(e) => {
                let msg = match e.try_into_panic() {
                    Ok(p) => p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_else(|| "panic".into()),
                    Err(e) => e.to_string(),
                };
                ("FAIL", msg)
            }
        };
        println!("test {n} {name}: {verdict} — {text} [{secs:.0} s]");
        rows.push((n, name, verdict, text, secs));
    }
    let failed: Vec<u32> = rows.iter().filter(|r| r.2 == "FAIL").map(|r| r.0).collect();
    let skipped: Vec<u32> = rows.iter().filter(|r| r.2 == "SKIP").map(|r| r.0).collect();
    println!(
        "\nreliability suite: {} passed, {} failed {:?}, {} skipped {:?}, in {:.0} s",
        rows.len() - failed.len() - skipped.len(),
        failed.len(),
        failed,
        skipped.len(),
        skipped,
        started.elapsed().as_secs_f64()
    );
    rt.shutdown_timeout(Duration::from_secs(5));
    std::process::exit(if failed.is_empty() { 0 } else { 1 });
}

/// Without `STEERD_BIN`, re-runs this binary with `STEERD_BIN` = the `steerd` beside it (the
/// helpers' own lookup expects a test binary under `deps/`; this workspace forbids the `unsafe`
/// that `set_var` needs).
fn use_sibling_steerd() {
    if std::env::var_os("STEERD_BIN").is_some() {
        return;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let bin = exe.with_file_name(format!("steerd{}", std::env::consts::EXE_SUFFIX));
    let st = std::process::Command::new(&exe).args(std::env::args().skip(1)).env("STEERD_BIN", &bin).status().expect("re-running with STEERD_BIN");
    std::process::exit(st.code().unwrap_or(1));
}

/// Raises the soft open-files limit to the hard one (test 10 opens thousands of sockets).
fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if l.current != l.maximum {
        l.current = l.maximum;
        let _ = setrlimit(Resource::Nofile, l);
    }
}

// ----------------------------------------------------------------------------- shared bits

/// A settings file (`[limits]` TOML) in a temp dir kept alive with the returned guard.
pub fn config(limits: &str) -> (TempDir, Opts) {
    let dir = TempDir::new("cfg");
    let p = dir.path().join("steerd.toml");
    std::fs::write(&p, format!("[limits]\n{limits}\n")).expect("writing the settings file");
    let opts = Opts::default().arg("--config", p.to_string_lossy());
    (dir, opts)
}

/// Open file descriptors of a process.
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Threads of a process.
pub fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// The `q` quantile of `v` (sorted in place); 0 when empty.
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// A metric of the server's `/metrics`.
pub async fn metric_of(srv: &Server, name: &str) -> f64 {
    metric(&srv.http().get("/metrics").await.ok_text(), name)
}

/// Mebibytes of a KiB count.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Panics (failing the test) with `msg` unless `cond`.
#[track_caller]
pub fn gate(cond: bool, msg: impl FnOnce() -> String) {
    if !cond {
        panic!("{}", msg());
    }
}

/// No panic in the server's log.
pub fn no_panic(srv: &Server) {
    let log = srv.log();
    gate(!log.contains("panicked"), || format!("the server log shows a panic:\n{}", srv.log_tail(30)));
}
