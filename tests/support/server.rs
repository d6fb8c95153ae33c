use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::*;

/// Default bound of a single wait for a message or an answer.
pub const WAIT: Duration = Duration::from_secs(10);

/// The repository root (the workspace).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Path of the `steerd` binary Cargo built (see the crate docs): `STEERD_BIN`, or `steerd` in
/// the profile directory of the running test binary. Panics with what to do when it is missing.
pub fn steerd_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("STEERD_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("current_exe");
        // <target>/<profile>/deps/<test>-<hash>
        let profile_dir = exe.parent().and_then(Path::parent).expect("test binary in <target>/<profile>/deps");
        let bin = profile_dir.join(format!("steerd{}", std::env::consts::EXE_SUFFIX));
        assert!(
            bin.is_file(),
            "no steerd binary at {}: run the tests with `cargo test -p steerd` (Cargo builds it), or set STEERD_BIN",
            bin.display()
        );
        bin
    })
}

/// Path of the `steer-swarm` binary, up to date: `STEER_SWARM_BIN` when set, else built with
/// the `cargo` that runs the tests (`CARGO`) into the running test binary's target directory
/// and profile (`cargo build -p steer-swarm`; nothing to compile after a workspace build, which
/// builds it for its own tests). steer-swarm is another package, so Cargo builds it for
/// `steerd`'s tests only when the whole workspace's tests are built; this keeps a stale binary
/// from being tested. Panics with the build's failure.
pub fn steer_swarm_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("STEER_SWARM_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("current_exe");
        // <target>/<profile>/deps/<test>-<hash>
        let profile_dir = exe.parent().and_then(Path::parent).expect("test binary in <target>/<profile>/deps");
        let target = profile_dir.parent().expect("<target>");
        let profile = profile_dir.file_name().and_then(|n| n.to_str()).expect("profile directory name");
        let profile = if profile == "debug" { "dev" } else { profile };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "-p", "steer-swarm", "--profile", profile, "--target-dir"])
            .arg(target)
            .current_dir(repo_root())
            .output()
            .expect("running cargo build -p steer-swarm");
        assert!(out.status.success(), "cargo build -p steer-swarm --profile {profile} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let bin = profile_dir.join(format!("steer-swarm{}", std::env::consts::EXE_SUFFIX));
        assert!(bin.is_file(), "no steer-swarm binary at {} after building it", bin.display());
        bin
    })
}

/// A directory removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh, empty directory under the system temp dir.
    pub fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let p = std::env::temp_dir().join(format!(
            "steerd-it-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("creating temp dir");
        TempDir(p)
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `steerd serve`, killed on drop.
pub struct Server {
    child: Option<Child>,
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Its data dir.
    pub data_dir: PathBuf,
    log: PathBuf,
    /// Exit status once it has exited.
    status: Option<ExitStatus>,
    /// The data dir when the server owns it (removed after the process is killed).
    _dir: Option<TempDir>,
}

/// Options of a server start.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    /// Extra command-line arguments.
    pub args: Vec<String>,
    /// Address to listen on instead of `127.0.0.1:0` (e.g. a veth address in a network
    /// namespace; port 0 still).
    pub listen: Option<String>,
    /// A command the server runs under (e.g. `ip netns exec NS`).
    pub prefix: Vec<String>,
}

impl Opts {
    /// Adds `--flag value`.
    pub fn arg(mut self, flag: &str, value: impl Into<String>) -> Self {
        self.args.push(flag.to_string());
        self.args.push(value.into());
        self
    }
}

impl Server {
    /// Starts a server with `opts` in a fresh data dir of its own.
    pub fn fresh(tag: &str, opts: Opts) -> Server {
        let dir = TempDir::new(tag);
        let mut srv = Server::start_with(dir.path(), opts);
        srv._dir = Some(dir);
        srv
    }

    /// Starts a server with default options in `data_dir`.
    pub fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, Opts::default())
    }

    /// Starts `steerd serve --listen 127.0.0.1:0 --data-dir DIR --scenarios-dir <repo>/scenarios
    /// ARGS…` and waits (≤ 60 s) for its "listening on" line.
    pub fn start_with(data_dir: &Path, opts: Opts) -> Server {
        let bin = steerd_bin();
        static N: AtomicU64 = AtomicU64::new(0);
        let log = data_dir.join(format!("server-{}.log", N.fetch_add(1, Ordering::Relaxed)));
        let logf = std::fs::File::create(&log).expect("creating server log");
        let mut cmd = match opts.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        cmd.arg("serve")
            .args([
                "--listen",
                opts.listen.as_deref().unwrap_or("127.0.0.1:0"),
                "--data-dir",
            ])
            .arg(data_dir)
            .arg("--scenarios-dir")
            .arg(repo_root().join("scenarios"))
            .args(&opts.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(logf));
        for (k, _) in std::env::vars_os() {
            if k.to_str()
                .is_some_and(|k| k.starts_with("STEERD_") && k != "STEERD_BIN")
            {
                cmd.env_remove(k);
            }
        }
        let mut child = cmd.spawn().expect("spawning steerd");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(a) = line.strip_prefix("steerd listening on http://") {
                    let _ = tx.send(a.trim().to_string());
                }
            }
        });
        let mut server = Server {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: data_dir.to_path_buf(),
            log,
            status: None,
            _dir: None,
        };
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(a) => server.addr = a.parse().expect("listen address"),
            Err(_) => panic!(
                "steerd did not print its address within 60 s; log:\n{}",
                server.log_tail(40)
            ),
        }
        server
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The last `n` lines of the server's log (stderr).
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// The whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Resident set size in KiB (`VmRSS` of `/proc/<pid>/status`).
    pub fn rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/<pid>/status")
    }

    /// CPU seconds (user + system) the process has used, from `/proc/<pid>/stat` (assumes the
    /// usual 100 clock ticks per second).
    pub fn cpu_seconds(&self) -> f64 {
        let s = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // After the command: state is field 3, so utime (14) and stime (15) are at 11 and 12.
        (ticks(11) + ticks(12)) / 100.0
    }

    /// Sends SIGTERM (through `kill(1)`: this crate forbids `unsafe`, so no libc).
    pub fn terminate(&self) {
        let st = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("running kill");
        assert!(st.success(), "kill -TERM failed");
    }

    /// SIGKILL now and reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            self.status = c.wait().ok();
        }
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while let Some(c) = self.child.as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                self.status = Some(st);
                self.child = None;
                break;
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.status
    }

    /// True while the process runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// An HTTP client for this server (no token).
    pub fn http(&self) -> Http {
        Http {
            addr: self.addr,
            token: None,
        }
    }

    /// A WebSocket client that has said `Hello` (binary, no token).
    pub async fn ws(&self) -> Ws {
        let mut ws = Ws::connect(self.addr).await;
        ws.hello(None).await;
        ws
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- steerd log ({}) ----\n{}\n----",
                self.log.display(),
                self.log_tail(60)
            );
        }
    }
}
