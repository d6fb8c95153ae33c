//! The command-apply path: bytes decoded as a binary `ClientMsg` (as the WebSocket session
//! decodes them), validated, converted to sim commands by `steerd::convert::world_commands` (the
//! conversion the session uses) and applied to a small world with obstacles, a wall and 20
//! agents (ids 1..=20, so most ids hit), then three ticks. Errors are answers; a panic, a
//! non-finite number or an agent out of bounds after a tick is a failure (docs/reliability.md, tests 1–2).
#![no_main]

use libfuzzer_sys::fuzz_target;
use steer_proto::{ClientMsg, DEFAULT_CLIENT_LIMIT, Validate, decode_binary};
use steerd::scenario::Scenario;

const SCENARIO: &str = r#"{
  "name": "fuzz",
  "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 200, "y": 200}},
  "edge": "clamp", "tick_rate": 20, "seed": 5,
  "obstacles": [{"center": {"x": 50, "y": 50}, "radius": 8}, {"center": {"x": 120, "y": 80}, "radius": 3}],
  "walls": [{"a": {"x": 10, "y": 150}, "b": {"x": 180, "y": 150}}],
  "groups": [{
    "name": "g", "count": 20,
    "area": {"type": "rect", "min_x": 20, "min_y": 20, "max_x": 180, "max_y": 140},
    "limits": {"max_speed": 5, "max_accel": 10, "radius": 0.5},
    "behaviors": [{"behavior": {"type": "wander"}, "weight": 1, "priority": 0}]
  }]
}"#;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = decode_binary::<ClientMsg>(data, DEFAULT_CLIENT_LIMIT) else { return };
    // The session answers an invalid message with `invalid_field` and applies nothing.
    if msg.validate().is_err() {
        return;
    }
    let Some(Ok(cmds)) = steerd::convert::world_commands(&msg) else { return };
    let scenario = Scenario::from_json(SCENARIO).expect("the fuzz scenario parses");
    // As the runtime's `build_world` does (its agent-count check passes: 20 agents). The
    // server's default caps would allow big spawns; small caps keep each run fast and still
    // exercise the limit path.
    let mut world = scenario.build().expect("the fuzz world builds");
    world.set_caps(400, 200);
    for c in cmds {
        let _ = world.apply(c);
    }
    for _ in 0..3 {
        world.step();
        let audit = world.audit();
        assert_eq!(audit.non_finite, 0, "non-finite agent state after {msg:?}");
        assert_eq!(audit.out_of_bounds, 0, "agent out of bounds after {msg:?}");
    }
});
