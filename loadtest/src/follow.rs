//! Following a world that moved to another server (a live handoff, protocol 11): the bot
//! reconnects to the `moved` message's URL and resumes its session there with its resume
//! token, so it keeps its agents; the new server's world id comes from its Welcome.

use std::time::Duration;

use anyhow::{Context, bail};
use steer_proto as proto;

use crate::bot::{BotConfig, connect_to};

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to `to` (a `ws://` or `wss://` URL), keeping the query of the swarm's URL
/// (`format=json`, `batch=1`), and resumes the session `resume`. A few quick retries: the new
/// server answers at once, but a refused connect costs the bot its world.
pub async fn follow(cfg: &BotConfig, to: &str, resume: Option<String>) -> anyhow::Result<(Ws, proto::Welcome)> {
    if !(to.starts_with("ws://") || to.starts_with("wss://")) {
        bail!("`moved.to` is not a ws:// or wss:// URL: {to}");
    }
    let url = match cfg.url.split_once('?') {
        Some((_, q)) if !to.contains('?') => format!("{to}?{q}"),
        _ => to.to_string(),
    };
    let mut last = None;
    for attempt in 0..3u32 {
        match tokio::time::timeout(cfg.connect_timeout, connect_to(cfg, &url, resume.clone())).await {
            Ok(Ok(x)) => return Ok(x),
            // A refused resume does not get better by retrying.
            Ok(Err(e)) if e.to_string().contains("refused Hello") => return Err(e),
            Ok(Err(e)) => last = Some(e),
            Err(_) => last = Some(anyhow::anyhow!("connect timed out after {:?}", cfg.connect_timeout)),
        }
        tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no attempt"))).with_context(|| format!("following the world to {url}"))
}
