//! steer-proto: the steerd wire protocol. See `PROTOCOL.md`.
