//! Small types shared by client and server messages.

use crate::validate::always_valid;
use serde::{Deserialize, Serialize};

/// Deserializes a `Vec` without trusting the length prefix for preallocation.
///
/// serde's default `Vec` visitor may preallocate up to 1 MiB from a claimed
/// length; this one reserves at most 64 elements up front and grows only as
/// elements are actually decoded (each costs at least one input byte, and the
/// input is bounded by the decode limit).
pub(crate) mod bounded {
    use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
    use std::marker::PhantomData;

    pub fn vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Vec<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(v) = seq.next_element()? {
                    out.push(v);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

wire_struct! {
    #[openapi]
    /// A point in world units.
    #[derive(Copy, Default)]
    pub struct Point {
        pub x: f32,
        pub y: f32,
    }
}

wire_struct! {
    #[openapi]
    /// An axis-aligned rectangle in world units (`min` inclusive, `max` exclusive).
    #[derive(Copy)]
    pub struct Rect {
        // The bounds in the schema are steerd's (every coordinate within ±1e6).
        #[cfg_attr(feature = "openapi", schema(minimum = -1000000, maximum = 1000000))] pub min_x: f32,
        #[cfg_attr(feature = "openapi", schema(minimum = -1000000, maximum = 1000000))] pub min_y: f32,
        /// At least `min_x`.
        #[cfg_attr(feature = "openapi", schema(minimum = -1000000, maximum = 1000000))] pub max_x: f32,
        /// At least `min_y`.
        #[cfg_attr(feature = "openapi", schema(minimum = -1000000, maximum = 1000000))] pub max_y: f32,
    }
}

wire_struct! {
    #[openapi]
    /// A circle in world units.
    #[derive(Copy)]
    pub struct Circle {
        #[cfg_attr(feature = "openapi", schema(minimum = -1000000, maximum = 1000000))] pub x: f32,
        #[cfg_attr(feature = "openapi", schema(minimum = -1000000, maximum = 1000000))] pub y: f32,
        #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000000))] pub radius: f32,
    }
}

wire_struct! {
    #[openapi]
    /// Refers to another agent by id.
    #[derive(Copy)]
    pub struct AgentRef {
        pub agent: u32,
    }
}

wire_struct! {
    #[openapi]
    /// An absolute orientation in radians (0 = +x, counter-clockwise).
    #[derive(Copy)]
    pub struct Orientation {
        pub radians: f32,
    }
}

wire_struct! {
    /// The whole world (no fields).
    #[derive(Copy, Default)]
    pub struct WholeWorld {}
}

wire_enum! {
    #[openapi]
    /// A steering target: a fixed point or another agent.
    pub enum Target / TargetKind {
        /// `{"type":"point","x":..,"y":..}`
        Point(Point) = "point",
        /// `{"type":"agent","agent":id}`
        Agent(AgentRef) = "agent",
    }
}

wire_enum! {
    #[openapi]
    /// The target of `Align`: an absolute orientation or another agent's orientation.
    pub enum AlignTarget / AlignTargetKind {
        /// `{"type":"orientation","radians":..}`
        Orientation(Orientation) = "orientation",
        /// `{"type":"agent","agent":id}`
        Agent(AgentRef) = "agent",
    }
}

wire_enum! {
    /// A subscription's area of interest.
    pub enum Area / AreaKind {
        /// Every AOI cell overlapping the rectangle.
        Rect(Rect) = "rect",
        /// Every AOI cell of the world.
        WholeWorld(WholeWorld) = "whole_world",
    }
}

wire_struct! {
    #[openapi]
    /// Given spawn positions, one agent at each (at most `limits.max_spawn` in one spawn).
    pub struct Points {
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub points: Vec<Point>,
    }
}

wire_enum! {
    #[openapi]
    /// Where a spawned group is placed: the one spawn-area form of `Spawn`, REST
    /// `POST …/agents` and scenario groups.
    pub enum SpawnArea / SpawnAreaKind {
        /// Uniformly at random inside a rectangle.
        Rect(Rect) = "rect",
        /// Uniformly at random inside a circle.
        Circle(Circle) = "circle",
        /// Evenly spaced on a circle, facing its centre (since version 6).
        Ring(Circle) = "ring",
        /// At the given points, in order: the spawn's `count` must equal their number (since
        /// version 6).
        Points(Points) = "points",
    }
}

/// Frame encoding chosen by the client in `Hello`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// bincode 2 in WebSocket binary frames (the default).
    #[default]
    Binary,
    /// JSON in WebSocket text frames.
    Json,
}

/// Stable error codes. JSON uses the snake_case names; binary uses the
/// variant index (the order below, starting at 0). Never reorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 0: malformed message or a message not allowed now.
    BadRequest,
    /// 1: a field value is invalid; `field` names it.
    InvalidField,
    /// 2: no world of that name.
    UnknownWorld,
    /// 3: no agent with that id.
    UnknownAgent,
    /// 4: authenticated but not allowed.
    Forbidden,
    /// 5: missing or bad token.
    Unauthorized,
    /// 6: too many requests.
    RateLimited,
    /// 7: message or request too large.
    TooLarge,
    /// 8: server overloaded; retry later.
    Busy,
    /// 9: the thing asked for does not exist.
    NotFound,
    /// 10: `Hello.protocol_version` not supported.
    UnsupportedVersion,
    /// 11: server bug.
    Internal,
    /// 12: a per-player or per-world quota (agents, spawn rate, connections, subscription
    /// area) would be exceeded; nothing was changed.
    QuotaExceeded,
}

impl ErrorCode {
    /// Every code in wire order.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::BadRequest,
        ErrorCode::InvalidField,
        ErrorCode::UnknownWorld,
        ErrorCode::UnknownAgent,
        ErrorCode::Forbidden,
        ErrorCode::Unauthorized,
        ErrorCode::RateLimited,
        ErrorCode::TooLarge,
        ErrorCode::Busy,
        ErrorCode::NotFound,
        ErrorCode::UnsupportedVersion,
        ErrorCode::Internal,
        ErrorCode::QuotaExceeded,
    ];

    /// The stable string name, e.g. `"unsupported_version"`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::InvalidField => "invalid_field",
            ErrorCode::UnknownWorld => "unknown_world",
            ErrorCode::UnknownAgent => "unknown_agent",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Busy => "busy",
            ErrorCode::NotFound => "not_found",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::Internal => "internal",
            ErrorCode::QuotaExceeded => "quota_exceeded",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a connection may do (PROTOCOL.md §Players). JSON uses the snake_case names; binary
/// uses the variant index (the order below, starting at 0). Never reorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// 0: the admin token: commands every agent, sees everything, no quotas.
    Admin,
    /// 1: a player: commands the agents it owns, within quotas, sees what the world's
    /// visibility lets it see.
    #[default]
    Player,
    /// 2: a spectator: sees every cell, commands nothing.
    Spectator,
}

impl Role {
    /// Every role in wire order.
    pub const ALL: &'static [Role] = &[Role::Admin, Role::Player, Role::Spectator];

    /// The stable string name, e.g. `"spectator"`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Player => "player",
            Role::Spectator => "spectator",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

always_valid!(Encoding, ErrorCode, Role);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_code_names_match_serde() {
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(serde_json::to_string(c).unwrap(), format!("\"{}\"", c.name()));
            let bin = bincode::serde::encode_to_vec(c, bincode::config::standard()).unwrap();
            assert_eq!(bin, vec![u8::try_from(i).unwrap()], "{c}");
        }
    }

    #[test]
    fn role_names_match_serde() {
        for (i, r) in Role::ALL.iter().enumerate() {
            assert_eq!(serde_json::to_string(r).unwrap(), format!("\"{}\"", r.name()));
            let bin = bincode::serde::encode_to_vec(r, bincode::config::standard()).unwrap();
            assert_eq!(bin, vec![u8::try_from(i).unwrap()], "{r}");
        }
    }

    #[test]
    fn target_json_is_internally_tagged() {
        let t = Target::Agent(AgentRef { agent: 7 });
        assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"type":"agent","agent":7}"#);
        let back: Target = serde_json::from_str(r#"{"agent":7,"type":"agent"}"#).unwrap();
        assert_eq!(back, t);
        let bin = bincode::serde::encode_to_vec(&t, bincode::config::standard()).unwrap();
        assert_eq!(bin, vec![1, 7]);
        let (dec, n): (Target, usize) =
            bincode::serde::decode_from_slice(&bin, bincode::config::standard()).unwrap();
        assert_eq!((dec, n), (t, 2));
    }
}
