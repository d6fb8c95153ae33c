//! WebSocket close codes a server of this protocol sends (PROTOCOL.md §2, "Closing"), with
//! what each means and what a client does about it. [`ALL`] is the table PROTOCOL.md prints.

/// The client closed first; the server answers its Close.
pub const NORMAL: u16 = 1000;
/// The server is shutting down (SIGTERM drain).
pub const GOING_AWAY: u16 = 1001;
/// A policy violation: no `Hello` in time, an unsupported protocol version, too many malformed
/// messages, a WebSocket protocol violation, or the server's session table is full.
pub const POLICY: u16 = 1008;
/// A message or frame larger than `Welcome.max_message_bytes`.
pub const TOO_BIG: u16 = 1009;
/// Refused at `Hello`: a bad token or resume token, or the player's connection or session quota.
pub const UNAUTHORIZED: u16 = 4001;
/// The player was kicked by an operator (`DELETE /worlds/{w}/players/{id}`).
pub const KICKED: u16 = 4003;
/// Slow consumer: a write to the client stayed blocked past the server's write timeout.
pub const SLOW: u16 = 4008;
/// Too many requests: the client kept sending past its rate limit.
pub const RATE: u16 = 4029;

/// One close code: its number, constant name, when the server sends it, and what a client does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseCode {
    /// The WebSocket close code.
    pub code: u16,
    /// The constant's name in this module.
    pub name: &'static str,
    /// When the server sends it.
    pub when: &'static str,
    /// What a client should do.
    pub client: &'static str,
}

/// Every close code the server sends, in numeric order.
pub const ALL: &[CloseCode] = &[
    CloseCode { code: NORMAL, name: "NORMAL", when: "answer to the client's own Close", client: "nothing" },
    CloseCode { code: GOING_AWAY, name: "GOING_AWAY", when: "the server is shutting down", client: "reconnect with backoff and resume the session" },
    CloseCode {
        code: POLICY,
        name: "POLICY",
        when: "no `Hello` within the Hello timeout; `unsupported_version`; more malformed messages, or commands before `Hello`, than allowed; a WebSocket protocol violation; the session table is full",
        client: "fix what the preceding `Error` names; a full session table: retry later",
    },
    CloseCode { code: TOO_BIG, name: "TOO_BIG", when: "a message or frame over `Welcome.max_message_bytes`", client: "send smaller messages" },
    CloseCode {
        code: UNAUTHORIZED,
        name: "UNAUTHORIZED",
        when: "`Hello` refused: bad or expired token or resume token, or the player's connection or session quota (an `Error` says which first)",
        client: "get a new token; do not retry with the same one",
    },
    CloseCode { code: KICKED, name: "KICKED", when: "an operator kicked the player", client: "do not reconnect automatically" },
    CloseCode { code: SLOW, name: "SLOW", when: "a send to the client stayed blocked past the write timeout (slow consumer)", client: "reconnect and resume; read faster or subscribe less" },
    CloseCode { code: RATE, name: "RATE", when: "the client kept sending past its command or ping rate limit", client: "reconnect later and send less" },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_code_once_in_order() {
        let codes: Vec<u16> = ALL.iter().map(|c| c.code).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted);
        assert_eq!(codes, [NORMAL, GOING_AWAY, POLICY, TOO_BIG, UNAUTHORIZED, KICKED, SLOW, RATE]);
    }
}
