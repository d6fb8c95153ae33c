//! Session safety over real sockets: a resume takes over only a dropped session, never past its
//! player token's expiry, and a failed one leaves the victim's session valid; one client
//! cycling connections (a player, or anonymous players from one address) cannot fill the
//! server's session table.

use std::time::Duration;

use steer_proto::{self as proto, ClientMsg, Encoding, ErrorCode, ServerMsg};
use steerd_tests::*;

const SECRET: &str = "sessions-test-secret-0123456789";

/// A player token expiring `ttl` seconds from now.
fn token_ttl(sub: &str, ttl: u64) -> String {
    token_exp(sub, steerd::auth::now_secs() + ttl)
}

/// A player token expiring at `exp` (seconds since the Unix epoch).
fn token_exp(sub: &str, exp: u64) -> String {
    let claims = steerd::auth::Claims { sub: sub.into(), role: None, worlds: None, team: None, exp, nbf: None, iat: None };
    steerd::auth::mint(SECRET, &claims).unwrap()
}

fn token(sub: &str) -> String {
    token_ttl(sub, 3600)
}

/// A server with the `[auth]` keys given (TOML lines) and admin token `adm`; `jwt`: with the
/// player secret (else dev mode).
fn server(tag: &str, jwt: bool, auth_toml: &str) -> Server {
    let dir = TempDir::new(&format!("{tag}-cfg"));
    let cfg = dir.path().join("steerd.toml");
    let secret = if jwt { format!("player_jwt_secret = \"{SECRET}\"\n") } else { String::new() };
    std::fs::write(&cfg, format!("[auth]\n{secret}{auth_toml}\n")).unwrap();
    let srv = Server::fresh(tag, Opts::default().arg("--config", cfg.to_string_lossy().to_string()).arg("--admin-token", "adm"));
    // The config file is read at start; the dir can go.
    drop(dir);
    srv
}

fn hello_with(token: Option<&str>, resume: Option<&str>) -> ClientMsg {
    ClientMsg::Hello(proto::Hello { protocol_version: proto::PROTOCOL_VERSION, token: token.map(str::to_string), encoding: Encoding::Binary, resume: resume.map(str::to_string) })
}

/// Connects and says `msg` (a Hello); answers the connection and its Welcome, or the error.
async fn join(srv: &Server, msg: &ClientMsg) -> (Ws, Result<proto::Welcome, proto::ErrorBody>) {
    let mut ws = Ws::connect(srv.addr).await;
    ws.send(msg).await;
    let r = match ws.next_until(WAIT, |m| matches!(m, ServerMsg::Welcome(_) | ServerMsg::Error(_))).await {
        Some(ServerMsg::Welcome(w)) => Ok(w),
        Some(ServerMsg::Error(e)) => Err(e),
        other => panic!("no answer to Hello: {other:?}"),
    };
    (ws, r)
}

/// [`join`], again while the answer is `retry_if` (the server handles a client's close a moment
/// after the client sent it: until then its session is live, or its connections count).
async fn join_retrying(srv: &Server, msg: &ClientMsg, retry_if: impl Fn(&proto::ErrorBody) -> bool) -> (Ws, Result<proto::Welcome, proto::ErrorBody>) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (ws, r) = join(srv, msg).await;
        match &r {
            Err(e) if retry_if(e) && tokio::time::Instant::now() < deadline => {
                ws.close().await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            _ => return (ws, r),
        }
    }
}

fn still_connected(e: &proto::ErrorBody) -> bool {
    e.message.contains("still connected")
}

/// A resume once the server has seen the drop.
async fn resume(srv: &Server, token: Option<&str>, resume: &str) -> (Ws, Result<proto::Welcome, proto::ErrorBody>) {
    join_retrying(srv, &hello_with(token, Some(resume)), still_connected).await
}

async fn sessions(srv: &Server) -> u64 {
    let h = srv.http().with_token("adm").get("/health").await.ok();
    h["sessions"].as_u64().unwrap_or_else(|| panic!("no session count in /health: {h}"))
}

async fn agent_ids(srv: &Server) -> Vec<u32> {
    let s = srv.http().with_token("adm").get("/worlds/demo/snapshot").await.ok();
    s["agents"].as_array().unwrap().iter().map(|a| a["id"].as_u64().unwrap() as u32).collect()
}

/// A resume token presented while its connection is open (with or without the owner's own
/// token) is refused; the owner keeps its socket, its agents and its command of them, and the
/// token resumes once the owner has dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_of_a_live_session_is_refused() {
    let srv = server("live-resume", true, "");
    let (mut owner, w) = join(&srv, &hello_with(Some(&token("alice")), None)).await;
    let w = w.expect("alice refused");
    let msg = spawn_msg(owner.rid(), "demo", 2, [10.0, 10.0, 20.0, 20.0], proto::Limits::default());
    let mine = spawned(owner.request(&msg).await);
    assert_eq!(mine.len(), 2);
    for tok in [None, Some(token("alice"))] {
        let (mut thief, r) = join(&srv, &hello_with(tok.as_deref(), Some(&w.resume_token))).await;
        let e = r.expect_err("a live session was resumed");
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::Unauthorized, Some("resume")), "{e:?}");
        assert!(still_connected(&e), "{}", e.message);
        assert_eq!(thief.expect_close(WAIT).await, Some(4001));
    }
    owner.ping().await;
    let ids = agent_ids(&srv).await;
    assert!(mine.iter().all(|m| ids.contains(m)), "alice's agents {mine:?} gone: {ids:?}");
    let rid = owner.rid();
    assert!(owner.request(&move_to_msg(rid, "demo", mine.clone(), 50.0, 50.0, 1.0)).await.is_ok());
    owner.close().await;
    let (_again, r) = resume(&srv, None, &w.resume_token).await;
    assert_eq!(r.expect("the owner's resume after its drop").player_id, "alice");
}

/// A session opened with a token that expires in 2 s, resumed again and again (each resume
/// with the resume token of the one before, each well within the grace period) until the
/// server refuses. The server compares its clock with the token's expiry plus the leeway; this
/// host's clock, read before and after each attempt, bounds when it did: every resume the server
/// checked within the leeway succeeds and every refusal comes after it, whatever the host's
/// speed. The resumes run every 250 ms, so they span the expiry and the leeway; the only wall
/// bound is against a server that never refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chained_resumes_end_at_the_token_expiry() {
    use steerd::auth::{LEEWAY_SECS, now_secs};
    let srv = server("chain", true, "");
    let exp = now_secs() + 2;
    let (ws, w) = join(&srv, &hello_with(Some(&token_exp("alice", exp)), None)).await;
    let mut resume_token = w.expect("alice refused").resume_token;
    ws.close().await;
    let (mut resumed, mut past_expiry) = (0u32, 0u32);
    let (mut ws, e) = loop {
        let start = now_secs();
        assert!(start <= exp + LEEWAY_SECS + 30, "still resumed 30 s past the token's expiry and leeway ({resumed} resumes)");
        let (ws, r) = resume(&srv, None, &resume_token).await;
        let end = now_secs();
        match r {
            Ok(w) => {
                assert!(start <= exp + LEEWAY_SECS, "resumed at {start}..{end} s, past the expiry {exp} s and {LEEWAY_SECS} s of leeway");
                assert_eq!(w.player_id, "alice");
                resumed += 1;
                past_expiry += u32::from(start > exp);
                resume_token = w.resume_token;
                ws.close().await;
            }
            Err(e) => {
                assert!(end > exp + LEEWAY_SECS, "refused at {start}..{end} s, within the expiry {exp} s and {LEEWAY_SECS} s of leeway: {e:?}");
                break (ws, e);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!("chained resumes: {resumed} before the refusal, {past_expiry} of them past the expiry (within the leeway)");
    assert!(resumed >= 1, "the first resume, at once, was refused: {e:?}");
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::Unauthorized, Some("resume")), "{e:?}");
    assert!(e.message.contains("expired"), "{}", e.message);
    assert_eq!(ws.expect_close(WAIT).await, Some(4001));
    // The session is gone, not merely refused.
    let (_ws, r) = resume(&srv, None, &resume_token).await;
    assert!(r.expect_err("resumed after all").message.contains("unknown or expired"));
}

/// Mallory presents alice's resume token with mallory's own token, then with a bad one: both
/// refused, and alice's session stays resumable; alice resumes after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resume_leaves_the_victims_session_valid() {
    let srv = server("victim", true, "");
    let (mut ws, w) = join(&srv, &hello_with(Some(&token("alice")), None)).await;
    let w = w.expect("alice refused");
    ws.subscribe("demo", whole_world()).await;
    ws.close().await;
    let (mut m, r) = resume(&srv, Some(&token("mallory")), &w.resume_token).await;
    let e = r.expect_err("mallory resumed alice's session");
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::Unauthorized, Some("resume")), "{e:?}");
    assert!(e.message.contains("another player"), "{}", e.message);
    assert_eq!(m.expect_close(WAIT).await, Some(4001));
    let (mut m, r) = join(&srv, &hello_with(Some("not.a.jwt"), Some(&w.resume_token))).await;
    let e = r.expect_err("a bad token resumed alice's session");
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::Unauthorized, Some("token")), "{e:?}");
    assert_eq!(m.expect_close(WAIT).await, Some(4001));
    let (mut a, r) = resume(&srv, None, &w.resume_token).await;
    assert_eq!(r.expect("alice's resume after the failed ones").player_id, "alice");
    assert!(a.read_until(WAIT, |w| w.keyframes > 0).await, "alice's subscription was not restored");
}

/// One player opening and closing 45 connections on a server that keeps 40 sessions leaves
/// room: its resumable sessions are evicted at `max_sessions_per_player` (default 8), and
/// another player joins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_cycling_connections_leaves_room_for_others() {
    let srv = server("cycle", true, "max_sessions = 40");
    let alice = hello_with(Some(&token("alice")), None);
    for i in 0..45 {
        let (ws, r) = join_retrying(&srv, &alice, |e| e.code == ErrorCode::QuotaExceeded).await;
        r.unwrap_or_else(|e| panic!("alice's connection {i} refused: {e:?}"));
        ws.close().await;
    }
    let n = sessions(&srv).await;
    assert!(n <= 8, "{n} sessions kept for one player");
    let (mut bob, r) = join(&srv, &hello_with(Some(&token("bob")), None)).await;
    assert_eq!(r.expect("bob refused").player_id, "bob");
    bob.ping().await;
}

/// Dev mode: anonymous connections from one address (every test client is 127.0.0.1), 3 times
/// `max_sessions_per_ip`, opened and closed: the server keeps at most that many sessions, and
/// a new anonymous client still joins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_connections_from_one_address_stay_under_its_cap() {
    const CAP: u64 = 5;
    let srv = server("anon-cycle", false, &format!("max_sessions_per_ip = {CAP}"));
    let anonymous = hello_with(None, None);
    let mut ids = std::collections::HashSet::new();
    for i in 0..3 * CAP {
        let (ws, r) = join_retrying(&srv, &anonymous, |e| e.code == ErrorCode::QuotaExceeded).await;
        let w = r.unwrap_or_else(|e| panic!("anonymous connection {i} refused: {e:?}"));
        assert!(ids.insert(w.player_id), "an anonymous id given twice");
        ws.close().await;
        let n = sessions(&srv).await;
        assert!(n <= CAP, "{n} sessions after {} anonymous connections from one address", i + 1);
    }
    let (mut ws, r) = join(&srv, &anonymous).await;
    assert!(r.expect("a new anonymous client refused").player_id.starts_with("anon-"));
    ws.ping().await;
    assert!(sessions(&srv).await <= CAP);
}
