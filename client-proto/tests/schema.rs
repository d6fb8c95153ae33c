//! `schema.json` (beside PROTOCOL.md) is the machine-readable description of every message and
//! field, generated from the wire types (`steer_proto::schema`). The SDK suites check their codec
//! tables against it, so it must equal what the types say now.
//!
//! Regenerate after an intended change: `STEER_PROTO_BLESS=1 cargo test -p steer-proto --test schema`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use steer_proto::schema::{Describe, Type, schema};
use steer_proto::*;

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema.json")
}

#[test]
fn schema_json_matches_the_wire_types() {
    let text = serde_json::to_string_pretty(&schema()).unwrap() + "\n";
    if std::env::var_os("STEER_PROTO_BLESS").is_some() {
        std::fs::write(path(), &text).unwrap();
        return;
    }
    let file = std::fs::read_to_string(path()).expect("schema.json (bless it)");
    assert_eq!(file, text, "client-proto/schema.json is stale: STEER_PROTO_BLESS=1 cargo test -p steer-proto --test schema");
}

/// The descriptions written by hand (types outside `wire_struct!` / `wire_enum!`) agree with serde.
#[test]
fn hand_written_descriptions_agree_with_serde() {
    let Type::Struct { fields } = behavior::ReciprocalAvoidance::describe() else { panic!("a struct") };
    let value = serde_json::to_value(behavior::ReciprocalAvoidance::default()).unwrap();
    let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    let mut names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    names.sort_unstable();
    assert_eq!(names, sorted, "ReciprocalAvoidance's fields");
    // Fieldless enums: each name parses, and its binary form is its index in the list.
    fn check<T: Describe + serde::de::DeserializeOwned + serde::Serialize>() {
        let Type::Names { names } = T::describe() else { panic!("names") };
        for (i, n) in names.iter().enumerate() {
            let v: T = serde_json::from_value(serde_json::Value::String((*n).to_string())).unwrap_or_else(|e| panic!("{n}: {e}"));
            let bin = encode_binary(&v).unwrap();
            assert_eq!(bin, vec![i as u8], "{n}: index {i}");
        }
        assert!(serde_json::from_value::<T>(serde_json::Value::String("no-such-name".into())).is_err());
    }
    check::<Encoding>();
    check::<behavior::WanderVariant>();
    check::<behavior::PathMode>();
}

#[test]
fn every_message_variant_is_described_in_wire_order() {
    let s = schema();
    let Type::Tagged { tagged: client } = &s.client else { panic!("tagged") };
    let Type::Tagged { tagged: server } = &s.server else { panic!("tagged") };
    let c: Vec<&str> = client.iter().map(|(t, _)| *t).collect();
    let k: Vec<&str> = ClientMsgKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(c, k);
    let sv: Vec<&str> = server.iter().map(|(t, _)| *t).collect();
    let sk: Vec<&str> = ServerMsgKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(sv, sk);
    assert_eq!(s.protocol_version, PROTOCOL_VERSION);
}
