//! The byte-level writer and reader ([`Enc`], [`Dec`]) that the sim's binary forms are made of:
//! commands in a recording and behaviours in a saved world (`codec.rs`), the navigation grid,
//! its flow fields and portals (`nav/`), and the rest of a world's saved state (`world/save.rs`).
//!
//! Integers are LEB128 varints, floats their exact little-endian bits (so a replay applies
//! bit-identical commands), strings a varint length and UTF-8. Imports nothing of the sim.

use glam::Vec2;

/// Most elements a decoded list may have (a corrupt length never allocates more).
pub const MAX_LIST: usize = 1 << 20;

/// Why bytes do not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed at byte {at}: {what}")]
pub struct DecodeError {
    /// Offset in the buffer being decoded.
    pub at: usize,
    /// What was wrong.
    pub what: String,
}

/// Appends encoded values to a buffer.
#[derive(Debug, Default)]
pub struct Enc {
    /// The bytes so far.
    pub buf: Vec<u8>,
}

impl Enc {
    /// LEB128 varint.
    pub fn u64(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(b);
                return;
            }
            self.buf.push(b | 0x80);
        }
    }
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Exact bits.
    pub fn f32(&mut self, v: f32) {
        self.buf.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    /// Fixed 8 bytes.
    pub fn fixed64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Fixed 4 bytes.
    pub fn fixed32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Length-prefixed UTF-8.
    pub fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
    }
    pub fn vec2(&mut self, v: Vec2) {
        self.f32(v.x);
        self.f32(v.y);
    }
    pub fn opt_f32(&mut self, v: Option<f32>) {
        match v {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                self.f32(x);
            }
        }
    }
    pub fn opt_vec2(&mut self, v: Option<Vec2>) {
        match v {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                self.vec2(x);
            }
        }
    }
}

/// Reads encoded values from a buffer.
#[derive(Debug)]
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Self {
        Dec { buf, pos: 0 }
    }
    /// True when every byte was read.
    pub fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }
    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// The next `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        self.take(n)
    }
    /// An error at the current offset.
    pub fn err(&self, what: impl Into<String>) -> DecodeError {
        DecodeError { at: self.pos, what: what.into() }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or_else(|| self.err("unexpected end"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    /// LEB128 varint.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err("varint longer than 10 bytes"))
    }
    /// A varint that must fit a u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let v = self.u64()?;
        u32::try_from(v).map_err(|_| self.err(format!("{v} does not fit 32 bits")))
    }
    /// A list length (at most [`MAX_LIST`]).
    pub fn list_len(&mut self) -> Result<usize, DecodeError> {
        let v = self.u64()?;
        usize::try_from(v).ok().filter(|&n| n <= MAX_LIST).ok_or_else(|| self.err(format!("length {v} exceeds {MAX_LIST}")))
    }
    /// One byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    /// A 0/1 byte.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.err(format!("bool byte {b}"))),
        }
    }
    /// Exact bits.
    pub fn f32(&mut self) -> Result<f32, DecodeError> {
        let b = self.take(4)?;
        Ok(f32::from_bits(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
    }
    /// Fixed 8 bytes.
    pub fn fixed64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// Fixed 4 bytes.
    pub fn fixed32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Length-prefixed UTF-8.
    pub fn string(&mut self) -> Result<String, DecodeError> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| self.err("string too long"))?;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.err("string is not UTF-8"))
    }
    pub fn vec2(&mut self) -> Result<Vec2, DecodeError> {
        Ok(Vec2::new(self.f32()?, self.f32()?))
    }
    pub fn opt_f32(&mut self) -> Result<Option<f32>, DecodeError> {
        Ok(if self.bool()? { Some(self.f32()?) } else { None })
    }
    pub fn opt_vec2(&mut self) -> Result<Option<Vec2>, DecodeError> {
        Ok(if self.bool()? { Some(self.vec2()?) } else { None })
    }
    pub fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T, DecodeError>) -> Result<Vec<T>, DecodeError> {
        let n = self.list_len()?;
        let mut v = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            v.push(item(self)?);
        }
        Ok(v)
    }
}
