//! The scenario forms of behaviours before protocol 5 and of spawn areas before protocol 6,
//! rewritten into today's form.
//!
//! Until protocol 5 scenarios wrote behaviours in a form of their own: untagged targets
//! (`{"x": 1, "y": 2}`, `{"agent": 3}`), `target` for pursue/evade/velocity_match's agent, an
//! align target as a bare number, align tuning flattened into align/face/look; until protocol 6
//! spawn areas were externally tagged with nested points (`{"rect": {"min": {..}, "max": {..}}}`, `disc`, `ring`,
//! `points: [..]`). Scenario files in that form are refused with the rewritten part in the error
//! (so the author sees how to write it now); recordings, which embed the scenario they started
//! from and must replay as they were made, are rewritten on open. This works on JSON values:
//! there is no second set of behaviour or area types.

use serde_json::{Map, Value, json};

/// Rewrites every old-form behaviour of a scenario (`groups[*].behaviors[*].behavior`) in
/// place; returns the path of the first one rewritten, if any.
pub fn migrate(scenario: &mut Value) -> Option<String> {
    let mut first = None;
    let groups = scenario.get_mut("groups").and_then(Value::as_array_mut)?;
    for (gi, g) in groups.iter_mut().enumerate() {
        if let Some(a) = g.get_mut("area") {
            if migrate_area(a) && first.is_none() {
                first = Some(format!("groups[{gi}].area"));
            }
        }
        let Some(entries) = g.get_mut("behaviors").and_then(Value::as_array_mut) else { continue };
        for (bi, e) in entries.iter_mut().enumerate() {
            if let Some(b) = e.get_mut("behavior").and_then(Value::as_object_mut) {
                if migrate_behavior(b) && first.is_none() {
                    first = Some(format!("groups[{gi}].behaviors[{bi}].behavior"));
                }
            }
        }
    }
    first
}

/// Rewrites an old-form spawn area (`{"rect": {"min": p, "max": q}}`, `{"disc": {"center": c,
/// "radius": r}}`, `{"ring": ..}`, `{"points": [..]}`) as the wire's `SpawnArea`; true if it
/// was one.
fn migrate_area(a: &mut Value) -> bool {
    let Value::Object(o) = a else { return false };
    if o.contains_key("type") || o.len() != 1 {
        return false;
    }
    let Some((kind, inner)) = o.iter().next().map(|(k, v)| (k.clone(), v.clone())) else { return false };
    let num = |v: &Value, k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let new = match kind.as_str() {
        "rect" => {
            let (min, max) = (num(&inner, "min"), num(&inner, "max"));
            json!({"type": "rect", "min_x": num(&min, "x"), "min_y": num(&min, "y"), "max_x": num(&max, "x"), "max_y": num(&max, "y")})
        }
        "disc" | "ring" => {
            let c = num(&inner, "center");
            let tag = if kind == "disc" { "circle" } else { "ring" };
            json!({"type": tag, "x": num(&c, "x"), "y": num(&c, "y"), "radius": num(&inner, "radius")})
        }
        "points" if inner.is_array() => json!({"type": "points", "points": inner}),
        _ => return false,
    };
    *a = new;
    true
}

/// Rewrites one behaviour object; true if anything changed.
fn migrate_behavior(b: &mut Map<String, Value>) -> bool {
    let kind = b.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut changed = false;
    match kind.as_str() {
        "seek" | "flee" | "arrive" | "face" => changed |= tag_target(b.get_mut("target")),
        "pursue" | "evade" | "velocity_match" => changed |= rename(b, "target", "target_agent"),
        "align" => {
            if let Some(t) = b.get_mut("target") {
                if let Some(radians) = t.as_f64() {
                    *t = serde_json::json!({"type": "orientation", "radians": radians});
                    changed = true;
                } else {
                    changed |= tag_target(Some(t));
                }
            }
        }
        _ => {}
    }
    if matches!(kind.as_str(), "align" | "face" | "look_where_you_are_going") {
        let mut tuning = Map::new();
        for k in ["target_radius", "slow_radius", "time_to_target"] {
            if let Some(v) = b.remove(k) {
                tuning.insert(k.to_string(), v);
            }
        }
        if !tuning.is_empty() {
            b.insert("align".to_string(), Value::Object(tuning));
            changed = true;
        }
    }
    // Optional parameters could be written `null` in the old form; today absent means default.
    let nulls: Vec<String> = b.iter().filter(|(k, v)| v.is_null() && k.as_str() != "center" && k.as_str() != "min_box_length").map(|(k, _)| k.clone()).collect();
    for k in nulls {
        b.remove(&k);
        changed = true;
    }
    changed
}

/// `{"x":..,"y":..}` → `{"type":"point",…}`, `{"agent": id}` → `{"type":"agent",…}`.
fn tag_target(t: Option<&mut Value>) -> bool {
    let Some(Value::Object(o)) = t else { return false };
    if o.contains_key("type") {
        return false;
    }
    let tag = if o.contains_key("agent") { "agent" } else { "point" };
    o.insert("type".to_string(), Value::String(tag.to_string()));
    true
}

fn rename(b: &mut Map<String, Value>, from: &str, to: &str) -> bool {
    match b.remove(from) {
        Some(v) if !b.contains_key(to) => {
            b.insert(to.to_string(), v);
            true
        }
        Some(v) => {
            b.insert(from.to_string(), v);
            false
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use steer_proto::BehaviorEntry;

    fn migrated(old: Value) -> BehaviorEntry {
        let mut s = json!({"groups": [{"behaviors": [{"behavior": old}]}]});
        assert_eq!(migrate(&mut s).as_deref(), Some("groups[0].behaviors[0].behavior"));
        match serde_json::from_value(s["groups"][0]["behaviors"][0].clone()) {
            Ok(e) => e,
            Err(e) => panic!("{e}: {s}"),
        }
    }

    #[test]
    fn every_old_form_becomes_the_wire_form() {
        use steer_proto::{AgentRef, AlignTarget, Behavior as B, Orientation, Point, Target};
        let b = |v: Value| migrated(v).behavior;
        let B::Seek(s) = b(json!({"type": "seek", "target": {"x": 1, "y": 2}})) else { panic!() };
        assert_eq!(s.target, Target::Point(Point { x: 1.0, y: 2.0 }));
        let B::Flee(f) = b(json!({"type": "flee", "target": {"agent": 4}, "panic_distance": 7})) else { panic!() };
        assert_eq!((f.target, f.panic_distance), (Target::Agent(AgentRef { agent: 4 }), 7.0));
        let B::Pursue(p) = b(json!({"type": "pursue", "target": 2})) else { panic!() };
        assert_eq!((p.target_agent, p.max_prediction), (2, 5.0));
        let B::VelocityMatch(v) = b(json!({"type": "velocity_match", "target": 9})) else { panic!() };
        assert_eq!(v.target_agent, 9);
        let B::Align(a) = b(json!({"type": "align", "target": 0.5, "slow_radius": 0.7})) else { panic!() };
        assert_eq!(a.target, AlignTarget::Orientation(Orientation { radians: 0.5 }));
        assert_eq!((a.align.slow_radius, a.align.target_radius), (0.7, 0.1));
        let B::Align(a) = b(json!({"type": "align", "target": {"agent": 3}})) else { panic!() };
        assert_eq!(a.target, AlignTarget::Agent(AgentRef { agent: 3 }));
        let B::LookWhereYouAreGoing(l) = b(json!({"type": "look_where_you_are_going", "time_to_target": 0.3})) else { panic!() };
        assert_eq!(l.align.time_to_target, 0.3);
        let B::ReciprocalAvoidance(r) = b(json!({"type": "reciprocal_avoidance", "time_horizon": null, "max_neighbors": 4})) else { panic!() };
        assert_eq!((r.time_horizon, r.max_neighbors), (1.0, 4));
    }

    #[test]
    fn the_wire_form_is_left_alone() {
        let mut s = json!({"groups": [{"behaviors": [
            {"behavior": {"type": "seek", "target": {"type": "point", "x": 1, "y": 2}}},
            {"behavior": {"type": "pursue", "target_agent": 2}},
            {"behavior": {"type": "obstacle_avoidance", "min_box_length": null}},
        ]}]});
        let before = s.clone();
        assert_eq!(migrate(&mut s), None);
        assert_eq!(s, before);
    }

    #[test]
    fn every_old_area_becomes_the_wire_form() {
        use steer_proto::{Circle, Point, Points, Rect, SpawnArea};
        let area = |old: Value| {
            let mut s = json!({"groups": [{"area": old}]});
            assert_eq!(migrate(&mut s).as_deref(), Some("groups[0].area"));
            match serde_json::from_value::<SpawnArea>(s["groups"][0]["area"].clone()) {
                Ok(a) => a,
                Err(e) => panic!("{e}: {s}"),
            }
        };
        assert_eq!(
            area(json!({"rect": {"min": {"x": 1, "y": 2}, "max": {"x": 30, "y": 40.5}}})),
            SpawnArea::Rect(Rect { min_x: 1.0, min_y: 2.0, max_x: 30.0, max_y: 40.5 })
        );
        assert_eq!(area(json!({"disc": {"center": {"x": 5, "y": 6}, "radius": 7}})), SpawnArea::Circle(Circle { x: 5.0, y: 6.0, radius: 7.0 }));
        assert_eq!(area(json!({"ring": {"center": {"x": 5, "y": 6}, "radius": 7}})), SpawnArea::Ring(Circle { x: 5.0, y: 6.0, radius: 7.0 }));
        assert_eq!(
            area(json!({"points": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]})),
            SpawnArea::Points(Points { points: vec![Point { x: 1.0, y: 2.0 }, Point { x: 3.0, y: 4.0 }] })
        );
        // Today's form, and what is neither, are left alone.
        for keep in [json!({"type": "ring", "x": 1, "y": 2, "radius": 3}), json!({"square": {"side": 2}}), json!({"rect": {}, "disc": {}})] {
            let mut s = json!({"groups": [{"area": keep.clone()}]});
            assert_eq!(migrate(&mut s), None, "{keep}");
            assert_eq!(s["groups"][0]["area"], keep);
        }
    }
}
