//! Frames and delta apply: the input is a batched binary frame of server messages (keyframes,
//! deltas, anything) applied in order to one `ClientState`, as a client does; and the packed
//! record/change/id decoders directly. An apply may fail with an error (chain break, checksum
//! mismatch, bad record), never panic; a state that applied keeps finite, consistent checksums.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steer_proto::pack::{unpack_changes, unpack_ids, unpack_records};
use steer_proto::{ClientState, DEFAULT_SERVER_LIMIT, ServerMsg, decode_binary_batch};

fuzz_target!(|data: &[u8]| {
    let (head, rest) = data.split_at(data.len().min(1));
    match head.first().map(|b| b % 4) {
        Some(1) => {
            let _ = unpack_records(rest);
        }
        Some(2) => {
            let _ = unpack_changes(rest);
        }
        Some(3) => {
            let _ = unpack_ids(rest);
        }
        _ => {
            let Ok(msgs) = decode_binary_batch::<ServerMsg>(rest, DEFAULT_SERVER_LIMIT) else { return };
            let mut state = ClientState::default();
            for (m, _) in &msgs {
                if state.apply(m).is_ok() {
                    // Reading the state back must not panic either.
                    let n = state.agents().count();
                    assert!(n <= 1 << 24);
                }
            }
        }
    }
});
