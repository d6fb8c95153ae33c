//! A machine-readable description of every wire message and field ([`schema`]), derived from
//! the wire types themselves (`wire_struct!` / `wire_enum!` implement [`Describe`]), so that a
//! field added here changes it. `tests/schema.rs` keeps `schema.json` (beside PROTOCOL.md) equal
//! to it; the TypeScript and C# SDK suites check their codec tables against that file.
//!
//! The grammar (JSON): a primitive is a string (`u8`, `u16`, `u32`, `u64`, `i32`, `f32`,
//! `bool`, `string`, `checksum` — 8 bytes, §6.5); `{"struct": [[name, type], …]}` (binary:
//! the fields in order); `{"opt": type}`; `{"vec": type}`; `{"tagged": [[tag, fields], …]}`
//! (binary: the variant index, then its fields; JSON: `"type": tag`); `{"names": […]}` (a
//! fieldless enum: binary the index, JSON the name); `{"packed": kind}` (the packed codings of
//! §6.6–§6.8 and §5.2: `records`, `ids`, `changes`, `entries`, `runs`).

use serde::Serialize;

/// One wire type.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Type {
    Prim(&'static str),
    Struct {
        #[serde(rename = "struct")]
        fields: Vec<(&'static str, Type)>,
    },
    Opt {
        opt: Box<Type>,
    },
    Vec {
        vec: Box<Type>,
    },
    Tagged {
        tagged: Vec<(&'static str, Vec<(&'static str, Type)>)>,
    },
    Names {
        names: Vec<&'static str>,
    },
    Packed {
        packed: &'static str,
    },
}

/// A wire type's description.
pub trait Describe {
    fn describe() -> Type;
}

/// The whole protocol: its version and the two message enums.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Schema {
    pub protocol_version: u16,
    pub client: Type,
    pub server: Type,
}

/// The schema of [`crate::ClientMsg`] and [`crate::ServerMsg`].
pub fn schema() -> Schema {
    Schema {
        protocol_version: crate::PROTOCOL_VERSION,
        client: <crate::ClientMsg as Describe>::describe(),
        server: <crate::ServerMsg as Describe>::describe(),
    }
}

/// A field serialized `with = "crate::pack::KIND"`: the packed coding KIND.
pub fn packed(with: &'static str) -> Type {
    Type::Packed { packed: with.strip_prefix("crate::pack::").unwrap_or(with) }
}

/// The fields of a variant's payload (a struct; anything else is described as one field `""`).
pub fn fields_of(t: Type) -> Vec<(&'static str, Type)> {
    match t {
        Type::Struct { fields } => fields,
        other => vec![("", other)],
    }
}

macro_rules! prim {
    ($($t:ty => $n:literal),*) => {
        $(impl Describe for $t {
            fn describe() -> Type {
                Type::Prim($n)
            }
        })*
    };
}
prim!(u8 => "u8", u16 => "u16", u32 => "u32", u64 => "u64", i32 => "i32", f32 => "f32", bool => "bool", String => "string");

impl<T: Describe> Describe for Option<T> {
    fn describe() -> Type {
        Type::Opt { opt: Box::new(T::describe()) }
    }
}

impl<T: Describe> Describe for Vec<T> {
    fn describe() -> Type {
        Type::Vec { vec: Box::new(T::describe()) }
    }
}

impl Describe for crate::frames::Checksum {
    fn describe() -> Type {
        Type::Prim("checksum")
    }
}

macro_rules! names {
    ($($t:ty => [$($n:literal),*]),*) => {
        $(impl Describe for $t {
            fn describe() -> Type {
                Type::Names { names: vec![$($n),*] }
            }
        })*
    };
}
// Fieldless enums whose variants are listed by hand (the wire index is the order).
names!(
    crate::Encoding => ["binary", "json"],
    crate::behavior::WanderVariant => ["millington", "circle"],
    crate::behavior::PathMode => ["once", "loop", "ping_pong"]
);

impl Describe for crate::ErrorCode {
    fn describe() -> Type {
        Type::Names { names: crate::ErrorCode::ALL.iter().map(|c| c.name()).collect() }
    }
}

impl Describe for crate::Role {
    fn describe() -> Type {
        Type::Names { names: crate::Role::ALL.iter().map(|r| r.name()).collect() }
    }
}

impl Describe for crate::cells::Cells {
    fn describe() -> Type {
        Type::Struct {
            fields: vec![
                ("world", u32::describe()),
                ("tick", u64::describe()),
                ("span", u32::describe()),
                ("checksum", Option::<crate::frames::Checksum>::describe()),
                ("entries", packed("crate::pack::entries")),
            ],
        }
    }
}
