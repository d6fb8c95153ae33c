//! HTTP and WebSocket front end: `pub fn app(state) -> Router` and `pub async fn run(...)`.

pub mod error;
pub mod guard;
pub mod handoff;
pub mod openapi;
pub mod recordings;
pub mod rest;
pub mod viewer;
pub mod fanout;
mod feed;
pub mod schema;
mod session;
pub mod state;
pub mod ws;
pub mod wsio;

pub use state::{AppState, ConnSlot};

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::Metrics;

/// The router.
pub fn app(state: AppState) -> Router {
    use rest::*;
    let body_limit = state.settings.limits.max_body_bytes;
    let transfer_limit = usize::try_from(state.settings.cluster.max_transfer_bytes).unwrap_or(usize::MAX);
    Router::new()
        .route("/", get(viewer::index)).route("/viewer/{*file}", get(viewer::file))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/ws", get(ws::upgrade))
        .route("/worlds", get(list_worlds).post(create_world))
        .route("/worlds/{world}", get(get_world).patch(patch_world).delete(delete_world))
        .route("/worlds/{world}/step", post(step))
        .route("/worlds/{world}/reset", post(reset))
        .route("/worlds/{world}/snapshot", get(snapshot))
        .route("/worlds/{world}/agents", get(list_agents).post(spawn))
        .route("/worlds/{world}/agents/{id}", get(get_agent).delete(delete_agent))
        .route("/worlds/{world}/agents/{id}/behaviors", put(put_behaviors))
        .route("/worlds/{world}/agents/{id}/owner", put(put_owner))
        .route("/worlds/{world}/players", get(list_players))
        .route("/worlds/{world}/players/{player}", axum::routing::delete(kick_player))
        .route("/worlds/{world}/agents/{id}/avoidance", get(avoidance))
        .route("/worlds/{world}/move-to", post(move_to))
        .route("/worlds/{world}/flowfield", get(flow_field))
        .route("/worlds/{world}/obstacles", get(list_obstacles).post(add_obstacle))
        .route("/worlds/{world}/obstacles/random", post(random_obstacles))
        .route("/worlds/{world}/obstacles/{id}", axum::routing::delete(delete_obstacle).patch(move_obstacle))
        .route("/worlds/{world}/walls", get(list_walls).post(add_wall))
        .route("/worlds/{world}/walls/{id}", axum::routing::delete(delete_wall))
        .route("/worlds/{world}/load", post(load))
        .route("/worlds/{world}/save", post(save))
        .route("/worlds/{world}/recording", get(recordings::get_recording))
        .route("/worlds/{world}/replay", get(rest::get_replay))
        .route("/worlds/{world}/replay/seek", post(rest::replay_seek))
        .route("/worlds/{world}/replay/play", post(rest::replay_play))
        .route("/worlds/{world}/replay/pause", post(rest::replay_pause))
        .route("/worlds/{world}/replay/speed", post(rest::replay_speed))
        .route("/recordings", get(recordings::list_recordings))
        .route("/recordings/{name}", axum::routing::delete(recordings::delete_recording))
        .route("/debug/panic", post(debug_panic))
        .route("/debug/stall", post(debug_stall))
        .route("/debug/stall/release", post(debug_stall_release))
        .route("/scenarios", get(list_scenarios))
        .route("/scenarios/{name}", get(get_scenario).put(put_scenario).delete(delete_scenario))
        .route("/worlds/{world}/handoff", post(handoff::handoff_world))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(body_limit))
        // Server to server, with its own body bound (`cluster.max_transfer_bytes`; the gate
        // checks the cluster secret before the body is read).
        .merge(
            Router::new()
                .route("/cluster/worlds/{world}", post(handoff::import_world))
                .layer(DefaultBodyLimit::max(transfer_limit))
                .layer(tower_http::limit::RequestBodyLimitLayer::new(transfer_limit)),
        )
        // Outermost last: errors become JSON; mutating calls are authenticated before their
        // body is read, and the body is read with a size and a time bound.
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::guard))
        .layer(axum::middleware::from_fn(guard::json_errors))
        .with_state(state)
}

/// Serves `app(state)` on `listener` until `state.cancel` is cancelled, then drains within
/// `limits.shutdown_timeout_ms`, however loaded the worlds are: first the autosaves are written
/// (world threads answer within a turn of their loop even when their tick overruns), then the
/// connections close (WebSocket clients get close 1001), then the world threads stop.
pub async fn run(listener: TcpListener, state: AppState) -> anyhow::Result<()> {
    let cancel = state.cancel.clone();
    let router = app(state.clone());
    let header_timeout = Duration::from_millis(state.settings.limits.header_timeout_ms);
    let sockets = Arc::new(tokio::sync::Semaphore::new(socket_cap(state.settings.limits.max_http_connections)));
    let send_buffer = state.settings.limits.socket_send_buffer_bytes;
    let http_conns = serve(listener, router, cancel.clone(), Serving { header_timeout, sockets, metrics: state.metrics.clone(), send_buffer }).await?;
    let timeout = Duration::from_millis(state.settings.limits.shutdown_timeout_ms);
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    autosave(&state, deadline).await;
    state.tracker.close();
    http_conns.close();
    if tokio::time::timeout_at(deadline, async { tokio::join!(state.tracker.wait(), http_conns.wait()) }).await.is_err() {
        tracing::warn!("connections did not close within the shutdown timeout ({timeout:?})");
    }
    let registry = state.registry.clone();
    let world_deadline = std::time::Instant::now() + deadline.saturating_duration_since(tokio::time::Instant::now());
    let running = tokio::task::spawn_blocking(move || registry.stop_all(world_deadline)).await.unwrap_or_default();
    if !running.is_empty() {
        tracing::warn!("worlds still running at the shutdown deadline: {running:?}");
    }
    tracing::info!("drained in {:?}", started.elapsed());
    Ok(())
}

/// Asks a world, retrying while its queue is full, until `deadline`.
async fn ask_until<T>(
    w: &crate::runtime::WorldHandle,
    deadline: tokio::time::Instant,
    make: impl Fn(tokio::sync::oneshot::Sender<Result<T, crate::runtime::world::CmdError>>) -> crate::runtime::world::Request,
) -> Result<T, crate::runtime::world::CmdError> {
    use crate::runtime::world::CmdError;
    loop {
        match tokio::time::timeout_at(deadline, w.ask(&make)).await {
            Ok(Err(CmdError::Busy(_))) if tokio::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(10)).await,
            Ok(r) => return r,
            Err(_) => return Err(CmdError::Invalid(format!("world `{}` did not answer before the shutdown deadline", w.name))),
        }
    }
}

/// Saves every world that asked for it, as `<world>-autosave`, before `deadline`.
pub async fn autosave(state: &AppState, deadline: tokio::time::Instant) {
    for w in state.registry.list() {
        if !w.alive() {
            continue;
        }
        let info = match ask_until(&w, deadline, |reply| crate::runtime::world::Request::Info { sight: crate::authz::Sight::All, reply }).await {
            Ok(i) => i,
            Err(e) => {
                tracing::error!(world = %w.name, "autosave: {e}");
                continue;
            }
        };
        if !info.autosave {
            continue;
        }
        match ask_until(&w, deadline, |reply| crate::runtime::world::Request::Save { reply }).await {
            Ok(sc) => {
                let store = state.store.clone();
                let name = format!("{}-autosave", w.name);
                match tokio::time::timeout_at(deadline, tokio::task::spawn_blocking(move || store.put(&name, &sc))).await {
                    Ok(Ok(Ok(()))) => tracing::info!(world = %w.name, "autosaved"),
                    Ok(Ok(Err(e))) => tracing::error!(world = %w.name, "autosave failed: {e}"),
                    Ok(Err(e)) => tracing::error!(world = %w.name, "autosave failed: {e}"),
                    Err(_) => tracing::error!(world = %w.name, "autosave not written before the shutdown deadline"),
                }
            }
            Err(e) => tracing::error!(world = %w.name, "autosave failed: {e}"),
        }
    }
}

/// The socket cap actually used: `limits.max_http_connections`, lowered to leave 64 file
/// descriptors of the process's limit for everything else (files, the listener, threads).
pub fn socket_cap(configured: usize) -> usize {
    #[cfg(target_os = "linux")]
    {
        let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        if let Some(cur) = lim.current {
            let room = usize::try_from(cur).unwrap_or(usize::MAX).saturating_sub(64).max(1);
            if room < configured {
                tracing::warn!("limits.max_http_connections {configured} lowered to {room} by the open-files limit {cur}");
                return room;
            }
        }
    }
    configured
}

/// The answer to a socket beyond the cap, written without waiting before it is closed.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 49\r\nconnection: close\r\n\r\n{\"error\":\"busy\",\"message\":\"too many connections\"}";

/// Caps the kernel send buffer of an accepted socket (`limits.socket_send_buffer_bytes`; 0 =
/// the kernel's auto-tuning, which grows it to megabytes). Small, a client that stops reading
/// blocks the server's writes within a few ticks, so the slow-reader policy engages: its send
/// task falls behind the frame ring and resyncs it with keyframes, and a write that stays
/// blocked for `limits.write_timeout_ms` closes it (4008) — instead of the kernel queueing tens
/// of seconds of stale frames first.
fn cap_send_buffer(stream: &tokio::net::TcpStream, bytes: usize) {
    if bytes == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::net::sockopt::set_socket_send_buffer_size(stream, bytes) {
        tracing::debug!("cannot set SO_SNDBUF: {e}");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}

/// Sockets over the cap being answered at once (beyond: closed without an answer).
const REFUSING: usize = 64;

/// Answers a socket over the cap with 503 and closes it. The answer is written, the write side
/// shut and the request read and discarded for at most a second, so the client reads the 503
/// rather than a reset; at most [`REFUSING`] sockets at once get this, the rest are closed.
fn refuse(mut stream: tokio::net::TcpStream, refusing: &Arc<tokio::sync::Semaphore>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(permit) = refusing.clone().try_acquire_owned() else { return };
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            stream.write_all(REFUSED).await?;
            stream.shutdown().await?;
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
            Ok::<(), std::io::Error>(())
        })
        .await;
        drop(permit);
    });
}

/// What [`serve`] bounds each socket by, and where it counts them.
struct Serving {
    /// Longest a request's header may take to arrive.
    header_timeout: Duration,
    /// One slot per accepted socket.
    sockets: Arc<tokio::sync::Semaphore>,
    metrics: Arc<Metrics>,
    /// The kernel send buffer of each socket, bytes (0: the system's default).
    send_buffer: usize,
}

/// The accept loop: hyper's HTTP/1 server with a header-read timeout (which `axum::serve`
/// lacks, leaving it open to slowloris), WebSocket upgrades, and graceful shutdown. Every
/// accepted socket takes a slot of `sockets` (idle ones too, and upgraded ones until their
/// session ends); beyond it a socket is answered 503 at once and closed, so file descriptors
/// stay bounded. Accept errors (e.g. EMFILE) back off briefly instead of spinning. Answers,
/// once cancelled, the tracker of the connection tasks still finishing.
async fn serve(listener: TcpListener, router: Router, cancel: CancellationToken, how: Serving) -> anyhow::Result<TaskTracker> {
    let Serving { header_timeout, sockets, metrics, send_buffer } = how;
    use hyper_util::rt::{TokioIo, TokioTimer};
    let conns = TaskTracker::new();
    let refusing = Arc::new(tokio::sync::Semaphore::new(REFUSING));
    loop {
        let (stream, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = cancel.cancelled() => break,
        };
        let Ok(permit) = sockets.clone().try_acquire_owned() else {
            metrics.connections_refused.inc();
            refuse(stream, &refusing);
            continue;
        };
        let slot = ConnSlot(Arc::new(permit));
        let _ = stream.set_nodelay(true);
        cap_send_buffer(&stream, send_buffer);
        let router = router.clone();
        let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut().insert(slot.clone());
            // The peer's address (`ws::upgrade` reads it: `auth.max_sessions_per_ip`).
            req.extensions_mut().insert(addr);
            tower::ServiceExt::oneshot(router.clone(), req)
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), svc)
            .with_upgrades();
        let cancel = cancel.clone();
        conns.spawn(async move {
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    drop(listener);
    // The caller waits for these (bounded by the shutdown timeout).
    Ok(conns)
}
