//! Shared helpers for the end-to-end test binary in `it/`: start the real `steerd` binary on
//! `127.0.0.1:0` with its own data dir, talk to it over real sockets (a tiny HTTP/1.1 client and a
//! tokio-tungstenite WebSocket client that keeps a [`ClientState`]), and stop or kill it.
//!
//! **Finding the binary.** `CARGO_BIN_EXE_*` exists only for a package's own binaries, so
//! [`steerd_bin`] builds it once per test process (guarded by a `OnceLock`) with
//! `cargo build -p steerd --bin steerd` into the target dir and profile this test binary was
//! built in (read from `current_exe()`: `<target>/<profile>/deps/it-<hash>`), and runs
//! `<target>/<profile>/steerd`. The build is skipped when that binary is newer than every source
//! it is built from (as after `cargo test --workspace`, which builds it), and
//! `STEERD_BIN=/path/to/steerd` skips it too.
//!
//! Every wait is bounded; every server is killed when its [`Server`] drops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use steer_proto::{
    self as proto, ClientMsg, ClientState, Encoding, Event, Outcome, PROTOCOL_VERSION, ServerMsg, Welcome,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub use serde_json::json;

/// Default bound of a single wait for a message or an answer.
pub const WAIT: Duration = Duration::from_secs(10);

/// The repository root (the workspace).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Path of the `steerd` binary, built once per test process (see the module docs).
pub fn steerd_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("STEERD_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("current_exe");
        // <target>/<profile>/deps/it-<hash>
        let profile_dir = exe.parent().and_then(Path::parent).expect("test binary in <target>/<profile>/deps").to_path_buf();
        let target_dir = profile_dir.parent().expect("profile dir in a target dir").to_path_buf();
        let profile = profile_dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug").to_string();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(repo_root()).args(["build", "--quiet", "-p", "steerd", "--bin", "steerd"]).env("CARGO_TARGET_DIR", &target_dir);
        match profile.as_str() {
            "debug" => {}
            "release" => {
                cmd.arg("--release");
            }
            other => {
                cmd.args(["--profile", other]);
            }
        }
        let bin = profile_dir.join(format!("steerd{}", std::env::consts::EXE_SUFFIX));
        if !is_fresh(&bin) {
            let out = cmd.output().expect("running cargo build for steerd");
            assert!(out.status.success(), "building steerd failed:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        assert!(bin.is_file(), "no steerd binary at {}", bin.display());
        bin
    })
}

/// True when `bin` exists and is newer than every source it is built from (the server's and
/// the protocol crate's sources and manifests, the lock file, the shipped scenarios), e.g. right
/// after `cargo test --workspace` built it: then no nested `cargo build` is needed (it could
/// rebuild dependencies whose features are unified differently for `-p steerd` alone).
fn is_fresh(bin: &Path) -> bool {
    fn newest(p: &Path) -> std::time::SystemTime {
        let own = std::fs::metadata(p).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
        match std::fs::read_dir(p) {
            Ok(rd) => rd.flatten().map(|e| newest(&e.path())).fold(own, std::cmp::max),
            Err(_) => own,
        }
    }
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else { return false };
    let root = repo_root();
    ["server/src", "server/Cargo.toml", "client-proto/src", "client-proto/Cargo.toml", "Cargo.toml", "Cargo.lock", "scenarios"]
        .iter()
        .all(|p| newest(&root.join(p)) <= built)
}

/// A directory removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh, empty directory under the system temp dir.
    pub fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let p = std::env::temp_dir().join(format!("steerd-it-{tag}-{}-{}-{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
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
            .args(["--listen", opts.listen.as_deref().unwrap_or("127.0.0.1:0"), "--data-dir"])
            .arg(data_dir)
            .arg("--scenarios-dir")
            .arg(repo_root().join("scenarios"))
            .args(&opts.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(logf));
        for (k, _) in std::env::vars_os() {
            if k.to_str().is_some_and(|k| k.starts_with("STEERD_") && k != "STEERD_BIN") {
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
        let mut server = Server { child: Some(child), addr: SocketAddr::from(([127, 0, 0, 1], 0)), data_dir: data_dir.to_path_buf(), log, status: None, _dir: None };
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(a) => server.addr = a.parse().expect("listen address"),
            Err(_) => panic!("steerd did not print its address within 60 s; log:\n{}", server.log_tail(40)),
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
        let st = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().expect("running kill");
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
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// An HTTP client for this server (no token).
    pub fn http(&self) -> Http {
        Http { addr: self.addr, token: None }
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
            eprintln!("---- steerd log ({}) ----\n{}\n----", self.log.display(), self.log_tail(60));
        }
    }
}

// ------------------------------------------------------------------------------------ HTTP

/// A minimal HTTP/1.1 client (one request per connection) so the tests need no HTTP client
/// crate, and can send raw paths (`%2e%2e%2f`) exactly as written.
#[derive(Debug, Clone)]
pub struct Http {
    /// Server address.
    pub addr: SocketAddr,
    /// Bearer token sent with every request.
    pub token: Option<String>,
}

/// An HTTP response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Headers (lower-case names).
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON (panics with the body otherwise).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("status {}: body is not JSON ({e}): {}", self.status, self.text()))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts a 2xx status and answers the JSON body (`Null` when empty).
    pub fn ok(&self) -> Value {
        assert!((200..300).contains(&self.status), "expected 2xx, got {}: {}", self.status, self.text());
        if self.body.is_empty() { Value::Null } else { self.json() }
    }

    /// Asserts a 2xx status and answers the body as text.
    pub fn ok_text(&self) -> String {
        assert!((200..300).contains(&self.status), "expected 2xx, got {}: {}", self.status, self.text());
        self.text()
    }

    /// Asserts the status.
    pub fn expect(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "body: {}", self.text());
        self
    }
}

impl Http {
    /// The same client with a bearer token.
    pub fn with_token(&self, t: &str) -> Http {
        Http { addr: self.addr, token: Some(t.to_string()) }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Resp {
        self.raw("GET", path, None, &[]).await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> Resp {
        self.raw("DELETE", path, None, &[]).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.raw("POST", path, Some(body.to_string().as_bytes()), &[]).await
    }

    /// `PUT path` with a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.raw("PUT", path, Some(body.to_string().as_bytes()), &[]).await
    }

    /// `PATCH path` with a JSON body.
    pub async fn patch(&self, path: &str, body: &Value) -> Resp {
        self.raw("PATCH", path, Some(body.to_string().as_bytes()), &[]).await
    }

    /// Any request; `path` is sent exactly as given. Bounded by 30 s.
    pub async fn raw(&self, method: &str, path: &str, body: Option<&[u8]>, headers: &[(&str, &str)]) -> Resp {
        tokio::time::timeout(Duration::from_secs(30), self.raw_inner(method, path, body, headers))
            .await
            .unwrap_or_else(|_| panic!("{method} {path}: no answer within 30 s"))
            .unwrap_or_else(|| panic!("{method} {path}: connection failed or unparsable response"))
    }

    /// Like [`Http::raw`] but answers `None` instead of panicking when the connection fails
    /// (e.g. the server was killed mid-request). Bounded by 30 s.
    pub async fn try_raw(&self, method: &str, path: &str, body: Option<&[u8]>, headers: &[(&str, &str)]) -> Option<Resp> {
        tokio::time::timeout(Duration::from_secs(30), self.raw_inner(method, path, body, headers)).await.ok().flatten()
    }

    async fn raw_inner(&self, method: &str, path: &str, body: Option<&[u8]>, headers: &[(&str, &str)]) -> Option<Resp> {
        let mut s = TcpStream::connect(self.addr).await.ok()?;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.addr);
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body.unwrap_or_default());
        // Write and read at once: the server may answer (e.g. 413) and close before the body is
        // sent. A reset after the answer still leaves the answer in `buf`.
        let (mut rd, mut wr) = s.split();
        let mut buf = Vec::new();
        let ((), _) = tokio::join!(
            async {
                let _ = wr.write_all(&bytes).await;
            },
            rd.read_to_end(&mut buf)
        );
        parse_response(&buf)
    }
}

fn parse_response(buf: &[u8]) -> Option<Resp> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let raw = &buf[end + 4..];
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        let mut out = Vec::new();
        let mut rest = raw;
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n")?;
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..nl]).ok()?.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[nl + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        out
    } else {
        match headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse::<usize>().ok()) {
            Some(n) => raw.get(..n)?.to_vec(),
            None => raw.to_vec(),
        }
    };
    Some(Resp { status, headers, body })
}

// ------------------------------------------------------------------------------- WebSocket

/// What [`Ws::next`] saw.
#[derive(Debug)]
pub enum Next {
    /// A decoded server message.
    Msg(ServerMsg),
    /// The server closed, with this close code (`None`: no close frame, or a dropped socket).
    Closed(Option<u16>),
    /// Nothing within the wait.
    Timeout,
}

/// A WebSocket client that applies every keyframe and delta to a [`ClientState`] (a chain
/// break or checksum mismatch panics: the server must never send one) and records events.
pub struct Ws {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Encoding of this connection.
    pub enc: Encoding,
    /// The client's view.
    pub state: ClientState,
    /// `Welcome`, once received.
    pub welcome: Option<Welcome>,
    /// Events received.
    pub events: Vec<Event>,
    /// `Error` messages received.
    pub errors: Vec<proto::ErrorBody>,
    /// Keyframes received (messages, or entries of `cells` messages).
    pub keyframes: u64,
    /// Deltas received (messages, or entries of `cells` messages).
    pub deltas: u64,
    /// `cells` messages received.
    pub cells_messages: u64,
    /// Highest delta tick seen.
    pub last_tick: u64,
    /// Bytes of server messages received.
    pub bytes: u64,
    /// Server messages that came as text (JSON) and as binary frames.
    pub text_frames: u64,
    pub binary_frames: u64,
    /// Server messages received (several per frame when batched).
    pub messages: u64,
    /// Opened with `?batch=1`: binary frames carry one or more messages.
    pub batch: bool,
    /// Messages of a batched frame not returned yet.
    pending: std::collections::VecDeque<ServerMsg>,
    next_id: u32,
}

impl Ws {
    /// Connects to `/ws` (binary), no `Hello` yet.
    pub async fn connect(addr: SocketAddr) -> Ws {
        Ws::connect_with(addr, None, Encoding::Binary).await.expect("WebSocket connect")
    }

    /// Connects to `/ws?batch=1` (batched binary frames) and says `Hello`.
    pub async fn connect_batched(addr: SocketAddr) -> Ws {
        let mut ws = Ws::open(format!("ws://{addr}/ws?batch=1"), None, Encoding::Binary).await.expect("WebSocket connect");
        ws.batch = true;
        ws.hello(None).await;
        ws
    }

    /// Connects with an optional `Origin` header and an encoding (`?format=json` for JSON).
    pub async fn connect_with(addr: SocketAddr, origin: Option<&str>, enc: Encoding) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
        let url = match enc {
            Encoding::Binary => format!("ws://{addr}/ws"),
            Encoding::Json => format!("ws://{addr}/ws?format=json"),
        };
        Ws::open(url, origin, enc).await
    }

    /// Opens `url` with an optional `Origin` header, within [`WAIT`].
    async fn open(url: String, origin: Option<&str>, enc: Encoding) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
        let mut req = url.into_client_request()?;
        if let Some(o) = origin {
            req.headers_mut().insert("origin", o.parse().expect("origin header value"));
        }
        let (stream, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(req))
            .await
            .map_err(|_| tokio_tungstenite::tungstenite::Error::Io(std::io::Error::other("connect timed out")))??;
        Ok(Ws::from_stream(stream, enc))
    }

    /// Connects to `/ws` with a kernel receive buffer of `rcvbuf` bytes and says `Hello`: a client
    /// that stops reading backs the server's socket up quickly.
    pub async fn connect_small_buffer(addr: SocketAddr, rcvbuf: u32) -> Ws {
        let sock = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }.expect("socket");
        sock.set_recv_buffer_size(rcvbuf).expect("SO_RCVBUF");
        let stream = tokio::time::timeout(WAIT, sock.connect(addr)).await.expect("connect timed out").expect("connect");
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::client_async(format!("ws://{addr}/ws"), MaybeTlsStream::Plain(stream)))
            .await
            .expect("upgrade timed out")
            .expect("upgrade");
        let mut ws = Ws::from_stream(ws, Encoding::Binary);
        ws.hello(None).await;
        ws
    }

    /// Wraps an open stream.
    pub fn from_stream(stream: WebSocketStream<MaybeTlsStream<TcpStream>>, enc: Encoding) -> Ws {
        Ws {
            stream,
            enc,
            state: ClientState::default(),
            welcome: None,
            events: Vec::new(),
            errors: Vec::new(),
            keyframes: 0,
            cells_messages: 0,
            deltas: 0,
            last_tick: 0,
            bytes: 0,
            text_frames: 0,
            binary_frames: 0,
            messages: 0,
            batch: false,
            pending: std::collections::VecDeque::new(),
            next_id: 1,
        }
    }

    /// A fresh request id.
    pub fn rid(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends `Hello` and waits for `Welcome` (panics on anything else).
    pub async fn hello(&mut self, token: Option<&str>) -> Welcome {
        self.send(&hello(token, self.enc)).await;
        match self.next_until(WAIT, |m| matches!(m, ServerMsg::Welcome(_) | ServerMsg::Error(_))).await {
            Some(ServerMsg::Welcome(w)) => w,
            other => panic!("expected Welcome, got {other:?}"),
        }
    }

    /// Sends a message in this connection's encoding.
    pub async fn send(&mut self, msg: &ClientMsg) {
        let m = match self.enc {
            Encoding::Binary => Message::Binary(proto::encode_binary(msg).expect("encode").into()),
            Encoding::Json => Message::Text(proto::encode_json(msg).expect("encode").into()),
        };
        self.send_raw(m).await;
    }

    /// Sends a raw WebSocket message.
    pub async fn send_raw(&mut self, m: Message) {
        tokio::time::timeout(WAIT, self.stream.send(m)).await.expect("send timed out").expect("send failed");
    }

    /// Tries to send; false if the connection is gone.
    pub async fn try_send_raw(&mut self, m: Message) -> bool {
        matches!(tokio::time::timeout(WAIT, self.stream.send(m)).await, Ok(Ok(())))
    }

    /// The next message within `wait`, applied to the state.
    pub async fn next(&mut self, wait: Duration) -> Next {
        loop {
            if let Some(msg) = self.pending.pop_front() {
                self.observe(&msg);
                return Next::Msg(msg);
            }
            let m = match tokio::time::timeout(wait, self.stream.next()).await {
                Err(_) => return Next::Timeout,
                Ok(None) => return Next::Closed(None),
                Ok(Some(Err(_))) => return Next::Closed(None),
                Ok(Some(Ok(m))) => m,
            };
            let msg: ServerMsg = match &m {
                Message::Binary(b) if self.batch => {
                    self.bytes += b.len() as u64;
                    self.binary_frames += 1;
                    let msgs = proto::decode_binary_batch(b, proto::DEFAULT_SERVER_LIMIT).unwrap_or_else(|e| panic!("undecodable batch: {e}"));
                    self.pending.extend(msgs.into_iter().map(|(m, _)| m));
                    continue;
                }
                Message::Binary(b) => {
                    self.bytes += b.len() as u64;
                    self.binary_frames += 1;
                    proto::decode_binary(b, proto::DEFAULT_SERVER_LIMIT).unwrap_or_else(|e| panic!("undecodable server frame: {e}"))
                }
                Message::Text(t) => {
                    self.bytes += t.len() as u64;
                    self.text_frames += 1;
                    proto::decode_json(t.as_str(), proto::DEFAULT_SERVER_LIMIT).unwrap_or_else(|e| panic!("undecodable server frame: {e}: {}", t.as_str()))
                }
                Message::Close(c) => return Next::Closed(c.as_ref().map(|c| u16::from(c.code))),
                _ => continue,
            };
            self.observe(&msg);
            return Next::Msg(msg);
        }
    }

    fn observe(&mut self, msg: &ServerMsg) {
        self.messages += 1;
        match msg {
            ServerMsg::Welcome(w) => self.welcome = Some(w.clone()),
            ServerMsg::Keyframe(_) => self.keyframes += 1,
            ServerMsg::Delta(d) => {
                self.deltas += 1;
                self.last_tick = self.last_tick.max(d.tick);
            }
            ServerMsg::Event(e) => self.events.push(e.clone()),
            ServerMsg::Error(e) => self.errors.push(e.clone()),
            ServerMsg::CommandResult(r) => {
                if let Outcome::Subscribed(s) = &r.result {
                    self.state.retain_cells(s.world, &s.cells);
                }
            }
            ServerMsg::Cells(c) => {
                for e in &c.entries {
                    match e {
                        proto::CellEntry::Keyframe(_) => self.keyframes += 1,
                        proto::CellEntry::Delta(_) => self.deltas += 1,
                    }
                }
                self.cells_messages += 1;
                self.last_tick = self.last_tick.max(c.tick);
            }
            ServerMsg::Pong(_) => {}
        }
        if let Err(e) = self.state.apply(msg) {
            let what = match msg {
                ServerMsg::Keyframe(k) => format!("keyframe world {} cell {} tick {} ({} agents)", k.world, k.cell, k.tick, k.agents.len()),
                ServerMsg::Delta(d) => format!(
                    "delta world {} cell {} tick {} base {} (left {}, changed {}, entered {}); client holds tick {:?}",
                    d.world,
                    d.cell,
                    d.tick,
                    d.base_tick,
                    d.left.len(),
                    d.changed.len(),
                    d.entered.len(),
                    self.state.cell(d.world, d.cell).map(|c| c.tick())
                ),
                ServerMsg::Cells(c) => {
                    let held: Vec<_> = c.entries.iter().map(|e| (e.cell(), self.state.cell(c.world, e.cell()).map(|s| s.tick()))).collect();
                    format!("cells world {} tick {} span {} ({} entries); client holds (cell, tick) {held:?}", c.world, c.tick, c.span, c.entries.len())
                }
                other => format!("{other:?}"),
            };
            panic!("server frame does not apply to the client state: {e}: {what}");
        }
    }

    /// Reads until a message matches `pred` (answered) or `wait` passes (`None`); also `None`
    /// when the connection closes.
    pub async fn next_until(&mut self, wait: Duration, mut pred: impl FnMut(&ServerMsg) -> bool) -> Option<ServerMsg> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Next::Msg(m) if pred(&m) => return Some(m),
                Next::Msg(_) => {}
                Next::Closed(_) | Next::Timeout => return None,
            }
        }
    }

    /// Sends a command and waits for its `CommandResult`.
    pub async fn request(&mut self, msg: &ClientMsg) -> Outcome {
        let rid = msg.request_id().expect("a command with a request id");
        self.send(msg).await;
        self.result(rid).await
    }

    /// Waits for the `CommandResult` of `rid`.
    pub async fn result(&mut self, rid: u32) -> Outcome {
        match self.next_until(WAIT, |m| matches!(m, ServerMsg::CommandResult(r) if r.request_id == rid)).await {
            Some(ServerMsg::CommandResult(r)) => r.result,
            other => panic!("no CommandResult for request {rid}: {other:?}"),
        }
    }

    /// Reads (applying frames) until no message came for `quiet` or `max` passed.
    pub async fn drain(&mut self, quiet: Duration, max: Duration) {
        let deadline = tokio::time::Instant::now() + max;
        while tokio::time::Instant::now() < deadline {
            match self.next(quiet).await {
                Next::Msg(_) => {}
                Next::Timeout | Next::Closed(_) => return,
            }
        }
    }

    /// Reads until the server closes; answers the close code (`None` without a close frame).
    /// Panics if it stays open for `wait`.
    pub async fn expect_close(&mut self, wait: Duration) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Next::Msg(_) => {}
                Next::Closed(c) => return c,
                Next::Timeout => panic!("connection still open after {wait:?}"),
            }
        }
    }

    /// Sends a `Ping` and waits for its `Pong`: the connection is open and served.
    pub async fn ping(&mut self) -> u64 {
        let rid = self.rid();
        self.send(&ClientMsg::Ping(proto::Ping { request_id: rid })).await;
        match self.next_until(WAIT, |m| matches!(m, ServerMsg::Pong(p) if p.request_id == rid)).await {
            Some(ServerMsg::Pong(p)) => p.server_tick,
            other => panic!("no Pong for {rid}: {other:?}"),
        }
    }

    /// Subscribes and answers the cells (panics on an error result).
    pub async fn subscribe(&mut self, world: &str, area: proto::Area) -> Vec<u32> {
        let rid = self.rid();
        match self.request(&ClientMsg::Subscribe(proto::Subscribe { request_id: rid, world: world.into(), area, every_n_ticks: 1 })).await {
            Outcome::Subscribed(s) => s.cells,
            other => panic!("subscribe failed: {other:?}"),
        }
    }

    /// Every agent in view, sorted by id.
    pub fn agents(&self) -> Vec<proto::QAgent> {
        let mut v: Vec<_> = self.state.agents().map(|(_, a)| *a).collect();
        v.sort_by_key(|a| a.id);
        v
    }

    /// Closes politely (best effort).
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.stream.close(None)).await;
    }
}

/// `Hello` for protocol 1.
pub fn hello(token: Option<&str>, encoding: Encoding) -> ClientMsg {
    ClientMsg::Hello(proto::Hello { protocol_version: PROTOCOL_VERSION, token: token.map(str::to_string), encoding, resume: None })
}

/// The whole world.
pub fn whole_world() -> proto::Area {
    proto::Area::WholeWorld(proto::WholeWorld {})
}

/// A rectangle area.
pub fn rect_area(min_x: f32, min_y: f32, max_x: f32, max_y: f32) -> proto::Area {
    proto::Area::Rect(proto::Rect { min_x, min_y, max_x, max_y })
}

/// `Spawn` of `count` agents in a rectangle with default limits and no behaviours.
pub fn spawn_msg(request_id: u32, world: &str, count: u32, r: [f32; 4], limits: proto::Limits) -> ClientMsg {
    ClientMsg::Spawn(proto::Spawn {
        request_id,
        world: world.into(),
        group: "g".into(),
        count,
        area: proto::SpawnArea::Rect(proto::Rect { min_x: r[0], min_y: r[1], max_x: r[2], max_y: r[3] }),
        limits,
        behaviors: Vec::new(),
    })
}

/// `MoveTo`.
pub fn move_to_msg(request_id: u32, world: &str, agents: Vec<u32>, x: f32, y: f32, stopping_distance: f32) -> ClientMsg {
    ClientMsg::MoveTo(proto::MoveTo { request_id, world: world.into(), agents, target: proto::Point { x, y }, stopping_distance })
}

/// The agent ids of a `Spawned` outcome (panics otherwise).
pub fn spawned(o: Outcome) -> Vec<u32> {
    match o {
        Outcome::Spawned(s) => s.agents,
        other => panic!("expected Spawned, got {other:?}"),
    }
}

/// The error body of an outcome (panics on success).
pub fn error_of(o: Outcome) -> proto::ErrorBody {
    match o {
        Outcome::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

// ------------------------------------------------------------------------------ scenarios

/// A small scenario: a `size`×`size` world with `obstacles` at fixed places and no agents.
pub fn small_scenario(size: f32, obstacles: &[(f32, f32, f32)]) -> Value {
    let obs: Vec<Value> = obstacles.iter().map(|&(x, y, r)| json!({"center": {"x": x, "y": y}, "radius": r})).collect();
    json!({
        "name": "small",
        "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": size, "y": size}},
        "edge": "clamp",
        "tick_rate": 20,
        "seed": 3,
        "obstacles": obs,
    })
}

/// A scenario of `count` wanderers in a `size`×`size` wrapping world.
pub fn wander_scenario(size: f32, count: usize) -> Value {
    json!({
        "name": "wander",
        "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": size, "y": size}},
        "edge": "wrap",
        "tick_rate": 20,
        "seed": 7,
        "groups": [{
            "name": "w",
            "count": count,
            "area": {"rect": {"min": {"x": 0, "y": 0}, "max": {"x": size, "y": size}}},
            "limits": {"max_speed": 5, "max_accel": 10, "radius": 0.5},
            "initial_speed": 3,
            "behaviors": [{"behavior": {"type": "wander"}, "weight": 1, "priority": 0}],
        }],
    })
}

/// PUTs a scenario and creates world `world` from it (panics on failure).
pub async fn create_world(http: &Http, world: &str, scenario_name: &str, scenario: &Value) {
    http.put(&format!("/scenarios/{scenario_name}"), scenario).await.ok();
    http.post("/worlds", &json!({"name": world, "scenario": scenario_name})).await.expect(201);
}

/// The snapshot's agent count and obstacle list: the tick-independent part of a world.
pub async fn shape(http: &Http, world: &str) -> (usize, Value) {
    let s = http.get(&format!("/worlds/{world}/snapshot")).await.ok();
    (s["agents"].as_array().map_or(0, Vec::len), s["obstacles"].clone())
}

/// The id of the first agent of a world's snapshot.
pub async fn first_agent(http: &Http, world: &str) -> u32 {
    let s = http.get(&format!("/worlds/{world}/snapshot")).await.ok();
    s["agents"][0]["id"].as_u64().expect("a world with agents") as u32
}

/// The world's current tick (`GET /worlds/{w}`).
pub async fn tick(http: &Http, world: &str) -> u64 {
    http.get(&format!("/worlds/{world}")).await.ok()["tick"].as_u64().expect("tick")
}

/// A metric's value (sum over label sets) from `/metrics` text.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            let base = key.split('{').next()?;
            (base == name).then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

/// A small xorshift generator seeded from the clock (for kill timing).
pub struct Rng(u64);

impl Rng {
    /// Seeded from the clock; prints the seed so a failure can be replayed.
    pub fn from_clock() -> Rng {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
        eprintln!("rng seed {seed}");
        Rng(seed)
    }

    /// Uniform in `[0, n)`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Serializes load-sensitive tests (throughput, many subscribers, kill loops) so that on a
/// 2-core machine they do not starve each other.
pub async fn heavy_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

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
        let b = ws.welcome.as_ref().and_then(|w| w.worlds.iter().find(|w| w.name == "demo")).expect("demo in Welcome").bounds;
        let (x, y) = (b.min_x + (i % 10) as f32 * 100.0, b.min_y + (i / 10 % 10) as f32 * 100.0);
        ws.subscribe("demo", rect_area(x + 0.5, y + 0.5, x + 99.5, y + 99.5)).await;
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
    let snap = || counts.iter().map(|c| c.load(Ordering::Relaxed)).collect::<Vec<u64>>();
    let (metrics0, tick0, cpu0, c0, t0) = (http.get("/metrics").await.ok_text(), tick(&http, "demo").await, srv.cpu_seconds(), snap(), Instant::now());
    tokio::time::sleep(run).await;
    let (metrics1, tick1, cpu1, c1, secs) = (http.get("/metrics").await.ok_text(), tick(&http, "demo").await, srv.cpu_seconds(), snap(), t0.elapsed().as_secs_f64());
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t).await.expect("client stuck").expect("client failed");
    }
    let d = |name: &str| metric(&metrics1, name) - metric(&metrics0, name);
    let c = |k: usize| (c1[k] - c0[k]) as f64 / secs;
    let tick_count = d("steerd_tick_duration_seconds_count");
    Figures {
        clients,
        seconds: secs,
        ticks_per_sec: (tick1 - tick0) as f64 / secs,
        mean_tick_ms: if tick_count > 0.0 { d("steerd_tick_duration_seconds_sum") / tick_count * 1e3 } else { 0.0 },
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
    let agents = scenario["groups"]
        .as_array()
        .map_or(0, |gs| gs.iter().map(|g| g["area"]["points"].as_array().map_or_else(|| g["count"].as_u64().unwrap_or(0) as usize, Vec::len)).sum());
    (agents, scenario["obstacles"].as_array().map_or(0, Vec::len))
}

/// Names of the `*.tmp` files in `dir`.
pub fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str().map(str::to_string)).filter(|n| n.ends_with(".tmp")).collect())
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

/// Issue 5 (7), RELIABILITY.md test 14: SIGKILL at a random moment of saving a multi-MB world
/// (the demo world plus `agents` agents) leaves the scenario file whole — the old version or the
/// new one (one more obstacle) — and every start sweeps the temp files. Runs up to `rounds`
/// kill rounds within `time_box`; panics on a torn file or an unswept temp file.
pub async fn kill9_while_saving(agents: usize, rounds: u32, time_box: Duration) -> KillFigures {
    let dir = TempDir::new("kill9");
    let scen_dir = dir.path().join("scenarios");
    let file = scen_dir.join("big.json");
    let mut srv = Server::start(dir.path());
    let http = srv.http();
    http.patch("/worlds/demo", &json!({"paused": true})).await.ok();
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
    http.post("/worlds/demo/save", &json!({"scenario": "big"})).await.ok();
    let save_time = t.elapsed();
    srv.kill9();
    let size = std::fs::metadata(&file).expect("the saved file").len();
    assert!(size > 1 << 20, "the saved world is only {size} bytes");

    let mut rng = Rng::from_clock();
    let mut f = KillFigures { agents: total, file_bytes: size, rounds: 0, old_kept: 0, new_kept: 0, temps_left: 0 };
    let started = Instant::now();
    while f.rounds < rounds && started.elapsed() < time_box {
        f.rounds += 1;
        let round = f.rounds;
        let old = std::fs::read(&file).expect("the scenario file");
        let old_counts = scenario_counts(&serde_json::from_slice(&old).expect("the old file is JSON"));
        let srv = Server::start_with(dir.path(), Opts::default().arg("--scenario", "big"));
        assert!(temp_files(&scen_dir).is_empty(), "round {round}: temp files not swept at start: {:?}", temp_files(&scen_dir));
        let http = srv.http();
        http.patch("/worlds/demo", &json!({"paused": true})).await.ok();
        // The new version has one more obstacle.
        let x = 20.0 + f64::from(round % 30) * 8.0;
        let y = 3.0 + f64::from(round / 30) * 2.0;
        http.post("/worlds/demo/obstacles", &json!({"center": {"x": x, "y": y}, "radius": 0.5})).await.expect(201);
        let mut srv = srv;
        let h = http.clone();
        let save = tokio::spawn(async move { h.try_raw("POST", "/worlds/demo/save", Some(br#"{"scenario":"big"}"#), &[]).await });
        let wait_us = rng.below((save_time.as_micros() as u64).saturating_mul(3) / 2 + 1);
        tokio::time::sleep(Duration::from_micros(wait_us)).await;
        srv.kill9();
        save.abort();
        let _ = save.await;
        if !temp_files(&scen_dir).is_empty() {
            f.temps_left += 1;
        }
        let now = std::fs::read(&file).unwrap_or_else(|e| panic!("round {round}: scenario file gone: {e}"));
        if now == old {
            f.old_kept += 1;
            continue;
        }
        let v: Value = serde_json::from_slice(&now).unwrap_or_else(|e| panic!("round {round}: torn scenario file ({} bytes): {e}", now.len()));
        assert_eq!(scenario_counts(&v), (old_counts.0, old_counts.1 + 1), "round {round}: neither the old nor the new version");
        f.new_kept += 1;
    }
    assert_eq!(f.old_kept + f.new_kept, f.rounds);
    // The last start sweeps whatever the last kill left.
    let _srv = Server::start_with(dir.path(), Opts::default().arg("--scenario", "big"));
    assert!(temp_files(&scen_dir).is_empty(), "temp files not swept: {:?}", temp_files(&scen_dir));
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
        ServerMsg::Keyframe(k) => Some(StateMsg { tick: k.tick, checksum: k.checksum.is_some(), keyframe: true, delta: false }),
        ServerMsg::Delta(d) => Some(StateMsg { tick: d.tick, checksum: d.checksum.is_some(), keyframe: false, delta: true }),
        ServerMsg::Cells(c) => Some(StateMsg {
            tick: c.tick,
            checksum: c.checksum.is_some(),
            keyframe: c.entries.iter().any(|e| matches!(e, proto::CellEntry::Keyframe(_))),
            delta: c.entries.iter().any(|e| matches!(e, proto::CellEntry::Delta(_))),
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
    let mut v: Vec<proto::QAgent> = serde_json::from_value(snap["quantized"].clone()).expect("snapshot.quantized");
    v.sort_by_key(|a| a.id);
    v
}
