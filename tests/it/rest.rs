//! Operational endpoints.

use steer_proto::ServerMsg;
use steerd_tests::*;

/// Issue 5 (8): `/health` is 200 `"status":"ok"`; `/metrics` exposes tick durations, frames sent
/// and commands once a client has subscribed and commanded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics() {
    let srv = Server::fresh("health", Opts::default());
    let http = srv.http();
    let h = http.get("/health").await;
    let body = h.expect(200).json();
    assert_eq!(body["status"], "ok", "{body}");
    assert_eq!(body["worlds"]["demo"]["alive"], true, "{body}");
    let mut ws = srv.ws().await;
    ws.subscribe("demo", whole_world()).await;
    assert!(ws.next_until(WAIT, |m| matches!(m, ServerMsg::Delta(_))).await.is_some());
    let rid = ws.rid();
    // A command that fails (no such agent) still counts.
    let _ = ws.request(&move_to_msg(rid, "demo", vec![999_999], 1.0, 1.0, 0.0)).await;
    let m = http.get("/metrics").await;
    let text = m.expect(200).text();
    for name in ["steerd_tick_duration_seconds", "steerd_frames_sent", "steerd_commands"] {
        assert!(text.contains(name), "/metrics lacks {name}:\n{text}");
    }
    assert!(metric(&text, "steerd_frames_sent_total") > 0.0, "frames were sent:\n{text}");
    assert!(metric(&text, "steerd_tick_duration_seconds_count") > 0.0, "ticks were timed");
    assert!(metric(&text, "steerd_commands_total") >= 1.0, "the command was counted:\n{text}");
}
