//! Every decoder of a server message (what clients and the swarm run on untrusted bytes):
//! binary, batched binary, JSON. Whatever decodes must re-encode and decode again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steer_proto::{DEFAULT_SERVER_LIMIT, ServerMsg, decode_binary, decode_binary_batch, decode_json, encode_binary, encode_json};

fn check(msg: &ServerMsg) {
    let bin = encode_binary(msg).expect("a decoded message re-encodes (binary)");
    let again: ServerMsg = decode_binary(&bin, usize::MAX).expect("a re-encoded message decodes (binary)");
    assert_eq!(encode_binary(&again).expect("re-encode"), bin, "binary round trip is stable");
    if let Ok(text) = encode_json(msg) {
        let _ = decode_json::<ServerMsg>(&text, usize::MAX);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = decode_binary::<ServerMsg>(data, DEFAULT_SERVER_LIMIT) {
        check(&m);
    }
    if let Ok(v) = decode_binary_batch::<ServerMsg>(data, DEFAULT_SERVER_LIMIT) {
        v.iter().for_each(|(m, _)| check(m));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(m) = decode_json::<ServerMsg>(text, DEFAULT_SERVER_LIMIT) {
            check(&m);
        }
    }
});
