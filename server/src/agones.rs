//! Agones integration: talks to the Agones SDK sidecar over its HTTP API
//! (`http://127.0.0.1:$AGONES_SDK_HTTP_PORT`): `Ready` once the worlds are loaded, a `Health`
//! ping every `health_every`, labels with the world names and the player count, and `Shutdown`
//! when the server drains.
//!
//! The sidecar may start after the game server, so every call is retried with a bounded backoff.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Why an SDK call failed (after its retries).
#[derive(Debug, thiserror::Error)]
pub enum AgonesError {
    /// The sidecar could not be reached or answered an error status.
    #[error("Agones SDK call {path} failed: {reason}")]
    Call { path: String, reason: String },
}

/// A client of the Agones SDK sidecar's REST API.
#[derive(Debug, Clone)]
pub struct Agones {
    base: String,
    client: reqwest::Client,
    retries: u32,
}

/// Makes a value valid as a Kubernetes label value: at most 63 of `A-Z a-z 0-9 - _ .`,
/// starting and ending alphanumeric.
pub fn label_value(s: &str) -> String {
    let mut v: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).take(63).collect();
    while v.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        v.pop();
    }
    while v.starts_with(|c: char| !c.is_ascii_alphanumeric()) {
        v.remove(0);
    }
    v
}

impl Agones {
    /// A client for the sidecar at `http://127.0.0.1:{port}`.
    pub fn new(port: u16) -> Self {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap_or_default();
        Agones { base: format!("http://127.0.0.1:{port}"), client, retries: 10 }
    }

    /// The client the environment asks for: `AGONES_SDK_HTTP_PORT` (Agones sets it), or Agones'
    /// default port 9358 when `enabled` (`--agones`) and the variable is unset or not a port;
    /// `None` otherwise.
    pub fn from_env(enabled: bool) -> Option<Self> {
        match std::env::var("AGONES_SDK_HTTP_PORT").ok().and_then(|p| p.parse::<u16>().ok()) {
            Some(port) => Some(Agones::new(port)),
            None if enabled => Some(Agones::new(9358)),
            None => None,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: serde_json::Value) -> Result<(), AgonesError> {
        let mut delay = Duration::from_millis(100);
        let mut last = String::new();
        for _ in 0..=self.retries {
            match self.client.request(method.clone(), format!("{}{path}", self.base)).json(&body).send().await {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => last = format!("status {}", r.status()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
        Err(AgonesError::Call { path: path.to_string(), reason: last })
    }

    /// `POST /ready`.
    pub async fn ready(&self) -> Result<(), AgonesError> {
        self.call(reqwest::Method::POST, "/ready", serde_json::json!({})).await
    }

    /// `POST /health`.
    pub async fn health(&self) -> Result<(), AgonesError> {
        self.call(reqwest::Method::POST, "/health", serde_json::json!({})).await
    }

    /// `POST /shutdown`.
    pub async fn shutdown(&self) -> Result<(), AgonesError> {
        self.call(reqwest::Method::POST, "/shutdown", serde_json::json!({})).await
    }

    /// `PUT /metadata/label` (Agones prefixes the key with `agones.dev/sdk-`).
    pub async fn set_label(&self, key: &str, value: &str) -> Result<(), AgonesError> {
        self.call(reqwest::Method::PUT, "/metadata/label", serde_json::json!({"key": key, "value": label_value(value)})).await
    }
}

/// What the lifecycle task reports as labels.
pub trait LabelSource: Send + Sync + 'static {
    /// World names.
    fn worlds(&self) -> Vec<String>;
    /// Connected players.
    fn players(&self) -> u64;
}

/// Runs the Agones lifecycle: Ready now (the worlds are loaded), then Health every
/// `health_every` and labels when they change, until `cancel`; then Shutdown.
pub async fn lifecycle(agones: Agones, labels: impl LabelSource, health_every: Duration, cancel: CancellationToken) {
    if let Err(e) = agones.ready().await {
        tracing::error!("{e}");
    }
    let mut last: Option<(String, u64)> = None;
    let mut tick = tokio::time::interval(health_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        if let Err(e) = agones.health().await {
            tracing::warn!("{e}");
        }
        let now = (labels.worlds().join("."), labels.players());
        if last.as_ref() != Some(&now) {
            let ok = agones.set_label("worlds", &now.0).await.and(agones.set_label("players", &now.1.to_string()).await);
            match ok {
                Ok(()) => last = Some(now),
                Err(e) => tracing::warn!("{e}"),
            }
        }
    }
    if let Err(e) = agones.shutdown().await {
        tracing::error!("{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};

    #[test]
    fn label_values_are_made_valid() {
        assert_eq!(label_value("demo.arena"), "demo.arena");
        assert_eq!(label_value("a b/c"), "a_b_c");
        assert_eq!(label_value("-x-"), "x");
        assert_eq!(label_value(&"w".repeat(80)).len(), 63);
    }

    struct Fixed(Arc<Mutex<u64>>);
    impl LabelSource for Fixed {
        fn worlds(&self) -> Vec<String> {
            vec!["demo".into(), "arena".into()]
        }
        fn players(&self) -> u64 {
            self.0.lock().map(|p| *p).unwrap_or(0)
        }
    }

    /// A stand-in for the sidecar that records every call.
    async fn stand_in() -> (u16, Arc<Mutex<Vec<(String, String)>>>) {
        use axum::routing::{post, put};
        let calls: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let rec = |path: &'static str, calls: Arc<Mutex<Vec<(String, String)>>>| {
            move |body: String| {
                let calls = calls.clone();
                async move {
                    calls.lock().unwrap().push((path.to_string(), body));
                    "{}"
                }
            }
        };
        let app = axum::Router::new()
            .route("/ready", post(rec("/ready", calls.clone())))
            .route("/health", post(rec("/health", calls.clone())))
            .route("/shutdown", post(rec("/shutdown", calls.clone())))
            .route("/metadata/label", put(rec("/metadata/label", calls.clone())));
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        (port, calls)
    }

    #[tokio::test]
    async fn lifecycle_calls_ready_health_labels_and_shutdown_in_order() {
        let (port, calls) = stand_in().await;
        let cancel = CancellationToken::new();
        let players = Arc::new(Mutex::new(3));
        let task = tokio::spawn(lifecycle(Agones::new(port), Fixed(players.clone()), Duration::from_millis(50), cancel.clone()));
        // Waits (bounded: a hang, not a speed) until the stand-in has seen a call matching `seen`.
        let until = |seen: fn(&[(String, String)]) -> bool| {
            let calls = calls.clone();
            async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                while !seen(&calls.lock().unwrap()) {
                    assert!(tokio::time::Instant::now() < deadline, "the sidecar never saw the expected call: {:?}", calls.lock().unwrap());
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        until(|c| c.iter().any(|(p, b)| p == "/metadata/label" && b.contains(r#""value":"3""#))).await;
        *players.lock().unwrap() = 5;
        until(|c| c.iter().any(|(p, b)| p == "/metadata/label" && b.contains(r#""value":"5""#)) && c.iter().filter(|(p, _)| p == "/health").count() >= 3).await;
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
        let calls = calls.lock().unwrap().clone();
        let paths: Vec<&str> = calls.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(paths.first(), Some(&"/ready"));
        assert_eq!(paths.last(), Some(&"/shutdown"));
        assert!(paths.iter().filter(|p| **p == "/health").count() >= 3, "{paths:?}");
        let labels: Vec<&str> = calls.iter().filter(|c| c.0 == "/metadata/label").map(|c| c.1.as_str()).collect();
        assert!(labels.iter().any(|b| b.contains(r#""key":"worlds""#) && b.contains(r#""value":"demo.arena""#)), "{labels:?}");
        assert!(labels.iter().any(|b| b.contains(r#""value":"3""#)), "{labels:?}");
        assert!(labels.iter().any(|b| b.contains(r#""value":"5""#)), "players change is reported: {labels:?}");
    }

    /// A sidecar port that accepts every connection and closes it at once, counting them.
    fn closing_listener() -> (u16, Arc<AtomicU32>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicU32::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                // Counted before the close that the client sees as its call's failure.
                count.fetch_add(1, Ordering::SeqCst);
                drop(s);
            }
        });
        (port, accepted)
    }

    #[tokio::test]
    async fn unreachable_sidecar_fails_after_bounded_retries() {
        // retries = 2: the call and two retries, each on a fresh connection (a closed one is not
        // reused), then the error naming the call.
        let (port, attempts) = closing_listener();
        let mut a = Agones::new(port);
        a.retries = 2;
        let err = a.ready().await.expect_err("every connection is closed unanswered");
        assert_eq!(attempts.load(Ordering::SeqCst), 3, "attempts of a call with 2 retries ({err})");
        assert!(err.to_string().contains("Agones SDK call /ready failed"), "{err}");
    }

    #[tokio::test]
    async fn a_sidecar_that_answers_late_is_retried_until_it_succeeds() {
        use axum::http::StatusCode;
        // 503 twice, then 200: the third request succeeds, and no fourth is made.
        let hits = Arc::new(AtomicU32::new(0));
        let h = hits.clone();
        let app = axum::Router::new().route(
            "/ready",
            axum::routing::post(move || {
                let h = h.clone();
                async move { if h.fetch_add(1, Ordering::SeqCst) < 2 { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK } }
            }),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        let mut a = Agones::new(port);
        a.retries = 5;
        a.ready().await.expect("the third request is answered 200");
        assert_eq!(hits.load(Ordering::SeqCst), 3);
        // Two retries short of success: the error carries the last status.
        hits.store(0, Ordering::SeqCst);
        a.retries = 1;
        let err = a.ready().await.expect_err("two 503s with one retry");
        assert!(err.to_string().contains("status 503"), "{err}");
        assert_eq!(hits.load(Ordering::SeqCst), 2);
    }
}
