//! The WebSocket byte layer under `/ws` (RFC 6455): the opening handshake, server frames written
//! by hand, and client frames read by tungstenite.
//!
//! Why by hand: a server frame is not masked, so a message's frame is its payload behind a
//! 2-to-10-byte head, and the payload — often a `cells` message shared by every subscriber of
//! the same cells — is handed to the kernel as it is (a vectored write with the head, or the
//! fan-out's one buffer per rectangle), never copied into a per-connection buffer. The read side
//! is tungstenite's, over the socket's read half: it unmasks, reassembles fragments, checks UTF-8
//! and sizes. Its own writes (the automatic pong and close echo) go nowhere; the send task
//! answers pings and closes itself (see `ws.rs`).
//!
//! **Invariant:** only whole frames reach the socket, in order: the send task and the world's
//! fan-out writer both write through the connection's one [`TcpOut`], whose queue goes first.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::{HeaderMap, HeaderValue, header};
use bytes::Bytes;
use steer_proto::Encoding;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Text frame opcode.
pub const OP_TEXT: u8 = 0x1;
/// Binary frame opcode.
pub const OP_BINARY: u8 = 0x2;
/// Close frame opcode.
pub const OP_CLOSE: u8 = 0x8;
/// Pong frame opcode.
pub const OP_PONG: u8 = 0xA;

/// Most slices handed to one `writev` (Linux refuses more than `IOV_MAX` = 1024).
const MAX_IOV: usize = 256;

/// The head of an unmasked, final server frame: FIN + opcode, then the payload length in 7, 16
/// or 64 bits (RFC 6455 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    bytes: [u8; 10],
    len: u8,
}

impl Head {
    /// The head of a frame of `op` carrying `payload` bytes.
    pub fn new(op: u8, payload: usize) -> Head {
        let mut bytes = [0u8; 10];
        bytes[0] = 0x80 | (op & 0x0F);
        let len = if payload < 126 {
            bytes[1] = payload as u8;
            2
        } else if let Ok(n) = u16::try_from(payload) {
            bytes[1] = 126;
            bytes[2..4].copy_from_slice(&n.to_be_bytes());
            4
        } else {
            bytes[1] = 127;
            bytes[2..10].copy_from_slice(&(payload as u64).to_be_bytes());
            10
        };
        Head { bytes, len }
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Largest batched WebSocket message the server builds; a batch beyond it is split (a single
/// larger message still goes alone).
const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Queues `batch` as WebSocket messages: with `combine`, runs of binary messages go as one
/// message each (up to [`MAX_BATCH_BYTES`], parts uncopied); everything else one message per
/// item. A JSON item that is not UTF-8 (never made by the encoder) is dropped.
pub fn queue_messages(batch: Vec<(Bytes, Encoding)>, combine: bool, out: &mut Frames) {
    let mut run: Vec<Bytes> = Vec::new();
    let mut run_bytes = 0;
    for (b, e) in batch {
        match e {
            Encoding::Json => {
                out.push(OP_BINARY, &mut run);
                run_bytes = 0;
                if std::str::from_utf8(&b).is_ok() {
                    out.push_one(OP_TEXT, b);
                }
            }
            Encoding::Binary if !combine => out.push_one(OP_BINARY, b),
            Encoding::Binary => {
                if run_bytes + b.len() > MAX_BATCH_BYTES {
                    out.push(OP_BINARY, &mut run);
                    run_bytes = 0;
                }
                run_bytes += b.len();
                run.push(b);
            }
        }
    }
    out.push(OP_BINARY, &mut run);
}

/// Messages queued for one write: each a head and its payload's parts, back to back.
#[derive(Debug, Default)]
pub struct Frames {
    segs: Vec<Seg>,
    bytes: usize,
    messages: usize,
}

#[derive(Debug, Clone)]
enum Seg {
    Head(Head),
    Body(Bytes),
}

impl Frames {
    /// Adds one message of `op` whose payload is `parts` concatenated (moved, uncopied); none
    /// when `parts` is empty.
    pub fn push(&mut self, op: u8, parts: &mut Vec<Bytes>) {
        if parts.is_empty() {
            return;
        }
        let len = parts.iter().map(Bytes::len).sum();
        self.segs.push(Seg::Head(Head::new(op, len)));
        self.segs.extend(parts.drain(..).filter(|p| !p.is_empty()).map(Seg::Body));
        self.bytes += len;
        self.messages += 1;
    }

    /// Adds one message of `op` with this payload.
    pub fn push_one(&mut self, op: u8, payload: Bytes) {
        self.segs.push(Seg::Head(Head::new(op, payload.len())));
        self.bytes += payload.len();
        self.messages += 1;
        if !payload.is_empty() {
            self.segs.push(Seg::Body(payload));
        }
    }

    /// Adds a close frame: the code, then the reason (at most 123 bytes, as RFC 6455 allows).
    pub fn close(&mut self, code: u16, reason: &str) {
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let mut payload = Vec::with_capacity(2 + end);
        payload.extend_from_slice(&code.to_be_bytes());
        payload.extend_from_slice(&reason.as_bytes()[..end]);
        self.push_one(OP_CLOSE, Bytes::from(payload));
    }

    /// The frames as one buffer: what goes on the wire, heads and bodies back to back (made
    /// once, for a message many sockets are sent).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.segs.iter().map(|s| s.bytes().len()).sum());
        for s in &self.segs {
            out.extend_from_slice(s.bytes());
        }
        Bytes::from(out)
    }

    /// Payload bytes queued (heads not counted).
    pub fn payload_bytes(&self) -> usize {
        self.bytes
    }

    /// Messages queued.
    pub fn messages(&self) -> usize {
        self.messages
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Forgets what is queued.
    pub fn clear(&mut self) {
        self.segs.clear();
        self.bytes = 0;
        self.messages = 0;
    }
}

impl Seg {
    fn bytes(&self) -> &[u8] {
        match self {
            Seg::Head(h) => h.as_bytes(),
            Seg::Body(b) => b,
        }
    }

    /// Drops its first `n` bytes (fewer than it has).
    fn advance(&mut self, n: usize) {
        match self {
            Seg::Head(h) => *self = Seg::Body(Bytes::copy_from_slice(&h.as_bytes()[n..])),
            Seg::Body(b) => bytes::Buf::advance(b, n),
        }
    }
}

/// Drops the first `n` bytes of `queued` (written).
fn consume(queued: &mut Vec<Seg>, mut n: usize) {
    let mut done = 0;
    for seg in queued.iter_mut() {
        let len = seg.bytes().len();
        if n < len {
            seg.advance(n);
            break;
        }
        n -= len;
        done += 1;
    }
    queued.drain(..done);
}

/// A TCP socket's write half that more than one task may write to, whole frames at a time:
/// the connection's send task, and the world's fan-out writer (`fanout.rs`) while the
/// connection is one of its steady subscribers. What a write could not write at once stays
/// queued here, in order, and every writer writes after it. Bounded without a setting of its
/// own: the send task adds a batch only once the last one is written (under the write timeout),
/// and the fan-out offers a member a message only while nothing is queued (a member whose socket
/// does not take it whole goes back to its send task), so it holds at most a batch, a frame's
/// message and a close frame.
pub struct TcpOut {
    half: tokio::net::tcp::OwnedWriteHalf,
    queued: std::sync::Mutex<Vec<Seg>>,
}

impl TcpOut {
    /// Queues `frames` (which it takes, leaving it empty; payloads uncopied) behind what an
    /// earlier write left, and writes what it can now, without waiting: `Ok(true)` if all is
    /// written, `Ok(false)` if some stays queued for [`TcpOut::flush`].
    pub fn offer(&self, frames: &mut Frames) -> std::io::Result<bool> {
        let Ok(mut q) = self.queued.lock() else { return Err(std::io::Error::other("writer poisoned")) };
        q.append(&mut frames.segs);
        frames.clear();
        self.drain(&mut q)
    }

    /// Writes from the queue until it is empty (`Ok(true)`) or the socket would block.
    fn drain(&self, q: &mut Vec<Seg>) -> std::io::Result<bool> {
        while !q.is_empty() {
            let iov: Vec<IoSlice<'_>> = q.iter().take(MAX_IOV).map(|s| IoSlice::new(s.bytes())).collect();
            let n = match self.half.try_write_vectored(&iov) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            };
            drop(iov);
            consume(q, n);
        }
        Ok(true)
    }

    /// Sends `wire` (whole frames, as [`Frames::to_bytes`] makes them) now, without waiting,
    /// by one `send`: `Ok(true)` if it is all written, `Ok(false)` if some of it (or what an
    /// earlier write left) stays queued for [`TcpOut::flush`].
    pub fn offer_bytes(&self, wire: &Bytes) -> std::io::Result<bool> {
        let Ok(mut q) = self.queued.lock() else { return Err(std::io::Error::other("writer poisoned")) };
        if !q.is_empty() {
            q.push(Seg::Body(wire.clone()));
            return Ok(false);
        }
        let n = match self.send_now(wire) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if n == wire.len() {
            return Ok(true);
        }
        q.push(Seg::Body(wire.slice(n..)));
        Ok(false)
    }

    /// One non-blocking `send(2)`: no `writev` and file-position machinery of `write(2)`, and
    /// no look at tokio's readiness of the socket (a cache miss per socket and tick). A
    /// would-block leaves that readiness stale, which is harmless: [`TcpOut::flush`] then
    /// writes through tokio, whose own would-block clears it before it waits.
    #[cfg(target_os = "linux")]
    fn send_now(&self, buf: &[u8]) -> std::io::Result<usize> {
        use rustix::net::SendFlags;
        let tcp: &tokio::net::TcpStream = self.half.as_ref();
        rustix::net::send(tcp, buf, SendFlags::DONTWAIT | SendFlags::NOSIGNAL).map_err(std::io::Error::from)
    }

    #[cfg(not(target_os = "linux"))]
    fn send_now(&self, buf: &[u8]) -> std::io::Result<usize> {
        self.half.try_write(buf)
    }

    /// Nothing is queued.
    pub fn idle(&self) -> bool {
        self.queued.lock().is_ok_and(|q| q.is_empty())
    }

    /// Writes what is queued, waiting for the socket as needed. Cancel-safe.
    pub async fn flush(&self) -> std::io::Result<()> {
        loop {
            {
                let Ok(mut q) = self.queued.lock() else { return Err(std::io::Error::other("writer poisoned")) };
                if self.drain(&mut q)? {
                    return Ok(());
                }
            }
            self.half.writable().await?;
        }
    }
}

enum Out {
    Tcp(std::sync::Arc<TcpOut>),
    Any { io: Box<dyn AsyncWrite + Send + Unpin>, queued: Vec<Seg> },
}

/// The connection's writer, with the frames written by hand. What a write has not yet written
/// stays queued in it, so a write cut short (by a timeout dropping its future) leaves no half
/// frame behind: the next write, a close frame say, finishes it first.
pub struct Writer {
    out: Out,
}

impl Writer {
    /// Over a TCP socket's write half, which the world's fan-out may share (see [`TcpOut`]).
    pub fn tcp(half: tokio::net::tcp::OwnedWriteHalf) -> Self {
        Writer { out: Out::Tcp(std::sync::Arc::new(TcpOut { half, queued: std::sync::Mutex::new(Vec::new()) })) }
    }

    /// Over any other write half (never shared).
    pub fn new(io: Box<dyn AsyncWrite + Send + Unpin>) -> Self {
        Writer { out: Out::Any { io, queued: Vec::new() } }
    }

    /// The shareable socket, if it is one.
    pub fn shared(&self) -> Option<&std::sync::Arc<TcpOut>> {
        match &self.out {
            Out::Tcp(t) => Some(t),
            Out::Any { .. } => None,
        }
    }

    /// Writes what an earlier write left, then every frame of `frames` (which it takes, leaving
    /// it empty), in order, by vectored writes. Cancel-safe: dropped at any await, nothing is
    /// written twice or lost from the queue.
    pub async fn write(&mut self, frames: &mut Frames) -> std::io::Result<()> {
        match &mut self.out {
            Out::Tcp(t) => {
                if t.offer(frames)? {
                    return Ok(());
                }
                t.flush().await
            }
            Out::Any { io, queued } => {
                queued.append(&mut frames.segs);
                frames.clear();
                while !queued.is_empty() {
                    let iov: Vec<IoSlice<'_>> = queued.iter().take(MAX_IOV).map(|s| IoSlice::new(s.bytes())).collect();
                    let n = io.write_vectored(&iov).await?;
                    drop(iov);
                    if n == 0 {
                        return Err(std::io::ErrorKind::WriteZero.into());
                    }
                    consume(queued, n);
                }
                io.flush().await
            }
        }
    }
}

/// The read half as tungstenite's stream: reads from the socket; writes (tungstenite's
/// automatic pong and close echo) are dropped, since only whole frames of [`Writer`] and the
/// fan-out may reach the socket.
pub struct ReadSide {
    io: Box<dyn AsyncRead + Send + Unpin>,
}

impl ReadSide {
    /// Over a read half.
    pub fn new(io: Box<dyn AsyncRead + Send + Unpin>) -> Self {
        ReadSide { io }
    }
}

impl AsyncRead for ReadSide {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for ReadSide {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The client's read stream.
pub type Reader = tokio_tungstenite::WebSocketStream<ReadSide>;

/// Why a request is not a WebSocket opening handshake (names the header).
pub fn check_handshake(method: &axum::http::Method, headers: &HeaderMap) -> Result<HeaderValue, String> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers.get_all(&name).iter().any(|v| v.to_str().is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token))))
    };
    if method != axum::http::Method::GET {
        return Err(format!("method: a WebSocket upgrade is a GET, not {method}"));
    }
    if !has_token(header::CONNECTION, "upgrade") {
        return Err("connection: expected a header with the token `upgrade`".into());
    }
    if !has_token(header::UPGRADE, "websocket") {
        return Err("upgrade: expected `websocket`".into());
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION).is_none_or(|v| v.as_bytes() != b"13") {
        return Err("sec-websocket-version: expected 13".into());
    }
    match headers.get(header::SEC_WEBSOCKET_KEY) {
        Some(k) if !k.is_empty() => Ok(k.clone()),
        _ => Err("sec-websocket-key: missing".into()),
    }
}

/// The `101 Switching Protocols` answer to a handshake with this key.
pub fn switching(key: &HeaderValue) -> axum::response::Response {
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut r = axum::response::Response::new(axum::body::Body::empty());
    *r.status_mut() = axum::http::StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    r
}

/// The upgraded connection split into tungstenite's reader and the hand-written frames' writer.
/// A `TcpStream` (the server's own accept loop) is split into its owned halves; anything else
/// through `tokio::io::split`.
pub async fn open(upgraded: hyper::upgrade::Upgraded, max_message: usize) -> (Reader, Writer) {
    use hyper_util::rt::TokioIo;
    let (read, writer, prefix): (Box<dyn AsyncRead + Send + Unpin>, Writer, Vec<u8>) = match upgraded.downcast::<TokioIo<tokio::net::TcpStream>>() {
        Ok(parts) => {
            let (r, w) = parts.io.into_inner().into_split();
            (Box::new(r), Writer::tcp(w), parts.read_buf.to_vec())
        }
        Err(upgraded) => {
            let (r, w) = tokio::io::split(TokioIo::new(upgraded));
            (Box::new(r), Writer::new(Box::new(w)), Vec::new())
        }
    };
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message))
        .read_buffer_size(4096);
    let role = tokio_tungstenite::tungstenite::protocol::Role::Server;
    let reader = tokio_tungstenite::WebSocketStream::from_partially_read(ReadSide::new(read), prefix, role, Some(config)).await;
    (reader, writer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::Role;

    #[test]
    fn heads_by_payload_length() {
        assert_eq!(Head::new(OP_BINARY, 0).as_bytes(), &[0x82, 0]);
        assert_eq!(Head::new(OP_TEXT, 125).as_bytes(), &[0x81, 125]);
        assert_eq!(Head::new(OP_BINARY, 126).as_bytes(), &[0x82, 126, 0, 126]);
        assert_eq!(Head::new(OP_BINARY, 65_535).as_bytes(), &[0x82, 126, 0xFF, 0xFF]);
        assert_eq!(Head::new(OP_BINARY, 65_536).as_bytes(), &[0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(Head::new(OP_CLOSE, 2).as_bytes(), &[0x88, 2]);
    }

    #[test]
    fn close_reason_is_cut_at_a_char_boundary() {
        let mut f = Frames::default();
        f.close(4008, &"é".repeat(100));
        // 2 code bytes + 122 bytes of reason (61 two-byte chars; 123 would split one).
        assert_eq!(f.payload_bytes(), 124);
        assert_eq!(f.messages(), 1);
    }

    /// What the writer writes, a client (tungstenite, client role) reads back as the messages
    /// queued: parts concatenated, every length form, text, close.
    #[tokio::test]
    async fn a_client_reads_back_what_the_writer_wrote() {
        let (server, client) = tokio::io::duplex(1 << 20);
        let (_r, w) = tokio::io::split(server);
        let mut writer = Writer::new(Box::new(w));
        let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let mut frames = Frames::default();
        let mut parts = vec![Bytes::from_static(b"ab"), Bytes::new(), Bytes::from_static(b"cd")];
        frames.push(OP_BINARY, &mut parts);
        assert!(parts.is_empty());
        frames.push(OP_BINARY, &mut parts);
        frames.push_one(OP_TEXT, Bytes::from_static(br#"{"type":"pong"}"#));
        frames.push_one(OP_BINARY, Bytes::from(vec![7u8; 300]));
        frames.push_one(OP_BINARY, Bytes::from(big.clone()));
        frames.push_one(OP_BINARY, Bytes::new());
        frames.close(4008, "slow consumer");
        assert_eq!(frames.messages(), 6);
        writer.write(&mut frames).await.unwrap();
        assert!(frames.is_empty());
        let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(client, Role::Client, None).await;
        let mut got = Vec::new();
        while let Some(Ok(m)) = ws.next().await {
            let end = matches!(m, Message::Close(_));
            got.push(m);
            if end {
                break;
            }
        }
        assert_eq!(got.len(), 6);
        assert_eq!(got[0], Message::Binary(Bytes::from_static(b"abcd")));
        assert_eq!(got[1], Message::Text(r#"{"type":"pong"}"#.into()));
        assert_eq!(got[2], Message::Binary(Bytes::from(vec![7u8; 300])));
        assert_eq!(got[3], Message::Binary(Bytes::from(big)));
        assert_eq!(got[4], Message::Binary(Bytes::new()));
        match &got[5] {
            Message::Close(Some(c)) => {
                assert_eq!(u16::from(c.code), 4008);
                assert_eq!(c.reason.as_str(), "slow consumer");
            }
            other => panic!("expected a close, got {other:?}"),
        }
    }

    /// More slices than one `writev` takes still go out whole and in order.
    #[tokio::test]
    async fn many_slices_are_written_in_several_calls() {
        let (server, mut client) = tokio::io::duplex(1 << 20);
        let (r, w) = tokio::io::split(server);
        let mut writer = Writer::new(Box::new(w));
        let mut frames = Frames::default();
        for i in 0..1000u32 {
            frames.push_one(OP_BINARY, Bytes::from(i.to_le_bytes().to_vec()));
        }
        writer.write(&mut frames).await.unwrap();
        drop(writer);
        drop(r);
        let mut all = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut client, &mut all).await.unwrap();
        assert_eq!(all.len(), 1000 * 6);
        for (i, f) in all.chunks(6).enumerate() {
            assert_eq!(f[..2], [0x82, 4]);
            assert_eq!(f[2..], (i as u32).to_le_bytes());
        }
    }

    /// The socket shared by a send task and a fan-out writer: offers that the kernel does not
    /// take whole stay queued, later offers queue behind them, and a flush delivers every
    /// frame whole and in order (the client, reading only later, decodes each).
    #[tokio::test]
    async fn offers_the_socket_does_not_take_queue_in_order_and_flush() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        // Small buffers, as the server sets them (`limits.socket_send_buffer_bytes`).
        rustix::net::sockopt::set_socket_send_buffer_size(&server, 16 * 1024).unwrap();
        rustix::net::sockopt::set_socket_recv_buffer_size(&client, 16 * 1024).unwrap();
        let (_r, w) = server.into_split();
        let writer = Writer::tcp(w);
        let out = writer.shared().unwrap().clone();
        // 40 messages of 64 KiB: more than loopback buffers hold while nobody reads.
        let msgs: Vec<Bytes> = (0..40u8).map(|i| Bytes::from(vec![i; 64 * 1024])).collect();
        let mut queued_at = None;
        for (i, b) in msgs.iter().enumerate() {
            let mut f = Frames::default();
            if i % 2 == 0 {
                f.push_one(OP_BINARY, b.clone());
                let whole = out.offer_bytes(&f.to_bytes()).unwrap();
                queued_at = queued_at.or((!whole).then_some(i));
            } else {
                f.push_one(OP_BINARY, b.clone());
                let whole = out.offer(&mut f).unwrap();
                queued_at = queued_at.or((!whole).then_some(i));
            }
        }
        let at = queued_at.expect("the socket stopped taking whole messages");
        assert!(!out.idle(), "something is queued");
        let reader = tokio::spawn(async move {
            let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(client, Role::Client, None).await;
            let mut got = Vec::new();
            while got.len() < 40 {
                match ws.next().await {
                    Some(Ok(Message::Binary(b))) => got.push(b),
                    other => panic!("expected a binary message, got {other:?}"),
                }
            }
            got
        });
        out.flush().await.unwrap();
        assert!(out.idle());
        let got = reader.await.unwrap();
        assert_eq!(got, msgs, "every message whole and in order (queueing began at message {at})");
    }

    #[test]
    fn handshake_checks_name_the_header() {
        let get = axum::http::Method::GET;
        let mut h = HeaderMap::new();
        assert!(check_handshake(&get, &h).unwrap_err().starts_with("connection"));
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, Upgrade"));
        assert!(check_handshake(&get, &h).unwrap_err().starts_with("upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        assert!(check_handshake(&get, &h).unwrap_err().starts_with("sec-websocket-version"));
        h.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        assert!(check_handshake(&get, &h).unwrap_err().starts_with("sec-websocket-key"));
        h.insert(header::SEC_WEBSOCKET_KEY, HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="));
        assert!(check_handshake(&get, &h).is_ok());
        assert!(check_handshake(&axum::http::Method::POST, &h).unwrap_err().starts_with("method"));
        // RFC 6455 §1.3's example key and accept.
        let r = switching(&h[header::SEC_WEBSOCKET_KEY]);
        assert_eq!(r.status(), axum::http::StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(r.headers()[header::SEC_WEBSOCKET_ACCEPT], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }
}
