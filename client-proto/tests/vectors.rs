//! Golden test vectors under `tests/vectors/`, checked in both directions.
//!
//! Each `NAME.hex` (the binary frame, lowercase hex) has a JSON twin
//! `NAME.json` (the text frame, pretty-printed). `client_*` are client →
//! server messages, `server_*` server → client. `invalid.json` lists bad
//! binary frames with the expected `DecodeError::kind`.
//!
//! Regenerate after an intended change: `STEER_PROTO_BLESS=1 cargo test -p steer-proto --test vectors`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::path::PathBuf;
use steer_proto::*;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn bless() -> bool {
    std::env::var_os("STEER_PROTO_BLESS").is_some()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Checks (or writes) one vector: binary decodes to the JSON twin's message,
/// the message encodes to exactly the binary bytes and to the same JSON value.
/// `resolve` completes a decoded message against its base state (deltas name
/// changed agents by base index in binary and by id in JSON).
fn check<T: Serialize + DeserializeOwned + PartialEq + Debug>(name: &str, msg: &T, resolve: impl Fn(&mut T)) {
    let (hex_path, json_path) = (dir().join(format!("{name}.hex")), dir().join(format!("{name}.json")));
    let bin = encode_binary(msg).unwrap();
    let json = serde_json::to_string_pretty(msg).unwrap();
    if bless() {
        std::fs::write(&hex_path, hex(&bin) + "\n").unwrap();
        std::fs::write(&json_path, json + "\n").unwrap();
        return;
    }
    let file_bin = unhex(&std::fs::read_to_string(&hex_path).unwrap_or_else(|e| panic!("{name}.hex: {e}")));
    let file_json = std::fs::read_to_string(&json_path).unwrap_or_else(|e| panic!("{name}.json: {e}"));
    let mut from_bin: T = decode_binary(&file_bin, HARD_LIMIT).unwrap();
    let mut from_json: T = decode_json(&file_json, HARD_LIMIT).unwrap();
    resolve(&mut from_bin);
    resolve(&mut from_json);
    assert_eq!(from_bin, from_json, "{name}: binary and JSON twin differ");
    assert_eq!(&from_json, msg, "{name}: vector differs from the expected message");
    assert_eq!(encode_binary(&from_json).unwrap(), file_bin, "{name}: re-encoding differs");
    let text = serde_json::to_string_pretty(&from_bin).unwrap();
    assert_eq!(text.trim_end(), file_json.trim_end(), "{name}: JSON re-encoding differs");
}

fn p(x: f32, y: f32) -> Point {
    Point { x, y }
}

fn all_behaviors() -> Vec<BehaviorEntry> {
    let t = Target::Point(p(10.0, -4.5));
    let ag = Target::Agent(AgentRef { agent: 42 });
    let al = AlignParams::default();
    let list = vec![
        Behavior::Seek(Seek { target: t.clone() }),
        Behavior::Flee(Flee { target: ag.clone(), panic_distance: 10.0 }),
        Behavior::Arrive(Arrive { target: t.clone(), target_radius: 1.0, slow_radius: 5.0, time_to_target: 0.25 }),
        Behavior::Pursue(Pursue { target_agent: 42, max_prediction: 5.0 }),
        Behavior::Evade(Evade { target_agent: 42, panic_distance: 10.0, max_prediction: 5.0 }),
        Behavior::Align(Align { target: AlignTarget::Orientation(Orientation { radians: 1.5 }), align: al }),
        Behavior::Face(Face { target: ag.clone(), align: al }),
        Behavior::LookWhereYouAreGoing(LookWhereYouAreGoing { align: al }),
        Behavior::VelocityMatch(VelocityMatch { target_agent: 42, time_to_target: 0.1 }),
        Behavior::Wander(Wander { variant: WanderVariant::Circle, wander_offset: 1.5, wander_radius: 1.0, wander_rate: 0.5 }),
        Behavior::RandomTarget(RandomTarget { radius: 20.0, interval_min: 1.0, interval_max: 2.0, center: Some(p(-5.0, 7.5)) }),
        Behavior::ObstacleAvoidance(ObstacleAvoidance { min_box_length: None, braking_weight: 0.6, lateral_base: 1.5 }),
        Behavior::AheadAvoidance(AheadAvoidance { ahead_len: 4.0, max_avoid_force: 0.4, margin: 0.25 }),
        Behavior::WallAvoidance(WallAvoidance { look_ahead: 5.0, avoid_distance: 3.0 }),
        Behavior::AgentAvoidance(AgentAvoidance { look_ahead: 3.0, avoid_radius: 2.0 }),
        Behavior::Separation(Separation { neighbor_radius: 2.5 }),
        Behavior::Cohesion(Cohesion { neighbor_radius: 6.0 }),
        Behavior::Alignment(Alignment { neighbor_radius: 4.0, time_to_target: 0.1 }),
        Behavior::PathFollowing(PathFollowing {
            waypoints: vec![p(0.0, 0.0), p(10.0, 0.0), p(10.0, 10.0)],
            path_radius: 1.0,
            mode: PathMode::PingPong,
        }),
        Behavior::LeaderFollowing(LeaderFollowing {
            leader: 7,
            behind_distance: 2.0,
            leader_sight_radius: 3.0,
            separation_radius: 1.25,
            separation_weight: 0.5,
        }),
        Behavior::ReciprocalAvoidance(ReciprocalAvoidance {
            time_horizon: 2.5,
            obstacle_time_horizon: 1.0,
            neighbor_dist: 12.0,
            max_neighbors: 20,
        }),
    ];
    // Every kind, in wire order: the SDKs' conformance tests (C#, TypeScript, and through the
    // TypeScript build the viewer) decode and encode this vector, so a kind they lack fails there.
    let kinds: Vec<BehaviorKind> = list.iter().map(Behavior::kind).collect();
    assert_eq!(kinds, BehaviorKind::ALL, "client_set_behaviors must hold every behaviour kind once, in wire order");
    list.into_iter()
        .enumerate()
        .map(|(i, behavior)| BehaviorEntry { behavior, weight: 1.0 + i as f32 / 4.0, priority: (i % 3) as u8 })
        .collect()
}

/// A spawn into `arena` with no behaviours (the area vectors differ in area and limits only).
fn bare_spawn(request_id: u32, group: &str, count: u32, area: SpawnArea, limits: Limits) -> ClientMsg {
    ClientMsg::Spawn(Spawn { request_id, world: "arena".into(), group: group.into(), count, area, limits, behaviors: vec![] })
}

fn client_vectors() -> Vec<(&'static str, ClientMsg)> {
    let w = || "arena".to_string();
    vec![
        ("client_hello", ClientMsg::Hello(Hello { protocol_version: PROTOCOL_VERSION, token: Some("s3cret".into()), encoding: Encoding::Binary, resume: None })),
        ("client_hello_json", ClientMsg::Hello(Hello { protocol_version: PROTOCOL_VERSION, token: None, encoding: Encoding::Json, resume: None })),
        ("client_hello_resume", ClientMsg::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
            token: Some("eyJhbGciOiJIUzI1NiJ9.e30.c2ln".into()),
            encoding: Encoding::Binary,
            resume: Some("7f3a9c0e5b2d4f6a8c1e3b5d7f9a0c2e".into()),
        })),
        ("client_subscribe_rect", ClientMsg::Subscribe(Subscribe {
            request_id: 1,
            world: w(),
            area: Area::Rect(Rect { min_x: -50.0, min_y: -50.0, max_x: 50.0, max_y: 25.5 }),
            every_n_ticks: 1,
        })),
        ("client_subscribe_whole", ClientMsg::Subscribe(Subscribe { request_id: 2, world: w(), area: Area::WholeWorld(WholeWorld {}), every_n_ticks: 4 })),
        ("client_unsubscribe", ClientMsg::Unsubscribe(Unsubscribe { request_id: 3, world: w() })),
        ("client_move_to", ClientMsg::MoveTo(MoveTo { request_id: 4, world: w(), agents: vec![1, 2, 300], target: p(12.5, -3.25), stopping_distance: 0.5 })),
        ("client_set_behaviors", ClientMsg::SetBehaviors(SetBehaviors { request_id: 5, world: w(), agents: vec![9], behaviors: all_behaviors() })),
        ("client_add_behavior", ClientMsg::AddBehavior(AddBehavior {
            request_id: 6,
            world: w(),
            agents: vec![9, 10],
            entry: BehaviorEntry { behavior: Behavior::Seek(Seek { target: Target::Agent(AgentRef { agent: 3 }) }), weight: 2.0, priority: 1 },
        })),
        ("client_remove_behavior", ClientMsg::RemoveBehavior(RemoveBehavior { request_id: 7, world: w(), agents: vec![9], kind: BehaviorKind::ObstacleAvoidance })),
        ("client_reset_behaviors", ClientMsg::ResetBehaviors(ResetBehaviors { request_id: 8, world: w(), agents: vec![] })),
        ("client_spawn_rect", bare_spawn(14, "blue", 3, SpawnArea::Rect(Rect { min_x: -10.0, min_y: 0.0, max_x: 10.0, max_y: 5.5 }), Limits::default())),
        ("client_spawn", ClientMsg::Spawn(Spawn {
            request_id: 9,
            world: w(),
            group: "red".into(),
            count: 100,
            area: SpawnArea::Circle(Circle { x: 0.0, y: 0.0, radius: 20.0 }),
            limits: Limits { max_speed: Some(5.0), max_accel: Some(10.0), radius: Some(0.5), ..Limits::default() },
            behaviors: vec![BehaviorEntry::from(Behavior::Wander(Wander {
                variant: WanderVariant::Millington,
                wander_offset: 1.5,
                wander_radius: 1.0,
                wander_rate: 0.5,
            }))],
        })),
        // Since version 6: the spawn areas scenario groups place (every SpawnArea kind is in a vector).
        ("client_spawn_ring", bare_spawn(12, "walkers", 8, SpawnArea::Ring(Circle { x: 100.0, y: 100.0, radius: 80.0 }), Limits::default())),
        ("client_spawn_points", bare_spawn(13, "saved", 2, SpawnArea::Points(Points { points: vec![Point { x: 1.5, y: 2.0 }, Point { x: -3.0, y: 40.25 }] }), Limits { radius: Some(0.5), ..Limits::default() })),
        ("client_despawn", ClientMsg::Despawn(Despawn { request_id: 10, world: w(), agents: vec![5, 6] })),
        ("client_ping", ClientMsg::Ping(Ping { request_id: 11 })),
    ]
}

const CHAIN_SCOPE: FrameScope = FrameScope { world: 1, cell: 37 };

/// A cell's states at ticks 100 (keyframe), 101, 102, 105 (deltas).
fn chain_states() -> Vec<(u64, Vec<QAgent>)> {
    let a = |id, group, pos, vel, orient| QAgent { id, group, pos, vel, orient };
    let h = |v| heading(v).unwrap();
    let t100 = vec![
        a(3, 0, [1250, -40], [0, 0], 0),          // resting
        a(7, 0, [-300, 220], [50, 0], 0),         // moving east, facing
        a(8, 2, [100, 100], [30, 40], h([30, 40])),
        a(20, 1, [5000, 5000], [-10, 3], 12345),  // orientation not facing
    ];
    let t101 = vec![
        t100[0],
        a(7, 0, [-275, 221], [50, 1], h([50, 1])),        // nibble motion, face
        a(8, 2, [116, 121], [33, 42], h([33, 42])),
        a(20, 1, [4995, 5002], [-10, 3], 12000),          // turn
        a(21, 1, [4000, -4000], [0, 0], 16384),           // entered
    ];
    let t102 = vec![
        t101[0],
        a(7, 3, [-250, 222], [50, 1], h([50, 1])),        // regrouped: left + entered
        a(8, 2, [300, 121], [0, 0], h([33, 42])),         // stopped, big jump: varints
        a(21, 1, [4000, -4000], [0, 0], 16384),           // 20 left
    ];
    let t105 = vec![
        a(3, 0, [1250, -40], [0, 0], 32768),              // turned in place
        t102[1],
        a(8, 2, [300, 121], [0, 0], h([33, 42])),
        a(21, 1, [4000, -4000], [0, 0], 16384),
        a(4_000_000_000, 0, [-1, -1], [-1, -1], h([-1, -1])), // large id entered
    ];
    vec![(100, t100), (101, t101), (102, t102), (105, t105)]
}

fn chain_frames() -> Vec<ServerMsg> {
    let q = Quantization::default();
    let states = chain_states();
    let mut out = vec![ServerMsg::Keyframe(encode_keyframe(CHAIN_SCOPE, states[0].0, &states[0].1, true).unwrap())];
    for w in states.windows(2) {
        let d = encode_delta(&w[0].1, &w[1].1, CHAIN_SCOPE, w[0].0..w[1].0, &q, true).unwrap();
        out.push(ServerMsg::Delta(d));
    }
    out
}

/// Cell 36's states at ticks 95 and 102, beside the chain's cell 37.
fn other_cell_states() -> [(u64, Vec<QAgent>); 2] {
    let a = |id, group, pos, vel, orient| QAgent { id, group, pos, vel, orient };
    let h = |v| heading(v).unwrap();
    [
        (95, vec![a(11, 1, [-1200, 900], [20, -20], h([20, -20])), a(12, 1, [-1180, 950], [0, 0], 100)]),
        (102, vec![a(11, 1, [-1130, 830], [20, -20], h([20, -20])), a(12, 1, [-1180, 950], [0, 0], 100)]),
    ]
}

/// Cell 35's state at tick 102, when it comes into a message (one agent).
fn third_cell_state() -> (u64, Vec<QAgent>) {
    (102, vec![QAgent { id: 40, group: 0, pos: [-2400, 1000], vel: [10, 0], orient: 0 }])
}

/// `cells` messages of world 1: tick 100 (keyframes of cells 36 and 37, cell 36 idle since 95),
/// 101 (cell 37's delta), 102 (a keyframe of cell 35, then both cells: cell 36's delta from 95,
/// cell 37's left + entered, whose position chains on cell 35's record),
/// then 105 with span 3 (cell 37's delta from 102, its base implied by the span). Each with the
/// bases of its deltas by cell.
/// A message with the base state of its deltas, by cell.
type WithBases = (ServerMsg, Vec<(u32, Vec<QAgent>)>);

fn cells_frames() -> Vec<WithBases> {
    let q = Quantization::default();
    let c37 = chain_states();
    let c36 = other_cell_states();
    let c35 = third_cell_state();
    let s36 = FrameScope { world: 1, cell: 36 };
    let key = |scope: FrameScope, (t, s): &(u64, Vec<QAgent>)| CellEntry::Keyframe(Keyframe { world: 1, cell: scope.cell, tick: *t, checksum: None, agents: s.clone() });
    let delta = |scope, (bt, b): &(u64, Vec<QAgent>), (t, n): &(u64, Vec<QAgent>)| {
        let mut d = encode_delta(b, n, scope, *bt..*t, &q, false).unwrap();
        d.world = 1;
        CellEntry::Delta(d)
    };
    let msg = |tick, span, entries: Vec<CellEntry>, after: Vec<&Vec<QAgent>>| {
        let checksum = Some(Checksum(fold_checksums(after.iter().map(|s| checksum(s)))));
        ServerMsg::Cells(Cells { world: 1, tick, span, checksum, entries })
    };
    vec![
        (msg(100, 1, vec![key(s36, &c36[0]), key(CHAIN_SCOPE, &c37[0])], vec![&c36[0].1, &c37[0].1]), vec![]),
        (msg(101, 1, vec![delta(CHAIN_SCOPE, &c37[0], &c37[1])], vec![&c37[1].1]), vec![(37, c37[0].1.clone())]),
        (
            msg(
                102,
                1,
                vec![key(FrameScope { world: 1, cell: 35 }, &c35), delta(s36, &c36[0], &c36[1]), delta(CHAIN_SCOPE, &c37[1], &c37[2])],
                vec![&c35.1, &c36[1].1, &c37[2].1],
            ),
            vec![(36, c36[0].1.clone()), (37, c37[1].1.clone())],
        ),
        (msg(105, 3, vec![delta(CHAIN_SCOPE, &c37[2], &c37[3])], vec![&c37[3].1]), vec![(37, c37[2].1.clone())]),
    ]
}

/// Server vectors with the base state of each delta.
fn server_vectors() -> Vec<(&'static str, ServerMsg, Vec<QAgent>)> {
    let v = vec![
        ("server_welcome", ServerMsg::Welcome(Welcome {
            protocol_version: PROTOCOL_VERSION,
            quantization: Quantization::default(),
            worlds: vec![WorldInfo::new(1, "arena", Rect { min_x: -500.0, min_y: -500.0, max_x: 500.0, max_y: 500.0 }, 50.0, 20.0)],
            max_message_bytes: 65536,
            player_id: "alice".into(),
            role: Role::Player,
            resume_token: "7f3a9c0e5b2d4f6a8c1e3b5d7f9a0c2e".into(),
            session_grace_secs: 30,
        })),
        ("server_welcome_spectator", ServerMsg::Welcome(Welcome {
            protocol_version: PROTOCOL_VERSION,
            quantization: Quantization::default(),
            worlds: vec![],
            max_message_bytes: 65536,
            player_id: "carol".into(),
            role: Role::Spectator,
            resume_token: "0a1b2c3d4e5f60718293a4b5c6d7e8f9".into(),
            session_grace_secs: 5,
        })),
        ("server_event_destination_reached", ServerMsg::Event(Event { world: 1, tick: 250, event: EventKind::DestinationReached(AgentEvent { agent: 7 }) })),
        ("server_event_path_completed", ServerMsg::Event(Event { world: 1, tick: 251, event: EventKind::PathCompleted(AgentEvent { agent: 8 }) })),
        ("server_event_spawned", ServerMsg::Event(Event { world: 1, tick: 252, event: EventKind::Spawned(SpawnedEvent { group: "red".into(), agents: vec![30, 31] }) })),
        ("server_event_despawned", ServerMsg::Event(Event { world: 1, tick: 253, event: EventKind::Despawned(DespawnedEvent { agents: vec![31] }) })),
        ("server_event_target_lost", ServerMsg::Event(Event { world: 1, tick: 254, event: EventKind::TargetLost(TargetLostEvent { agent: 7, target: 31 }) })),
        ("server_event_tick_rate", ServerMsg::Event(Event { world: 1, tick: 255, event: EventKind::TickRate(TickRateEvent { tick_rate_hz: 30.0 }) })),
        ("server_event_gave_up", ServerMsg::Event(Event { world: 1, tick: 257, event: EventKind::GaveUp(StoppedShortEvent { agent: 9, distance: 3.25 }) })),
        ("server_event_unreachable", ServerMsg::Event(Event { world: 1, tick: 258, event: EventKind::Unreachable(StoppedShortEvent { agent: 10, distance: 12.5 }) })),
        ("server_event_groups", ServerMsg::Event(Event { world: 1, tick: 256, event: EventKind::Groups(GroupsEvent { groups: vec!["red".into(), "blue".into(), "green".into()] }) })),
        ("server_result_ok", ServerMsg::CommandResult(CommandResult { request_id: 4, result: Outcome::Ok(Done {}) })),
        ("server_result_subscribed", ServerMsg::CommandResult(CommandResult { request_id: 1, result: Outcome::Subscribed(Subscribed { world: 1, cells: vec![36, 37, 56, 57], groups: vec!["red".into(), "blue".into()] }) })),
        ("server_result_spawned", ServerMsg::CommandResult(CommandResult { request_id: 9, result: Outcome::Spawned(Spawned { agents: (100..104).collect() }) })),
        ("server_result_error", ServerMsg::CommandResult(CommandResult {
            request_id: 5,
            result: Outcome::Error(ErrorBody {
                code: ErrorCode::InvalidField,
                message: "must be a finite number".into(),
                field: Some("behaviors[2].behavior.slow_radius".into()),
            }),
        })),
        ("server_result_quota_exceeded", ServerMsg::CommandResult(CommandResult {
            request_id: 12,
            result: Outcome::Error(ErrorBody {
                code: ErrorCode::QuotaExceeded,
                message: "player alice may own at most 256 agents in world `arena` (owns 256)".into(),
                field: Some("count".into()),
            }),
        })),
        ("server_error_unauthorized", ServerMsg::Error(ErrorBody {
            code: ErrorCode::Unauthorized,
            message: "token expired".into(),
            field: Some("token".into()),
        })),
        ("server_error_unsupported_version", ServerMsg::Error(ErrorBody {
            code: ErrorCode::UnsupportedVersion,
            message: "protocol version 2 is not supported; this server speaks 3".into(),
            field: Some("protocol_version".into()),
        })),
        ("server_pong", ServerMsg::Pong(Pong { request_id: 11, server_tick: 123_456 })),
        ("server_moved", ServerMsg::Moved(Moved { world: 1, name: "arena".into(), to: "ws://10.0.0.7:8080/ws".into() })),
    ];
    let mut v: Vec<_> = v.into_iter().map(|(name, m)| (name, m, vec![])).collect();
    let names = ["server_chain_0_keyframe", "server_chain_1_delta", "server_chain_2_delta", "server_chain_3_delta"];
    let bases = std::iter::once(vec![]).chain(chain_states().into_iter().map(|(_, s)| s));
    v.extend(names.into_iter().zip(chain_frames()).zip(bases).map(|((n, m), b)| (n, m, b)));
    v
}

#[test]
fn client_vectors_match() {
    for (name, m) in client_vectors() {
        check(name, &m, |_| {});
    }
}

#[test]
fn client_vectors_hold_every_spawn_area_kind() {
    // The SDKs' conformance tests decode and encode every client vector: a spawn area kind they
    // lack fails there only if some vector carries it.
    let kinds: Vec<SpawnAreaKind> = client_vectors()
        .iter()
        .filter_map(|(_, m)| if let ClientMsg::Spawn(s) = m { Some(s.area.kind()) } else { None })
        .collect();
    assert_eq!(kinds, SpawnAreaKind::ALL, "the spawn vectors must hold every SpawnArea kind once, in wire order");
}

#[test]
fn cells_vectors_match_and_chain() {
    let names = ["server_cells_0", "server_cells_1", "server_cells_2", "server_cells_3"];
    let mut client = ClientState::new(Quantization::default());
    // A second client applies the same bytes without decoding them into a `Cells`.
    let mut direct = ClientState::new(Quantization::default());
    for (name, (m, bases)) in names.into_iter().zip(cells_frames()) {
        check(name, &m, |m| {
            if let ServerMsg::Cells(c) = m {
                for e in &mut c.entries {
                    if let CellEntry::Delta(d) = e {
                        let base = bases.iter().find(|(cell, _)| *cell == d.cell).map(|(_, b)| b.as_slice()).unwrap();
                        d.resolve(base).unwrap();
                    }
                }
            }
        });
        // Decoded from the bytes, applied in order, with the message checksum verified.
        let bytes = encode_binary(&m).unwrap();
        let decoded: ServerMsg = decode_binary(&bytes, HARD_LIMIT).unwrap();
        client.apply(&decoded).unwrap();
        let head = skim_cells_binary(&bytes).unwrap();
        assert_eq!(head.len, bytes.len());
        let mut applied = 0;
        direct.apply_cells_binary(&head, &bytes, |_| applied += 1).unwrap();
        let ServerMsg::Cells(c) = &decoded else { panic!("{name} is not a cells message") };
        assert_eq!(applied, c.entries.len());
        for e in &c.entries {
            assert_eq!(direct.cell(1, e.cell()), client.cell(1, e.cell()), "{name}: cell {}", e.cell());
        }
    }
    let (t37, s37) = chain_states().pop().unwrap();
    let cell = client.cell(1, 37).unwrap();
    assert_eq!((cell.tick(), cell.agents()), (t37, s37.as_slice()));
    let [_, (t36, s36)] = other_cell_states();
    let cell = client.cell(1, 36).unwrap();
    assert_eq!((cell.tick(), cell.agents()), (t36, s36.as_slice()));
    let (t35, s35) = third_cell_state();
    let cell = client.cell(1, 35).unwrap();
    assert_eq!((cell.tick(), cell.agents()), (t35, s35.as_slice()));
    // A wrong message checksum is reported.
    let (ServerMsg::Cells(mut c), _) = cells_frames().swap_remove(0) else { panic!() };
    c.checksum = Some(Checksum(1));
    assert!(matches!(ClientState::new(Quantization::default()).apply_cells(&c), Err(ApplyError::ChecksumMismatch { .. })));
    let bytes = encode_binary(&ServerMsg::Cells(c)).unwrap();
    let head = skim_cells_binary(&bytes).unwrap();
    let r = ClientState::new(Quantization::default()).apply_cells_binary(&head, &bytes, |_| {});
    assert!(matches!(r, Err(CellsError::Apply { cell: None, error: ApplyError::ChecksumMismatch { .. }, .. })), "{r:?}");
}

#[test]
fn server_vectors_match() {
    for (name, m, base) in server_vectors() {
        check(name, &m, |m| {
            if let ServerMsg::Delta(d) = m {
                d.resolve(&base).unwrap();
            }
        });
    }
}

#[test]
fn chain_reproduces_states_and_covers_every_record_form() {
    let frames = chain_frames();
    let mut client = ClientState::new(Quantization::default());
    for (f, (tick, state)) in frames.iter().zip(chain_states()) {
        client.apply(f).unwrap();
        let cell = client.cell(CHAIN_SCOPE.world, CHAIN_SCOPE.cell).unwrap();
        assert_eq!((cell.tick(), cell.agents()), (tick, state.as_slice()));
    }
    let deltas: Vec<&Delta> = frames.iter().filter_map(|f| if let ServerMsg::Delta(d) = f { Some(d) } else { None }).collect();
    let changes: Vec<&AgentChange> = deltas.iter().flat_map(|d| &d.changed).collect();
    let nibble = |m: &Motion| m.dpos.iter().chain(&m.dvel).all(|v| (-8..8).contains(v));
    assert!(changes.iter().any(|c| c.motion.as_ref().is_some_and(nibble)), "nibble motion");
    assert!(changes.iter().any(|c| c.motion.as_ref().is_some_and(|m| !nibble(m))), "varint motion");
    assert!(changes.iter().any(|c| c.orient == OrientChange::Face), "face");
    assert!(changes.iter().any(|c| matches!(c.orient, OrientChange::Turn(_))), "turn");
    assert!(changes.iter().any(|c| c.motion.is_none()), "orientation-only change");
    assert!(deltas.iter().any(|d| !d.left.is_empty() && !d.entered.is_empty()), "left and entered");
    assert!(deltas.iter().any(|d| d.left.iter().any(|id| d.entered.iter().any(|e| e.id == *id))), "regroup");
}

/// (name, direction, hex, expected kind)
fn invalid_vectors() -> Vec<(&'static str, &'static str, String, &'static str)> {
    // A Welcome whose role byte (after `player_id`, before the 32-character resume token and
    // the one-byte grace) is 3: no such role.
    let welcome = ServerMsg::Welcome(Welcome {
        protocol_version: PROTOCOL_VERSION,
        quantization: Quantization::default(),
        worlds: vec![],
        max_message_bytes: 65536,
        player_id: "carol".into(),
        role: Role::Spectator,
        resume_token: "0a1b2c3d4e5f60718293a4b5c6d7e8f9".into(),
        session_grace_secs: 5,
    });
    let mut bad_role = encode_binary(&welcome).unwrap();
    let at = bad_role.len() - 1 - 32 - 1 - 1;
    assert_eq!(bad_role[at], 2, "the role byte");
    bad_role[at] = 3;
    let ping = hex(&encode_binary(&ClientMsg::Ping(Ping { request_id: 11 })).unwrap());
    let key = encode_binary(&chain_frames()[0]).unwrap();
    // A delta whose `changed` section holds one record with reserved motion mode 3.
    let delta = ServerMsg::Delta(Delta {
        world: 1, cell: 0, tick: 2, base_tick: 1, checksum: None, left: vec![], changed: vec![], entered: vec![],
    });
    let mut bad_motion = encode_binary(&delta).unwrap();
    // Envelope ends with three empty sections (length 0 each); give `changed` one byte.
    let n = bad_motion.len();
    bad_motion.truncate(n - 2);
    bad_motion.extend([1, 0x03, 0]);
    let mut non_minimal = bad_motion.clone();
    let n = non_minimal.len();
    non_minimal.truncate(n - 3);
    non_minimal.extend([2, 0x80, 0x00, 0]);
    // Keyframe record claiming "face" with zero velocity: header 0b01 (id 0, face, new group), group 0, zeros.
    let mut face_zero = encode_binary(&ServerMsg::Keyframe(Keyframe { world: 0, cell: 0, tick: 0, checksum: None, agents: vec![] })).unwrap();
    let n = face_zero.len();
    face_zero.truncate(n - 1);
    face_zero.extend([6, 0b01, 0, 0, 0, 0, 0]);
    vec![
        ("trailing_byte", "client", format!("{ping}00"), "trailing_bytes"),
        ("truncated_keyframe", "server", hex(&key[..key.len() - 3]), "unexpected_end"),
        ("empty_frame", "client", String::new(), "unexpected_end"),
        ("unknown_message_type", "client", "63".into(), "malformed"),
        ("unknown_error_code", "server", "05630000".into(), "malformed"),
        ("string_length_beyond_hard_limit", "client", "0200fcffffffff".into(), "unexpected_end"),
        ("string_longer_than_frame", "client", "0207fb0010".into(), "unexpected_end"),
        ("bad_utf8_string", "client", "020702ffff".into(), "malformed"),
        ("reserved_motion_mode", "server", hex(&bad_motion), "malformed"),
        ("non_minimal_varint", "server", hex(&non_minimal), "malformed"),
        ("face_with_zero_velocity", "server", hex(&face_zero), "malformed"),
        ("welcome_unknown_role", "server", hex(&bad_role), "malformed"),
        // A version-2 Hello (no `resume`) is one field short of a version-3 one.
        ("hello_of_version_2", "client", "00020000".into(), "unexpected_end"),
        // A version-3 Subscribe (no `every_n_ticks`): request 2, world "arena", whole world.
        ("subscribe_of_version_3", "client", "0102056172656e6101".into(), "unexpected_end"),
        // `cells` world 1, tick 5, span 1, no checksum, entries: a keyframe entry with age 0.
        ("cells_age_zero", "server", "070105010003030000".into(), "malformed"),
        // `cells` with span 0.
        ("cells_span_zero", "server", "070105000000".into(), "malformed"),
        // `subscribed` (request 1, world 1) whose one run, from cell 0, is 2^20 + 1 cells long:
        // more than a run list may hold.
        ("subscribed_too_many_cells", "server", "040101010400808040".into(), "malformed"),
        // `subscribed` whose run starts at cell 2^32 - 1 and is 2 cells long: past the last cell.
        ("subscribed_cell_past_u32", "server", "0401010106ffffffff0f01".into(), "malformed"),
    ]
}

#[test]
fn invalid_vectors_are_rejected() {
    let path = dir().join("invalid.json");
    let list: Vec<serde_json::Value> = invalid_vectors()
        .into_iter()
        .map(|(name, dir, hex, error)| serde_json::json!({"name": name, "direction": dir, "hex": hex, "error": error}))
        .collect();
    if bless() {
        std::fs::write(&path, serde_json::to_string_pretty(&list).unwrap() + "\n").unwrap();
    }
    let file: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file, list, "invalid.json is stale");
    for v in &file {
        let bytes = unhex(v["hex"].as_str().unwrap());
        let err = match v["direction"].as_str().unwrap() {
            "client" => decode_binary::<ClientMsg>(&bytes, DEFAULT_CLIENT_LIMIT).unwrap_err(),
            _ => decode_binary::<ServerMsg>(&bytes, DEFAULT_SERVER_LIMIT).unwrap_err(),
        };
        assert_eq!(err.kind(), v["error"].as_str().unwrap(), "{}: {err}", v["name"]);
        // A malformed `cells` message is refused when applied straight from its bytes too.
        if let Some(head) = skim_cells_binary(&bytes) {
            let r = ClientState::new(Quantization::default()).apply_cells_binary(&head, &bytes, |_| {});
            assert!(matches!(r, Err(CellsError::Malformed(_))), "{}: {r:?}", v["name"]);
        }
    }
}
