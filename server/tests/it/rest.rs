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

/// Issue 18: REST spawns take every spawn area a scenario group takes (protocol 6): `ring` places
/// the agents evenly on the circle facing its centre, `points` one agent at each point in
/// order; a `points` spawn whose `count` differs from the points is refused naming `count`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_areas_of_scenarios_spawn_over_rest() {
    let srv = Server::fresh("areas", Opts::default());
    let http = srv.http();
    http.post("/worlds", &serde_json::json!({"name": "areas", "paused": true})).await.expect(201);
    let ring = serde_json::json!({"group": "ring", "count": 4, "area": {"type": "ring", "x": 100, "y": 100, "radius": 20}});
    let ids = http.post("/worlds/areas/agents", &ring).await.expect(201).json();
    let ids: Vec<u64> = ids["agents"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    for id in &ids {
        let a = http.get(&format!("/worlds/areas/agents/{id}")).await.expect(200).json();
        let (x, y) = (a["position"][0].as_f64().unwrap(), a["position"][1].as_f64().unwrap());
        let d = ((x - 100.0).powi(2) + (y - 100.0).powi(2)).sqrt();
        assert!((d - 20.0).abs() < 1e-3, "agent {id} at ({x}, {y}) is {d} from the centre, not on the ring");
        // Facing the centre.
        let o = a["orientation"].as_f64().unwrap();
        let to_centre = (100.0 - y).atan2(100.0 - x);
        let diff = (o - to_centre + std::f64::consts::PI).rem_euclid(2.0 * std::f64::consts::PI) - std::f64::consts::PI;
        assert!(diff.abs() < 1e-3, "agent {id} faces {o}, the centre is at {to_centre}");
    }
    let points = serde_json::json!({"group": "saved", "count": 2, "area": {"type": "points", "points": [{"x": 12.5, "y": 30}, {"x": 40, "y": 7.25}]}});
    let got = http.post("/worlds/areas/agents", &points).await.expect(201).json();
    let got: Vec<u64> = got["agents"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    for (id, want) in got.iter().zip([[12.5, 30.0], [40.0, 7.25]]) {
        let a = http.get(&format!("/worlds/areas/agents/{id}")).await.expect(200).json();
        assert_eq!(a["position"], serde_json::json!(want), "agent {id}");
    }
    let wrong = serde_json::json!({"group": "saved", "count": 3, "area": {"type": "points", "points": [{"x": 1, "y": 1}]}});
    let body = http.post("/worlds/areas/agents", &wrong).await.expect(422).json();
    assert_eq!(body["error"], "invalid_field", "{body}");
    assert!(body["message"].as_str().unwrap().contains("count"), "{body}");
}
