//! Binary (bincode 2) and JSON codecs for whole messages.

use crate::frames::EncodeError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

/// Hard cap on any decoded message, whatever the caller's limit.
pub const HARD_LIMIT: usize = 16 << 20;
/// Suggested limit for client → server messages.
pub const DEFAULT_CLIENT_LIMIT: usize = 64 << 10;
/// Suggested limit for server → client messages.
pub const DEFAULT_SERVER_LIMIT: usize = 8 << 20;

/// The bincode configuration of the binary encoding: little endian, varint
/// integers, and a byte limit.
pub fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<HARD_LIMIT>()
}

/// Why a frame could not be decoded. [`DecodeError::kind`] is a stable name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The frame is longer than the limit.
    #[error("message of {len} bytes exceeds the limit of {limit}")]
    TooLarge { len: usize, limit: usize },
    /// Bytes left over after one message.
    #[error("{extra} trailing bytes after the message")]
    TrailingBytes { extra: usize },
    /// The frame ends inside the message.
    #[error("message is truncated")]
    UnexpectedEnd,
    /// Anything else wrong with a binary frame.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// A JSON frame that does not parse as a message.
    #[error("invalid JSON message: {0}")]
    Json(String),
}

impl DecodeError {
    /// `too_large`, `trailing_bytes`, `unexpected_end`, `malformed` or `json`.
    pub fn kind(&self) -> &'static str {
        match self {
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::TrailingBytes { .. } => "trailing_bytes",
            DecodeError::UnexpectedEnd => "unexpected_end",
            DecodeError::Malformed(_) => "malformed",
            DecodeError::Json(_) => "json",
        }
    }
}

/// Encodes a message (`ClientMsg` or `ServerMsg`) for a binary frame.
pub fn encode_binary<T: Serialize>(msg: &T) -> Result<Vec<u8>, EncodeError> {
    bincode::serde::encode_to_vec(msg, bincode_config()).map_err(|e| EncodeError::Serialize(e.to_string()))
}

/// Decodes exactly one message from a binary frame of at most `limit` bytes.
pub fn decode_binary<T: DeserializeOwned>(bytes: &[u8], limit: usize) -> Result<T, DecodeError> {
    let limit = limit.min(HARD_LIMIT);
    if bytes.len() > limit {
        return Err(DecodeError::TooLarge { len: bytes.len(), limit });
    }
    let (msg, used) = bincode::serde::decode_from_slice(bytes, bincode_config()).map_err(|e| match e {
        bincode::error::DecodeError::UnexpectedEnd { .. } => DecodeError::UnexpectedEnd,
        // The frame is within the limit, so a claim beyond the limit is a
        // length prefix pointing past the end of the frame.
        bincode::error::DecodeError::LimitExceeded => DecodeError::UnexpectedEnd,
        other => DecodeError::Malformed(other.to_string()),
    })?;
    match bytes.len() - used {
        0 => Ok(msg),
        extra => Err(DecodeError::TrailingBytes { extra }),
    }
}

/// The `protocol_version` of a binary frame that starts like a `Hello` (message index 0, then
/// the version as a bincode varint), whether or not the rest decodes: so a server can answer
/// `unsupported_version` to a client of another version whose `Hello` has other fields.
pub fn peek_hello_version(bytes: &[u8]) -> Option<u16> {
    match bytes {
        [0, v, ..] if *v < 251 => Some(u16::from(*v)),
        [0, 251, lo, hi, ..] => Some(u16::from_le_bytes([*lo, *hi])),
        _ => None,
    }
}

/// Decodes a batched binary frame (`/ws?batch=1`, PROTOCOL.md §2): one or more messages back
/// to back, the frame at most `limit` bytes; each message comes with its encoded length. Any
/// malformed message fails the whole frame.
pub fn decode_binary_batch<T: DeserializeOwned>(bytes: &[u8], limit: usize) -> Result<Vec<(T, usize)>, DecodeError> {
    let limit = limit.min(HARD_LIMIT);
    if bytes.len() > limit {
        return Err(DecodeError::TooLarge { len: bytes.len(), limit });
    }
    if bytes.is_empty() {
        return Err(DecodeError::UnexpectedEnd);
    }
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let (msg, used) = decode_binary_first(rest)?;
        // Every message takes at least one byte, so this ends.
        rest = rest.get(used.max(1)..).unwrap_or(&[]);
        out.push((msg, used));
    }
    Ok(out)
}

/// Decodes the message at the start of `bytes`, a batched frame's rest (the frame's size
/// already checked against its limit), and returns it with its encoded length: where the next
/// message starts.
pub fn decode_binary_first<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, usize), DecodeError> {
    bincode::serde::decode_from_slice(bytes, bincode_config()).map_err(|e| match e {
        bincode::error::DecodeError::UnexpectedEnd { .. } | bincode::error::DecodeError::LimitExceeded => DecodeError::UnexpectedEnd,
        other => DecodeError::Malformed(other.to_string()),
    })
}

/// Encodes a message for a text frame.
pub fn encode_json<T: Serialize>(msg: &T) -> Result<String, EncodeError> {
    serde_json::to_string(msg).map_err(|e| EncodeError::Serialize(e.to_string()))
}

/// Decodes one message from a text frame of at most `limit` bytes
/// (surrounding whitespace allowed, nothing else).
pub fn decode_json<T: DeserializeOwned>(text: &str, limit: usize) -> Result<T, DecodeError> {
    let limit = limit.min(HARD_LIMIT);
    if text.len() > limit {
        return Err(DecodeError::TooLarge { len: text.len(), limit });
    }
    serde_json::from_str(text).map_err(|e| DecodeError::Json(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{ClientMsg, Ping, ServerMsg};

    #[test]
    fn a_batch_decodes_every_message_and_rejects_a_truncated_tail() {
        let msgs = [ServerMsg::Pong(crate::messages::Pong { request_id: 1, server_tick: 2 }), ServerMsg::Pong(crate::messages::Pong { request_id: 300, server_tick: 1 << 40 })];
        let mut frame = Vec::new();
        for m in &msgs {
            frame.extend(encode_binary(m).unwrap());
        }
        let sizes = msgs.iter().map(|m| encode_binary(m).unwrap().len());
        let want: Vec<(ServerMsg, usize)> = msgs.iter().cloned().zip(sizes).collect();
        assert_eq!(decode_binary_batch::<ServerMsg>(&frame, 1 << 20).unwrap(), want);
        // A single message is a batch of one.
        let one = encode_binary(&msgs[0]).unwrap();
        assert_eq!(decode_binary_batch::<ServerMsg>(&one, 1 << 20).unwrap(), vec![(msgs[0].clone(), one.len())]);
        assert_eq!(decode_binary_batch::<ServerMsg>(&frame[..frame.len() - 1], 1 << 20), Err(DecodeError::UnexpectedEnd));
        assert_eq!(decode_binary_batch::<ServerMsg>(&[], 1 << 20), Err(DecodeError::UnexpectedEnd));
        assert!(matches!(decode_binary_batch::<ServerMsg>(&frame, 3), Err(DecodeError::TooLarge { .. })));
    }

    #[test]
    fn binary_rejects_trailing_truncated_and_oversized() {
        let m = ClientMsg::Ping(Ping { request_id: 300 });
        let mut b = encode_binary(&m).unwrap();
        assert_eq!(b, [10, 251, 44, 1]);
        assert_eq!(decode_binary::<ClientMsg>(&b, 64).unwrap(), m);
        assert_eq!(decode_binary::<ClientMsg>(&b, 3).unwrap_err().kind(), "too_large");
        assert_eq!(decode_binary::<ClientMsg>(&b[..3], 64).unwrap_err(), DecodeError::UnexpectedEnd);
        b.push(0);
        assert_eq!(decode_binary::<ClientMsg>(&b, 64).unwrap_err(), DecodeError::TrailingBytes { extra: 1 });
        assert_eq!(decode_binary::<ClientMsg>(&[99], 64).unwrap_err().kind(), "malformed");
        assert_eq!(decode_binary::<ServerMsg>(&[], 64).unwrap_err().kind(), "unexpected_end");
    }

    #[test]
    fn json_rejects_trailing_garbage() {
        let m: ClientMsg = decode_json(r#" {"type":"ping","request_id":1} "#, 100).unwrap();
        assert_eq!(m.request_id(), Some(1));
        assert_eq!(decode_json::<ClientMsg>(r#"{"type":"ping","request_id":1} x"#, 100).unwrap_err().kind(), "json");
        assert_eq!(decode_json::<ClientMsg>(r#"{"type":"ping","request_id":1}"#, 5).unwrap_err().kind(), "too_large");
        assert_eq!(encode_json(&m).unwrap(), r#"{"type":"ping","request_id":1}"#);
    }
}

#[cfg(test)]
mod peek_tests {
    use super::*;
    use crate::{ClientMsg, Encoding, Hello};

    #[test]
    fn peek_hello_version_reads_any_hello() {
        for v in [0u16, 2, 3, 250, 251, 999, u16::MAX] {
            let h = ClientMsg::Hello(Hello { protocol_version: v, token: None, encoding: Encoding::Binary, resume: None });
            assert_eq!(peek_hello_version(&encode_binary(&h).unwrap()), Some(v));
        }
        // A version-2 Hello (no `resume`): the version still reads.
        assert_eq!(peek_hello_version(&[0, 2, 0, 0]), Some(2));
        let p = ClientMsg::Ping(crate::Ping { request_id: 0 });
        assert_eq!(peek_hello_version(&encode_binary(&p).unwrap()), None);
        assert_eq!(peek_hello_version(&[]), None);
    }
}
