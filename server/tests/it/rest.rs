//! Operational endpoints.

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
    assert!(ws.next_until(WAIT, is_delta).await.is_some());
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

/// `GET /openapi.json`: the generated OpenAPI document, served without the admin token even when
/// the server has one; `POST /worlds/{world}/move-to` takes a body whose schema has `target`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_is_served() {
    let srv = Server::fresh("openapi", Opts::default().arg("--admin-token", "openapi-secret"));
    let r = srv.http().get("/openapi.json").await;
    r.expect(200);
    let ctype = r.headers.iter().find(|(k, _)| k == "content-type").map(|(_, v)| v.as_str()).unwrap_or("");
    assert!(ctype.starts_with("application/json"), "content-type {ctype}");
    let doc = r.json();
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "openapi: {}", doc["openapi"]);
    assert_eq!(doc["info"]["title"], "steerd");
    let op = &doc["paths"]["/worlds/{world}/move-to"]["post"];
    assert!(op.is_object(), "no POST /worlds/{{world}}/move-to in {}", doc["paths"]);
    assert!(op["security"].as_array().is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some())), "{op}");
    let schema = &op["requestBody"]["content"]["application/json"]["schema"];
    let name = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")).unwrap_or_else(|| panic!("requestBody schema is not a reference: {schema}"));
    let body = &doc["components"]["schemas"][name];
    assert!(body["properties"]["target"].is_object(), "{name} has no `target`: {body}");
    assert!(body["required"].as_array().is_some_and(|r| r.iter().any(|f| f == "target")), "{body}");
    // Every error answers `{"error", "message"}`.
    let err = &doc["paths"]["/worlds/{world}"]["get"]["responses"]["404"]["content"]["application/json"]["schema"]["$ref"];
    assert_eq!(err, "#/components/schemas/ErrorBody");
}
