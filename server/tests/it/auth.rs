//! Admin token, agent ownership and the Origin check.

use steer_proto::{self as proto, ClientMsg, Encoding, ErrorCode, Outcome, ServerMsg};
use steerd_tests::*;
use tokio_tungstenite::tungstenite::Error as WsError;

const TOKEN: &str = "s3cret-token";

/// With `--admin-token` (secured mode), REST mutations answer 401 without a token and with a
/// token the server does not know, and 2xx with the right one (the refused ones change
/// nothing); reads need a token too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_guards_rest_mutations() {
    let srv = Server::fresh("token-rest", Opts::default().arg("--admin-token", TOKEN));
    let anon = srv.http();
    let wrong = anon.with_token("not-the-token");
    let right = anon.with_token(TOKEN);
    let mut before = shape(&right, "demo").await;
    let spawn = json!({"group": "t", "count": 3, "area": {"type": "rect", "min_x": 1, "min_y": 1, "max_x": 9, "max_y": 9}});
    let calls: Vec<(&str, String, Option<serde_json::Value>)> = vec![
        ("PATCH", "/worlds/demo".into(), Some(json!({"tick_rate": 20}))),
        ("POST", "/worlds/demo/obstacles".into(), Some(json!({"center": {"x": 5, "y": 5}, "radius": 1}))),
        ("POST", "/worlds/demo/agents".into(), Some(spawn)),
        ("PUT", "/scenarios/tok".into(), Some(small_scenario(50.0, &[]))),
        ("POST", "/worlds".into(), Some(json!({"name": "tokw", "scenario": "tok"}))),
        ("POST", "/worlds/demo/save".into(), Some(json!({"scenario": "tok2"}))),
        ("POST", "/worlds/tokw/step".into(), Some(json!({"ticks": 2}))),
        ("DELETE", "/worlds/tokw".into(), None),
        ("DELETE", "/scenarios/tok".into(), None),
    ];
    for (method, path, body) in &calls {
        let bytes = body.as_ref().map(|b| b.to_string().into_bytes());
        let send = |h: &Http| {
            let h = h.clone();
            let bytes = bytes.clone();
            async move { h.raw(method, path, bytes.as_deref(), &[]).await }
        };
        let r = send(&anon).await;
        assert_eq!(r.status, 401, "{method} {path} without token: {}", r.text());
        assert_eq!(r.json()["error"], "unauthorized");
        let r = send(&wrong).await;
        assert_eq!(r.status, 401, "{method} {path} with a wrong token: {}", r.text());
        assert_eq!(r.json()["error"], "unauthorized");
        assert_eq!(shape(&right, "demo").await, before, "a refused {method} {path} changed the world");
        let r = send(&right).await;
        assert!((200..300).contains(&r.status), "{method} {path} with the token: {} {}", r.status, r.text());
        before = shape(&right, "demo").await;
    }
    // Reads need a token too; the public routes do not.
    assert_eq!(anon.get("/worlds/demo").await.status, 401);
    assert_eq!(anon.get("/scenarios").await.status, 401);
    right.get("/worlds/demo").await.expect(200);
    right.get("/scenarios").await.expect(200);
    anon.get("/health").await.expect(200);
    // A Bearer prefix is required.
    let r = anon.raw("PATCH", "/worlds/demo", Some(b"{}"), &[("Authorization", TOKEN)]).await;
    assert_eq!(r.status, 401, "a token without `Bearer ` is no token");
}

/// Issue 5 (5), as issue 14 changed it: with the admin token set and no player key (dev mode),
/// a WS client without a token is an anonymous player (it spawns its own agents, within the
/// quotas), an unknown token is refused (`unauthorized`) and closed (4001), the admin token may
/// Spawn and command any agent, and an anonymous player may not command the admin's agents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_guards_ws_spawn() {
    let srv = Server::fresh("token-ws", Opts::default().arg("--admin-token", TOKEN));
    let mut anon = srv.ws().await;
    anon.subscribe("demo", whole_world()).await;
    let w = anon.welcome.clone().unwrap();
    assert!(w.player_id.starts_with("anon-") && w.role == proto::Role::Player, "{w:?}");
    let rid = anon.rid();
    let own = spawned(anon.request(&spawn_msg(rid, "demo", 2, [1.0, 1.0, 5.0, 5.0], proto::Limits::default())).await);
    assert_eq!(own.len(), 2, "an anonymous player spawns its own agents");

    let mut bad = Ws::connect(srv.addr).await;
    bad.send(&hello(Some("wrong"), Encoding::Binary)).await;
    let m = bad.next_until(WAIT, |m| matches!(m, ServerMsg::Error(_) | ServerMsg::Welcome(_))).await;
    assert!(matches!(&m, Some(ServerMsg::Error(e)) if e.code == ErrorCode::Unauthorized && e.field.as_deref() == Some("token")), "{m:?}");
    assert_eq!(bad.expect_close(WAIT).await, Some(4001));

    let mut admin = Ws::connect(srv.addr).await;
    assert_eq!(admin.hello(Some(TOKEN)).await.role, proto::Role::Admin);
    let rid = admin.rid();
    let ids = spawned(admin.request(&spawn_msg(rid, "demo", 2, [1.0, 1.0, 5.0, 5.0], proto::Limits::default())).await);
    assert_eq!(ids.len(), 2);
    // The admin commands anyone's agents, e.g. one of the scenario's.
    let scenario_agent = first_agent(&srv.http().with_token(TOKEN), "demo").await;
    let rid = admin.rid();
    let r = admin.request(&move_to_msg(rid, "demo", vec![scenario_agent], 100.0, 100.0, 1.0)).await;
    assert!(r.is_ok(), "{r:?}");
    // The admin commands the anonymous player's agents too.
    let rid = admin.rid();
    assert!(admin.request(&move_to_msg(rid, "demo", own.clone(), 50.0, 50.0, 1.0)).await.is_ok());
    // The anonymous client may command none of the others.
    for agents in [ids.clone(), vec![scenario_agent]] {
        let rid = anon.rid();
        let e = error_of(anon.request(&move_to_msg(rid, "demo", agents.clone(), 10.0, 10.0, 0.0)).await);
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::Forbidden, Some("agents")), "{agents:?}: {e:?}");
    }
    anon.ping().await;
}

/// Issue 5 (5): without a token (dev mode), each client is an anonymous player of its own and
/// commands only the agents it spawned: another client's MoveTo / Despawn / SetBehaviors on
/// them answer `forbidden` and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_command_only_their_own_agents() {
    let srv = Server::fresh("owner", Opts::default());
    let http = srv.http();
    let mut a = srv.ws().await;
    let mut b = srv.ws().await;
    let rid = a.rid();
    let ids = spawned(a.request(&spawn_msg(rid, "demo", 3, [10.0, 10.0, 20.0, 20.0], proto::Limits::default())).await);
    let rid = b.rid();
    let theirs = spawned(b.request(&spawn_msg(rid, "demo", 1, [30.0, 30.0, 40.0, 40.0], proto::Limits::default())).await);
    let count = shape(&http, "demo").await.0;
    let scenario_agent = first_agent(&http, "demo").await;
    let foreign: Vec<ClientMsg> = vec![
        move_to_msg(b.rid(), "demo", ids.clone(), 50.0, 50.0, 0.0),
        // Mixed: one own, one foreign: refused as a whole.
        move_to_msg(b.rid(), "demo", vec![theirs[0], ids[0]], 50.0, 50.0, 0.0),
        ClientMsg::Despawn(proto::Despawn { request_id: b.rid(), world: "demo".into(), agents: vec![ids[1]] }),
        ClientMsg::ResetBehaviors(proto::ResetBehaviors { request_id: b.rid(), world: "demo".into(), agents: vec![ids[2]] }),
        // Agents of the scenario belong to nobody.
        move_to_msg(b.rid(), "demo", vec![scenario_agent], 50.0, 50.0, 0.0),
    ];
    for m in &foreign {
        let e = error_of(b.request(m).await);
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::Forbidden, Some("agents")), "{m:?}: {e:?}");
    }
    assert_eq!(shape(&http, "demo").await.0, count, "a refused despawn removed an agent");
    // The owners may.
    let rid = b.rid();
    assert!(b.request(&move_to_msg(rid, "demo", theirs.clone(), 50.0, 50.0, 0.0)).await.is_ok());
    let rid = a.rid();
    assert!(a.request(&move_to_msg(rid, "demo", ids.clone(), 50.0, 50.0, 0.0)).await.is_ok());
    let rid = a.rid();
    let r = a.request(&ClientMsg::Despawn(proto::Despawn { request_id: rid, world: "demo".into(), agents: ids.clone() })).await;
    assert!(matches!(r, Outcome::Ok(_)), "{r:?}");
    assert_eq!(shape(&http, "demo").await.0, count - ids.len());
}

/// Issue 5 (5): a foreign `Origin` at the upgrade is refused with 403; no Origin, the server's
/// own origin and a configured one are allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origin_is_refused() {
    let srv = Server::fresh("origin", Opts::default().arg("--allowed-origins", "https://game.example"));
    for origin in ["https://evil.example", "null", "http://127.0.0.1:1"] {
        match Ws::connect_with(srv.addr, Some(origin), Encoding::Binary).await {
            Err(WsError::Http(r)) => assert_eq!(r.status().as_u16(), 403, "Origin {origin}"),
            Err(e) => panic!("Origin {origin}: expected HTTP 403, got {e}"),
            Ok(_) => panic!("Origin {origin} was allowed"),
        }
    }
    let own = format!("http://{}", srv.addr);
    for origin in [None, Some(own.as_str()), Some("https://game.example")] {
        let mut ws = Ws::connect_with(srv.addr, origin, Encoding::Binary).await.unwrap_or_else(|e| panic!("Origin {origin:?}: {e}"));
        ws.hello(None).await;
        ws.ping().await;
    }
}

/// The status of a WebSocket upgrade sent with these `Host` and `Origin` headers (raw, so the
/// Host can be any name, as after DNS rebinding).
async fn upgrade_status(srv: &Server, host: &str, origin: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let req = format!(
        "GET /ws HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(WAIT, s.read(&mut buf)).await.expect("no answer to the upgrade").unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no status in {head:?}"))
}

/// Issue 15 (5): DNS rebinding. An Origin equal to the request's own Host is the server's own
/// page only under a loopback name or a configured `same_origin_hosts` name; `Host:
/// evil.example` with `Origin: http://evil.example` is refused with 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_rebinding_origin_is_refused() {
    let srv = Server::fresh("rebind", Opts::default().arg("--same-origin-hosts", "play.example"));
    let port = srv.addr.port();
    for (host, origin) in [
        ("evil.example".to_string(), "http://evil.example".to_string()),
        (format!("evil.example:{port}"), format!("http://evil.example:{port}")),
        ("10.1.2.3".to_string(), "https://10.1.2.3".to_string()),
        // Loopback Host, foreign origin.
        (format!("127.0.0.1:{port}"), "http://evil.example".to_string()),
    ] {
        assert_eq!(upgrade_status(&srv, &host, &origin).await, 403, "Host {host}, Origin {origin}");
    }
    for (host, origin) in [
        (format!("127.0.0.1:{port}"), format!("http://127.0.0.1:{port}")),
        (format!("localhost:{port}"), format!("http://localhost:{port}")),
        (format!("play.example:{port}"), format!("https://play.example:{port}")),
    ] {
        assert_eq!(upgrade_status(&srv, &host, &origin).await, 101, "Host {host}, Origin {origin}");
    }
}
