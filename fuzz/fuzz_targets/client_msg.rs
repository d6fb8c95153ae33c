//! Every decoder of a client message: binary (one per frame, and batched), JSON. Whatever decodes
//! must validate without panicking and re-encode; the re-encoding must decode again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steer_proto::{ClientMsg, DEFAULT_CLIENT_LIMIT, Validate, decode_binary, decode_binary_batch, decode_json, encode_binary, encode_json};

fn check(msg: &ClientMsg) {
    let _ = msg.validate();
    let _ = msg.request_id();
    let bin = encode_binary(msg).expect("a decoded message re-encodes (binary)");
    let again: ClientMsg = decode_binary(&bin, usize::MAX).expect("a re-encoded message decodes (binary)");
    assert_eq!(encode_binary(&again).expect("re-encode"), bin, "binary round trip is stable");
    // JSON cannot carry non-finite floats: the encoder may refuse them, never panic.
    if let Ok(text) = encode_json(msg) {
        let _ = decode_json::<ClientMsg>(&text, usize::MAX);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = decode_binary::<ClientMsg>(data, DEFAULT_CLIENT_LIMIT) {
        check(&m);
    }
    if let Ok(v) = decode_binary_batch::<ClientMsg>(data, DEFAULT_CLIENT_LIMIT) {
        v.iter().for_each(|(m, _)| check(m));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(m) = decode_json::<ClientMsg>(text, DEFAULT_CLIENT_LIMIT) {
            check(&m);
        }
    }
});
