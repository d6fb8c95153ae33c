//! Reciprocal avoidance (ORCA) end to end: the `reciprocal_avoidance` behaviour set over REST
//! and over WebSocket (`SetBehaviors`, `AddBehavior`), its out-of-range values refused naming
//! the field, and `GET /worlds/{w}/agents/{id}/avoidance`.

use serde_json::{Value, json};
use steer_proto::{self as proto, ClientMsg, ErrorCode, Outcome};
use steerd_tests::*;

/// Two agents 4 units apart heading for each other at speed 2 (each seeks the other's side),
/// and a third far away.
fn head_on_scenario() -> Value {
    let group = |name: &str, x: f32, orientation: f32, goal_x: f32| {
        json!({
            "name": name,
            "count": 1,
            "area": {"type": "points", "points": [{"x": x, "y": 50}]},
            "limits": {"max_speed": 2, "max_accel": 4, "radius": 0.5},
            "initial_speed": 2,
            "orientation": orientation,
            // Scenario files write a point target as `{x, y}` (the wire as `{type: point, …}`).
            "behaviors": [{"behavior": {"type": "seek", "target": {"type": "point", "x": goal_x, "y": 50}}}],
        })
    };
    json!({
        "name": "head-on",
        "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 100, "y": 100}},
        "edge": "clamp",
        "tick_rate": 20,
        "seed": 5,
        "groups": [group("east", 48.0, 0.0, 90.0), group("west", 52.0, std::f32::consts::PI, 10.0), group("far", 5.0, 0.0, 6.0)],
    })
}

const TOKEN: &str = "orca-token";

fn xy(v: &Value) -> (f64, f64) {
    (v["x"].as_f64().expect("x"), v["y"].as_f64().expect("y"))
}

/// Agent ids by group name.
async fn ids(http: &Http, world: &str) -> Vec<(String, u32)> {
    let s = http.get(&format!("/worlds/{world}/snapshot")).await.ok();
    s["agents"].as_array().expect("agents").iter().map(|a| (a["group"].as_str().expect("group").to_string(), a["id"].as_u64().expect("id") as u32)).collect()
}

fn id_of(ids: &[(String, u32)], group: &str) -> u32 {
    ids.iter().find(|(g, _)| g == group).map(|(_, id)| *id).unwrap_or_else(|| panic!("no agent in {group}: {ids:?}"))
}

async fn behaviors_of(http: &Http, world: &str, id: u32) -> Vec<String> {
    let a = http.get(&format!("/worlds/{world}/agents/{id}")).await.ok();
    a["behaviors"].as_array().expect("behaviors").iter().map(|b| b.as_str().expect("name").to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reciprocal_avoidance_over_rest_and_websocket() {
    // With an admin token, so that the WebSocket clients may command the scenario's agents.
    let srv = Server::fresh("orca", Opts::default().arg("--admin-token", TOKEN));
    let http = srv.http().with_token(TOKEN);
    // Created paused: the state changes only by the steps this test asks for.
    http.put("/scenarios/head-on", &head_on_scenario()).await.ok();
    http.post("/worlds", &json!({"name": "duel", "scenario": "head-on", "paused": true})).await.expect(201);
    let ids = ids(&http, "duel").await;
    let (east, west, far) = (id_of(&ids, "east"), id_of(&ids, "west"), id_of(&ids, "far"));

    // REST: defaults fill in the omitted parameters; explicit ones are kept.
    let seek = json!({"behavior": {"type": "seek", "target": {"type": "point", "x": 90, "y": 50}}});
    let body = json!({"behaviors": [seek, {"behavior": {"type": "reciprocal_avoidance", "time_horizon": 3}}]});
    http.put(&format!("/worlds/duel/agents/{east}/behaviors"), &body).await.ok();
    assert_eq!(behaviors_of(&http, "duel", east).await, ["seek", "reciprocal_avoidance"]);

    // REST: out of range, the error names the field.
    for (bad, field) in [
        (json!({"type": "reciprocal_avoidance", "max_neighbors": 0}), "behaviors[0].behavior.max_neighbors"),
        (json!({"type": "reciprocal_avoidance", "max_neighbors": 33}), "behaviors[0].behavior.max_neighbors"),
        (json!({"type": "reciprocal_avoidance", "time_horizon": -1}), "behaviors[0].behavior.time_horizon"),
        (json!({"type": "reciprocal_avoidance", "obstacle_time_horizon": 61}), "behaviors[0].behavior.obstacle_time_horizon"),
        (json!({"type": "reciprocal_avoidance", "neighbor_dist": 5000}), "behaviors[0].behavior.neighbor_dist"),
    ] {
        let r = http.put(&format!("/worlds/duel/agents/{far}/behaviors"), &json!({"behaviors": [{"behavior": bad}]})).await;
        let e = r.expect(422).json();
        assert_eq!(e["error"], "invalid_field", "{e}");
        assert!(e["message"].as_str().expect("message").contains(field), "{field} not named in {e}");
    }
    assert_eq!(behaviors_of(&http, "duel", far).await, ["seek"], "a refused set changes nothing");

    // WebSocket: SetBehaviors and AddBehavior, binary encoding (variant 20 on the wire).
    let mut ws = Ws::connect(srv.addr).await;
    ws.hello(Some(TOKEN)).await;
    let ra = |max_neighbors| proto::Behavior::ReciprocalAvoidance(proto::ReciprocalAvoidance { max_neighbors, ..Default::default() });
    let seek_west = proto::Behavior::Seek(proto::Seek { target: proto::Target::Point(proto::Point { x: 10.0, y: 50.0 }) });
    let rid = ws.rid();
    let set = ClientMsg::SetBehaviors(proto::SetBehaviors { request_id: rid, world: "duel".into(), agents: vec![west], behaviors: vec![seek_west.clone().into()] });
    assert_eq!(ws.request(&set).await, Outcome::Ok(proto::Done {}));
    let rid = ws.rid();
    let add = ClientMsg::AddBehavior(proto::AddBehavior { request_id: rid, world: "duel".into(), agents: vec![west], entry: ra(4).into() });
    assert_eq!(ws.request(&add).await, Outcome::Ok(proto::Done {}));
    assert_eq!(behaviors_of(&http, "duel", west).await, ["seek", "reciprocal_avoidance"]);
    let rid = ws.rid();
    let set = ClientMsg::SetBehaviors(proto::SetBehaviors { request_id: rid, world: "duel".into(), agents: vec![far], behaviors: vec![ra(10).into()] });
    assert_eq!(ws.request(&set).await, Outcome::Ok(proto::Done {}));
    assert_eq!(behaviors_of(&http, "duel", far).await, ["reciprocal_avoidance"]);
    // Out of range over the wire: invalid_field naming the field; nothing changes.
    let rid = ws.rid();
    let bad = ClientMsg::AddBehavior(proto::AddBehavior { request_id: rid, world: "duel".into(), agents: vec![west], entry: ra(0).into() });
    let e = error_of(ws.request(&bad).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidField, Some("entry.behavior.max_neighbors")), "{e:?}");
    let rid = ws.rid();
    let mut behaviors: Vec<proto::BehaviorEntry> = vec![seek_west.clone().into(), ra(10).into()];
    behaviors[1].behavior = proto::Behavior::ReciprocalAvoidance(proto::ReciprocalAvoidance { time_horizon: f32::NAN, ..Default::default() });
    let bad = ClientMsg::SetBehaviors(proto::SetBehaviors { request_id: rid, world: "duel".into(), agents: vec![west], behaviors });
    let e = error_of(ws.request(&bad).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidField, Some("behaviors[1].behavior.time_horizon")), "{e:?}");
    assert_eq!(behaviors_of(&http, "duel", west).await, ["seek", "reciprocal_avoidance"]);
    // JSON text frames take the defaults of omitted fields too.
    let mut js = Ws::connect_with(srv.addr, None, proto::Encoding::Json).await.expect("connect");
    js.hello(Some(TOKEN)).await;
    let rid = js.rid();
    let text = format!(r#"{{"type":"add_behavior","request_id":{rid},"world":"duel","agents":[{far}],"entry":{{"behavior":{{"type":"reciprocal_avoidance","neighbor_dist":20}}}}}}"#);
    js.send_raw(tokio_tungstenite::tungstenite::protocol::Message::Text(text.into())).await;
    assert_eq!(js.result(rid).await, Outcome::Ok(proto::Done {}));

    assert_eq!(tick(&http, "duel").await, 0, "paused since creation");

    // The debug endpoint: east avoids west (one neighbour half-plane, no statics), with the
    // parameters it was given, and the chosen velocity is permitted by every half-plane and
    // within max speed, while the preferred one (straight at west) is not.
    let v = http.get(&format!("/worlds/duel/agents/{east}/avoidance")).await.ok();
    assert_eq!(v["agent"], east);
    assert_eq!(v["active"], true, "{v}");
    assert_eq!(v["preferred_source"], "behaviors");
    assert_eq!(v["time_horizon"].as_f64(), Some(3.0));
    assert_eq!(v["max_neighbors"], 10);
    let planes = v["half_planes"].as_array().expect("half_planes");
    assert_eq!(planes.len(), 1, "west is the only agent within neighbor_dist: {v}");
    assert_eq!(planes[0]["static"], false);
    let (cx, cy) = xy(&v["chosen"]);
    let (px, py) = xy(&v["preferred"]);
    let violation = |p: &Value, (vx, vy): (f64, f64)| {
        let (ox, oy) = xy(&p["point"]);
        let (dx, dy) = xy(&p["direction"]);
        dx * (oy - vy) - dy * (ox - vx)
    };
    assert!(violation(&planes[0], (cx, cy)) <= 1e-3, "chosen outside its half-plane: {v}");
    assert!(violation(&planes[0], (px, py)) > 1e-3, "heading straight at west is not permitted: {v}");
    assert!((cx * cx + cy * cy).sqrt() <= v["max_speed"].as_f64().expect("max_speed") + 1e-3, "{v}");
    assert!(px > 1.0, "preferred heads east (at west): {v}");

    // The endpoint reads; it does not step: the tick is unchanged.
    let t0 = tick(&http, "duel").await;
    let again = http.get(&format!("/worlds/duel/agents/{east}/avoidance")).await.ok();
    assert_eq!(again, v, "same state, same answer");
    assert_eq!(tick(&http, "duel").await, t0);

    // An agent without reciprocal avoidance: the default parameters, `active: false`.
    http.put(&format!("/worlds/duel/agents/{far}/behaviors"), &json!({"behaviors": [seek]})).await.ok();
    let v = http.get(&format!("/worlds/duel/agents/{far}/avoidance")).await.ok();
    assert_eq!(v["active"], false, "{v}");
    assert_eq!((v["time_horizon"].as_f64(), v["neighbor_dist"].as_f64(), v["max_neighbors"].as_u64()), (Some(1.0), Some(10.0), Some(10)));
    assert_eq!(v["half_planes"].as_array().map(Vec::len), Some(0), "nobody within 10 units: {v}");

    // Unknown agent and unknown world: 404.
    http.get("/worlds/duel/agents/999999/avoidance").await.expect(404);
    http.get(&format!("/worlds/nowhere/agents/{east}/avoidance")).await.expect(404);

    // Stepped, the two pass each other instead of colliding (the sim does the work; this
    // checks the wire set it up): after 4 s they are apart by more than their radii sum.
    http.post("/worlds/duel/step", &json!({"ticks": 80})).await.ok();
    let s = http.get("/worlds/duel/snapshot").await.ok();
    let pos = |id: u32| {
        let a = s["agents"].as_array().expect("agents").iter().find(|a| a["id"] == id).expect("agent").clone();
        (a["position"][0].as_f64().expect("x"), a["position"][1].as_f64().expect("y"))
    };
    let ((ex, ey), (wx, wy)) = (pos(east), pos(west));
    assert!(ex > wx, "east passed west: east at {ex}, west at {wx}");
    assert!(((ex - wx).powi(2) + (ey - wy).powi(2)).sqrt() > 1.0, "no overlap after passing");

    // A MoveTo order avoids with the world's MoveTo parameters (reciprocal by default), and the
    // preferred velocity is MoveTo's own: `far`, heading east, ordered north (and not stepped
    // since), prefers north (MoveTo's direction at arrive speed), which its velocity is not.
    let (fx, fy) = pos(far);
    http.post("/worlds/duel/move-to", &json!({"agents": [far], "target": {"x": fx, "y": fy + 40.0}})).await.ok();
    let v = http.get(&format!("/worlds/duel/agents/{far}/avoidance")).await.ok();
    assert_eq!((v["active"].as_bool(), v["preferred_source"].as_str()), (Some(true), Some("move_to")), "{v}");
    let ((_, vy), (px, py)) = (xy(&v["velocity"]), xy(&v["preferred"]));
    assert!(py > vy + 1e-3, "MoveTo steers north: velocity y {vy}, preferred y {py}: {v}");
    assert!((px * px + py * py).sqrt() <= v["max_speed"].as_f64().expect("max_speed") + 1e-3, "{v}");
    ws.close().await;
}
