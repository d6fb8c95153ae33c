//! Property tests: codec roundtrips, delta-chain exactness, no panics on junk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::collection::vec;
use proptest::prelude::*;
use steer_proto::*;

fn fin() -> impl Strategy<Value = f32> {
    prop_oneof![-1e6f32..1e6f32, Just(0.0f32), Just(-0.0f32), Just(f32::MAX), Just(f32::MIN_POSITIVE)]
}

fn point() -> impl Strategy<Value = Point> {
    (fin(), fin()).prop_map(|(x, y)| Point { x, y })
}

fn rect() -> impl Strategy<Value = Rect> {
    (fin(), fin(), fin(), fin()).prop_map(|(min_x, min_y, max_x, max_y)| Rect { min_x, min_y, max_x, max_y })
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![point().prop_map(Target::Point), any::<u32>().prop_map(|agent| Target::Agent(AgentRef { agent }))]
}

fn align() -> impl Strategy<Value = AlignParams> {
    (fin(), fin(), fin()).prop_map(|(target_radius, slow_radius, time_to_target)| AlignParams {
        target_radius,
        slow_radius,
        time_to_target,
    })
}

/// Valid reciprocal-avoidance parameters (the messages of `client_msg` must validate), bounds
/// included.
fn reciprocal() -> impl Strategy<Value = ReciprocalAvoidance> {
    let horizon = || prop_oneof![f32::MIN_POSITIVE..=MAX_TIME_HORIZON, Just(MAX_TIME_HORIZON)];
    (horizon(), horizon(), prop_oneof![0.0f32..=MAX_NEIGHBOR_DIST, Just(0.0), Just(MAX_NEIGHBOR_DIST)], 1..=MAX_AVOIDANCE_NEIGHBORS)
        .prop_map(|(time_horizon, obstacle_time_horizon, neighbor_dist, max_neighbors)| ReciprocalAvoidance {
            time_horizon,
            obstacle_time_horizon,
            neighbor_dist,
            max_neighbors,
        })
}

fn behavior() -> BoxedStrategy<Behavior> {
    let a = prop_oneof![
        target().prop_map(|target| Behavior::Seek(Seek { target })),
        (target(), fin()).prop_map(|(target, panic_distance)| Behavior::Flee(Flee { target, panic_distance })),
        (target(), fin(), fin(), fin()).prop_map(|(target, target_radius, slow_radius, time_to_target)| {
            Behavior::Arrive(Arrive { target, target_radius, slow_radius, time_to_target })
        }),
        (any::<u32>(), fin()).prop_map(|(target_agent, max_prediction)| Behavior::Pursue(Pursue {
            target_agent,
            max_prediction
        })),
        (any::<u32>(), fin(), fin()).prop_map(|(target_agent, panic_distance, max_prediction)| {
            Behavior::Evade(Evade { target_agent, panic_distance, max_prediction })
        }),
        (fin(), align()).prop_map(|(radians, align)| Behavior::Align(Align {
            target: AlignTarget::Orientation(Orientation { radians }),
            align
        })),
        (target(), align()).prop_map(|(target, align)| Behavior::Face(Face { target, align })),
        align().prop_map(|align| Behavior::LookWhereYouAreGoing(LookWhereYouAreGoing { align })),
        (any::<u32>(), fin()).prop_map(|(target_agent, time_to_target)| Behavior::VelocityMatch(VelocityMatch {
            target_agent,
            time_to_target
        })),
        (any::<bool>(), fin(), fin(), fin()).prop_map(|(c, wander_offset, wander_radius, wander_rate)| {
            let variant = if c { WanderVariant::Circle } else { WanderVariant::Millington };
            Behavior::Wander(Wander { variant, wander_offset, wander_radius, wander_rate })
        }),
    ]
    .boxed();
    let b = prop_oneof![
        (fin(), fin(), fin(), proptest::option::of(point())).prop_map(|(radius, interval_min, interval_max, center)| {
            Behavior::RandomTarget(RandomTarget { radius, interval_min, interval_max, center })
        }),
        (proptest::option::of(fin()), fin(), fin()).prop_map(|(min_box_length, braking_weight, lateral_base)| {
            Behavior::ObstacleAvoidance(ObstacleAvoidance { min_box_length, braking_weight, lateral_base })
        }),
        (fin(), fin(), fin()).prop_map(|(ahead_len, max_avoid_force, margin)| Behavior::AheadAvoidance(AheadAvoidance {
            ahead_len,
            max_avoid_force,
            margin
        })),
        (fin(), fin()).prop_map(|(look_ahead, avoid_distance)| Behavior::WallAvoidance(WallAvoidance {
            look_ahead,
            avoid_distance
        })),
        (fin(), fin()).prop_map(|(look_ahead, avoid_radius)| Behavior::AgentAvoidance(AgentAvoidance {
            look_ahead,
            avoid_radius
        })),
        fin().prop_map(|neighbor_radius| Behavior::Separation(Separation { neighbor_radius })),
        fin().prop_map(|neighbor_radius| Behavior::Cohesion(Cohesion { neighbor_radius })),
        (fin(), fin()).prop_map(|(neighbor_radius, time_to_target)| Behavior::Alignment(Alignment {
            neighbor_radius,
            time_to_target
        })),
        (vec(point(), 0..4), fin(), 0..3u8).prop_map(|(waypoints, path_radius, m)| {
            let mode = [PathMode::Once, PathMode::Loop, PathMode::PingPong][usize::from(m)];
            Behavior::PathFollowing(PathFollowing { waypoints, path_radius, mode })
        }),
        (any::<u32>(), fin(), fin(), fin(), fin()).prop_map(|(leader, behind_distance, leader_sight_radius, separation_radius, separation_weight)| {
            Behavior::LeaderFollowing(LeaderFollowing { leader, behind_distance, leader_sight_radius, separation_radius, separation_weight })
        }),
        reciprocal().prop_map(Behavior::ReciprocalAvoidance),
    ]
    .boxed();
    prop_oneof![a, b].boxed()
}

fn entry() -> BoxedStrategy<BehaviorEntry> {
    (behavior(), fin(), any::<u8>()).prop_map(|(behavior, weight, priority)| BehaviorEntry { behavior, weight, priority }).boxed()
}

fn name() -> impl Strategy<Value = String> {
    "[a-zé\"\\\\ ]{0,8}"
}

fn ids() -> impl Strategy<Value = Vec<u32>> {
    vec(any::<u32>(), 0..5)
}

/// Sorted without repeats (a `subscribed` cell list).
fn ascending(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v.dedup();
    v
}

/// Cell lists as subscriptions make them: runs of consecutive cells with gaps, some near the top
/// of the u32 range.
fn cell_runs() -> impl Strategy<Value = Vec<u32>> {
    (prop_oneof![Just(0u32), any::<u32>()], vec((0u32..50, 1u32..40), 0..8)).prop_map(|(start, runs)| {
        let mut out = Vec::new();
        let mut next = u64::from(start);
        for (gap, len) in runs {
            let first = next + u64::from(gap);
            for c in first..(first + u64::from(len)).min(1 << 32) {
                out.push(c as u32);
            }
            next = first + u64::from(len);
        }
        out
    })
}

fn client_msg() -> BoxedStrategy<ClientMsg> {
    prop_oneof![
        (any::<u16>(), proptest::option::of(name()), any::<bool>(), proptest::option::of(name())).prop_map(|(protocol_version, token, j, resume)| {
            let encoding = if j { Encoding::Json } else { Encoding::Binary };
            ClientMsg::Hello(Hello { protocol_version, token, encoding, resume })
        }),
        (any::<u32>(), name(), proptest::option::of(rect()), any::<u32>()).prop_map(|(request_id, world, r, every_n_ticks)| {
            let area = r.map_or(Area::WholeWorld(WholeWorld {}), Area::Rect);
            ClientMsg::Subscribe(Subscribe { request_id, world, area, every_n_ticks })
        }),
        (any::<u32>(), name()).prop_map(|(request_id, world)| ClientMsg::Unsubscribe(Unsubscribe { request_id, world })),
        (any::<u32>(), name(), ids(), point(), fin()).prop_map(|(request_id, world, agents, target, stopping_distance)| {
            ClientMsg::MoveTo(MoveTo { request_id, world, agents, target, stopping_distance })
        }),
        (any::<u32>(), name(), ids(), vec(entry(), 0..4)).prop_map(|(request_id, world, agents, behaviors)| {
            ClientMsg::SetBehaviors(SetBehaviors { request_id, world, agents, behaviors })
        }),
        (any::<u32>(), name(), ids(), entry()).prop_map(|(request_id, world, agents, entry)| {
            ClientMsg::AddBehavior(AddBehavior { request_id, world, agents, entry })
        }),
        (any::<u32>(), name(), ids(), 0..20usize).prop_map(|(request_id, world, agents, k)| {
            ClientMsg::RemoveBehavior(RemoveBehavior { request_id, world, agents, kind: BehaviorKind::ALL[k] })
        }),
        (any::<u32>(), name(), ids()).prop_map(|(request_id, world, agents)| {
            ClientMsg::ResetBehaviors(ResetBehaviors { request_id, world, agents })
        }),
        (any::<u32>(), name(), name(), any::<u32>(), fin(), proptest::option::of(fin()), vec(entry(), 0..3)).prop_map(
            |(request_id, world, group, count, r, max_speed, behaviors)| {
                ClientMsg::Spawn(Spawn {
                    request_id,
                    world,
                    group,
                    count,
                    area: SpawnArea::Circle(Circle { x: r, y: -r, radius: r }),
                    limits: Limits { max_speed, radius: max_speed, ..Limits::default() },
                    behaviors,
                })
            }
        ),
        (any::<u32>(), name(), ids()).prop_map(|(request_id, world, agents)| ClientMsg::Despawn(Despawn {
            request_id,
            world,
            agents
        })),
        any::<u32>().prop_map(|request_id| ClientMsg::Ping(Ping { request_id })),
    ]
    .boxed()
}

fn qagent_set(max: usize) -> impl Strategy<Value = Vec<QAgent>> {
    vec((0u32..200, 0u16..3, any::<[i32; 2]>(), -60i32..60, -60i32..60, any::<u16>(), any::<bool>()), 0..max)
        .prop_map(|raw| {
            let mut v: Vec<QAgent> = raw
                .into_iter()
                .map(|(id, group, pos, vx, vy, orient, face)| {
                    let vel = [vx, vy];
                    let orient = if face { heading(vel).unwrap_or(orient) } else { orient };
                    QAgent { id, group, pos, vel, orient }
                })
                .collect();
            v.sort_by_key(|a| a.id);
            v.dedup_by_key(|a| a.id);
            v
        })
}

/// A delta and the state it applies to.
fn delta_with_base() -> impl Strategy<Value = (Delta, Vec<QAgent>)> {
    (qagent_set(20), qagent_set(20), any::<u64>(), any::<bool>()).prop_map(|(a, b, tick, sum)| {
        let q = Quantization::default();
        let d = encode_delta(&a, &b, FrameScope { world: 1, cell: 2 }, tick..tick.wrapping_add(1), &q, sum);
        (d.unwrap(), a)
    })
}

fn server_msg() -> BoxedStrategy<ServerMsg> {
    prop_oneof![
        (any::<u16>(), vec((any::<u32>(), name(), rect(), fin(), any::<u32>(), any::<u32>(), fin()), 0..3), name(), 0..3usize, any::<u32>()).prop_map(
            |(protocol_version, worlds, player_id, role, session_grace_secs)| ServerMsg::Welcome(Welcome {
                protocol_version,
                quantization: Quantization::default(),
                worlds: worlds
                    .into_iter()
                    .map(|(id, name, bounds, aoi_cell_size, cols, rows, tick_rate_hz)| WorldInfo {
                        id,
                        name,
                        bounds,
                        aoi_cell_size,
                        cols,
                        rows,
                        tick_rate_hz
                    })
                    .collect(),
                max_message_bytes: 65536,
                resume_token: format!("r-{player_id}"),
                player_id,
                role: Role::ALL[role],
                session_grace_secs,
            })
        ),
        (any::<u32>(), any::<u32>(), any::<u64>(), qagent_set(20), any::<bool>()).prop_map(
            |(world, cell, tick, agents, sum)| ServerMsg::Keyframe(
                encode_keyframe(FrameScope { world, cell }, tick, &agents, sum).unwrap()
            )
        ),
        delta_with_base().prop_map(|(d, _)| ServerMsg::Delta(d)),
        (any::<u32>(), any::<u64>(), any::<u32>(), name(), ids()).prop_map(|(world, tick, agent, group, agents)| {
            let event = match agent % 8 {
                0 => EventKind::DestinationReached(AgentEvent { agent }),
                1 => EventKind::PathCompleted(AgentEvent { agent }),
                2 => EventKind::Spawned(SpawnedEvent { group, agents }),
                3 => EventKind::TargetLost(TargetLostEvent { agent, target: tick as u32 }),
                4 => EventKind::TickRate(TickRateEvent { tick_rate_hz: (agent % 1000) as f32 / 8.0 }),
                5 => EventKind::GaveUp(StoppedShortEvent { agent, distance: (tick % 4096) as f32 / 16.0 }),
                6 => EventKind::Unreachable(StoppedShortEvent { agent, distance: (tick % 4096) as f32 / 4.0 }),
                _ => EventKind::Despawned(DespawnedEvent { agents }),
            };
            ServerMsg::Event(Event { world, tick, event })
        }),
        (any::<u32>(), 0..12usize, name(), proptest::option::of(name()), ids()).prop_map(
            |(request_id, c, message, field, agents)| {
                let result = match c % 4 {
                    0 => Outcome::Ok(Done {}),
                    1 => Outcome::Subscribed(Subscribed { world: request_id, cells: ascending(agents), groups: vec!["a".into(), "b c".into()] }),
                    2 => Outcome::Spawned(Spawned { agents }),
                    _ => Outcome::Error(ErrorBody { code: ErrorCode::ALL[c], message, field }),
                };
                ServerMsg::CommandResult(CommandResult { request_id, result })
            }
        ),
        (0..12usize, name()).prop_map(|(c, message)| ServerMsg::Error(ErrorBody {
            code: ErrorCode::ALL[c],
            message,
            field: None
        })),
        (any::<u32>(), any::<u64>()).prop_map(|(request_id, server_tick)| ServerMsg::Pong(Pong { request_id, server_tick })),
    ]
    .boxed()
}

/// One simulated cell step: move, turn, face, enter, leave, regroup.
fn step(prev: &[QAgent], ops: &[(u8, i32, i32, u16)], tick: u64) -> Vec<QAgent> {
    let mut next: Vec<QAgent> = Vec::new();
    for (i, a) in prev.iter().enumerate() {
        let (op, x, y, o) = ops.get(i % ops.len().max(1)).copied().unwrap_or((0, 0, 0, 0));
        let mut b = *a;
        match op % 8 {
            0 => {}
            1 => continue, // leaves
            2 => b.group = b.group.wrapping_add(1),
            3 => b.orient = o,
            4 => {
                b.vel = [x % 50, y % 50];
                b.pos = [b.pos[0].wrapping_add(b.vel[0] / 2), b.pos[1].wrapping_add(b.vel[1] / 2 + 1)];
                b.orient = heading(b.vel).unwrap_or(b.orient);
            }
            5 => b.pos = [x, y],
            6 => b.vel = [x, y],
            _ => {
                b.vel = [b.vel[0].wrapping_add(x % 7), b.vel[1].wrapping_add(y % 7)];
                b.pos = [b.pos[0].wrapping_add(b.vel[0] / 2), b.pos[1].wrapping_add(b.vel[1] / 2)];
            }
        }
        next.push(b);
    }
    // Newcomers with fresh ids.
    for (k, &(op, x, y, o)) in ops.iter().enumerate().filter(|(_, op)| op.0 % 5 == 0) {
        let id = 1000 + (tick as u32) * 64 + k as u32;
        next.push(QAgent { id, group: u16::from(op % 3), pos: [x, y], vel: [y % 9, x % 9], orient: o });
    }
    next.sort_by_key(|a| a.id);
    next
}

/// Binary and JSON encodings both decode back to the same message, once
/// `resolve` has completed the decoded message (deltas: against their base).
fn roundtrip<T>(m: &T, resolve: impl Fn(&mut T)) -> Result<(), TestCaseError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let bin = encode_binary(m).unwrap();
    let mut back = decode_binary::<T>(&bin, HARD_LIMIT).unwrap();
    resolve(&mut back);
    prop_assert_eq!(&back, m);
    let json = encode_json(m).unwrap();
    let mut back = decode_json::<T>(&json, HARD_LIMIT).unwrap();
    resolve(&mut back);
    prop_assert_eq!(&back, m);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn cell_runs_roundtrip_in_few_bytes(cells in cell_runs()) {
        let mut bytes = Vec::new();
        pack::pack_runs(&cells, &mut bytes).unwrap();
        prop_assert_eq!(pack::unpack_runs(&bytes).unwrap(), cells.clone());
        // Two varints per run, never more than a gap-coded list would take plus one byte.
        let runs = cells.windows(2).filter(|w| w[1] != w[0] + 1).count() + usize::from(!cells.is_empty());
        prop_assert!(bytes.len() <= runs * 10);
        let mut ids = Vec::new();
        pack::pack_ids(&cells, &mut ids).unwrap();
        prop_assert!(bytes.len() <= ids.len() + 5);
    }

    #[test]
    fn client_msgs_roundtrip_both_encodings(m in client_msg()) {
        roundtrip(&m, |_| {})?;
        prop_assert!(m.validate().is_ok());
    }

    #[test]
    fn server_msgs_roundtrip_both_encodings(m in server_msg()) {
        // Deltas are resolved against their base in `deltas_roundtrip_...`.
        if !matches!(m, ServerMsg::Delta(_)) {
            roundtrip(&m, |_| {})?;
        }
    }

    #[test]
    fn deltas_roundtrip_both_encodings_against_their_base((d, base) in delta_with_base()) {
        let m = ServerMsg::Delta(d);
        roundtrip(&m, |m| if let ServerMsg::Delta(d) = m { d.resolve(&base).unwrap() })?;
    }

    #[test]
    fn keyframe_then_delta_chain_reproduces_server_state(
        start in qagent_set(40),
        steps in vec(vec((any::<u8>(), any::<i32>(), any::<i32>(), any::<u16>()), 1..12), 1..8),
        skip in vec(any::<bool>(), 8),
    ) {
        let q = Quantization::default();
        let scope = FrameScope { world: 3, cell: 5 };
        let mut server = CellEncoder::new(scope);
        server.update(start, 1, &q, true).unwrap();
        let mut client = ClientState::new(q);
        let key = encode_binary(&ServerMsg::Keyframe(server.keyframe(true))).unwrap();
        client.apply(&decode_binary(&key, HARD_LIMIT).unwrap()).unwrap();
        let mut state = server.agents().to_vec();
        for (i, ops) in steps.iter().enumerate() {
            let tick = i as u64 + 2;
            // Some ticks leave the cell unchanged: no delta, chain holds.
            let next = if skip[i] { state.clone() } else { step(&state, ops, tick) };
            let delta = server.update(next.clone(), tick, &q, i % 2 == 0).unwrap();
            prop_assert_eq!(delta.is_none(), next == state);
            if let Some(d) = delta {
                let bytes = encode_binary(&ServerMsg::Delta(d)).unwrap();
                client.apply(&decode_binary(&bytes, HARD_LIMIT).unwrap()).unwrap();
            }
            state = next;
            let cell = client.cell(3, 5).unwrap();
            prop_assert_eq!(cell.agents(), state.as_slice());
            prop_assert_eq!(cell.checksum(), checksum(&state));
            prop_assert_eq!(cell.tick(), server.tick());
        }
    }

    #[test]
    fn out_of_range_reciprocal_avoidance_is_refused_naming_the_field(
        ok in reciprocal(),
        which in 0..4usize,
        bad_f in prop_oneof![-1e6f32..=0.0, 1000.01f32..1e6, Just(f32::NAN), Just(f32::INFINITY)],
        bad_n in prop_oneof![Just(0u32), (MAX_AVOIDANCE_NEIGHBORS + 1)..=u32::MAX],
    ) {
        let mut r = ok;
        // Horizons: bad_f is ≤ 0, non-finite or beyond 60; neighbor_dist: only < 0 or > 1000.
        let (field, bad) = match which {
            0 => ("time_horizon", { r.time_horizon = bad_f; true }),
            1 => ("obstacle_time_horizon", { r.obstacle_time_horizon = bad_f; true }),
            2 => ("neighbor_dist", { r.neighbor_dist = bad_f; bad_f != 0.0 }),
            _ => ("max_neighbors", { r.max_neighbors = bad_n; true }),
        };
        let m = ClientMsg::AddBehavior(AddBehavior { request_id: 1, world: "w".into(), agents: vec![1], entry: Behavior::ReciprocalAvoidance(r).into() });
        if bad {
            let err = m.validate().unwrap_err();
            prop_assert_eq!(err.field, format!("entry.behavior.{field}"));
        } else {
            prop_assert!(m.validate().is_ok());
        }
    }

    #[test]
    fn decoders_never_panic_on_random_bytes(bytes in vec(any::<u8>(), 0..200)) {
        let _ = decode_binary::<ServerMsg>(&bytes, 1 << 16);
        let _ = decode_binary::<ClientMsg>(&bytes, 1 << 16);
        let _ = decode_json::<ServerMsg>(&String::from_utf8_lossy(&bytes), 1 << 16);
    }

    #[test]
    fn decoders_never_panic_on_damaged_messages(m in server_msg(), cut in any::<prop::sample::Index>(), flip in any::<(prop::sample::Index, u8)>()) {
        let bin = encode_binary(&m).unwrap();
        let n = cut.index(bin.len().max(1));
        // Every strict prefix is rejected (never silently accepted as something else).
        prop_assert!(decode_binary::<ServerMsg>(&bin[..n.min(bin.len().saturating_sub(1))], HARD_LIMIT).is_err());
        let mut damaged = bin.clone();
        if !damaged.is_empty() {
            let i = flip.0.index(damaged.len());
            damaged[i] ^= flip.1 | 1;
        }
        if let Ok(ServerMsg::Delta(d)) = decode_binary::<ServerMsg>(&damaged, HARD_LIMIT) {
            // Applying garbage must fail cleanly or succeed; never panic.
            let mut c = ClientState::new(Quantization::default());
            let _ = c.apply_delta(&d);
        }
    }
}

/// The binary `cells` messages of three cells stepped by `steps` (tick 1: keyframes; then one
/// delta entry per changed cell), every other message with its checksum.
fn cells_stream(starts: [Vec<QAgent>; 3], steps: &[Vec<(u8, i32, i32, u16)>]) -> Vec<Vec<u8>> {
    let q = Quantization::default();
    let mut encoders: Vec<CellEncoder> = (0..3).map(|c| CellEncoder::new(FrameScope { world: 4, cell: 10 + 3 * c })).collect();
    let mut entries = Vec::new();
    for (e, start) in encoders.iter_mut().zip(starts) {
        e.update(start, 1, &q, false).unwrap();
        entries.push(CellEntry::Keyframe(e.keyframe(false)));
    }
    let mut out = vec![encode_binary(&ServerMsg::Cells(Cells { world: 4, tick: 1, span: 1, checksum: None, entries })).unwrap()];
    for (i, ops) in steps.iter().enumerate() {
        let tick = i as u64 + 2;
        let mut entries = Vec::new();
        let mut sums = Vec::new();
        for (c, e) in encoders.iter_mut().enumerate() {
            let next = if (i + c) % 4 == 3 { e.agents().to_vec() } else { step(e.agents(), &ops[c * ops.len() / 3..], tick) };
            if let Some(mut d) = e.update(next, tick, &q, false).unwrap() {
                // An entry's base tick is the cell's previous state, which may be older.
                d.checksum = None;
                entries.push(CellEntry::Delta(d));
                sums.push(checksum(e.agents()));
            }
        }
        let sum = (i % 2 == 0).then(|| Checksum(fold_checksums(sums)));
        out.push(encode_binary(&ServerMsg::Cells(Cells { world: 4, tick, span: 1, checksum: sum, entries })).unwrap());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `apply_cells_binary` (straight from the bytes) agrees with decoding then `apply`: both
    /// take or both refuse every message, intact or damaged, and hold the same cells after each.
    #[test]
    fn cells_applied_from_bytes_match_decode_then_apply(
        starts in [qagent_set(30), qagent_set(30), qagent_set(30)],
        steps in vec(vec((any::<u8>(), any::<i32>(), any::<i32>(), any::<u16>()), 3..15), 1..8),
        flip in proptest::option::weighted(0.3, (any::<prop::sample::Index>(), any::<prop::sample::Index>(), 1u8..=255)),
    ) {
        let mut msgs = cells_stream(starts, &steps);
        if let Some((which, at, x)) = flip {
            let k = which.index(msgs.len());
            let i = at.index(msgs[k].len());
            msgs[k][i] ^= x;
        }
        let mut decoded = ClientState::new(Quantization::default());
        let mut direct = ClientState::new(Quantization::default());
        for m in &msgs {
            let a = decode_binary::<ServerMsg>(m, HARD_LIMIT).map_err(|_| ()).and_then(|msg| decoded.apply(&msg).map_err(|_| ()));
            let mut seen = Vec::new();
            let b = match skim_cells_binary(m).filter(|h| h.len == m.len()) {
                Some(head) => direct.apply_cells_binary(&head, m, |e| seen.push(e)).map_err(|_| ()),
                None => Err(()),
            };
            prop_assert_eq!(a.is_ok(), b.is_ok(), "decode-then-apply {:?}, from bytes {:?}", a, b);
            if a.is_err() {
                break;
            }
            let Ok(ServerMsg::Cells(c)) = decode_binary::<ServerMsg>(m, HARD_LIMIT) else { unreachable!() };
            prop_assert_eq!(seen.len(), c.entries.len());
            for (e, s) in c.entries.iter().zip(&seen) {
                let (cell, keyframe, tick, records) = match e {
                    CellEntry::Keyframe(k) => (k.cell, true, k.tick, k.agents.len()),
                    CellEntry::Delta(d) => (d.cell, false, d.tick, d.changed.len() + d.entered.len()),
                };
                prop_assert_eq!(*s, AppliedEntry { cell, keyframe, tick, records });
            }
            for cell in [10, 13, 16] {
                prop_assert_eq!(decoded.cell(4, cell), direct.cell(4, cell));
            }
        }
    }
}
