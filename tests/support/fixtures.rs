use serde_json::Value;

use crate::*;

// ------------------------------------------------------------------------------ scenarios

/// A small scenario: a `size`×`size` world with `obstacles` at fixed places and no agents.
pub fn small_scenario(size: f32, obstacles: &[(f32, f32, f32)]) -> Value {
    let obs: Vec<Value> = obstacles
        .iter()
        .map(|&(x, y, r)| json!({"center": {"x": x, "y": y}, "radius": r}))
        .collect();
    json!({
        "name": "small",
        "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": size, "y": size}},
        "edge": "clamp",
        "tick_rate": 20,
        "seed": 3,
        "obstacles": obs,
    })
}

/// A scenario of `count` wanderers in a `size`×`size` wrapping world.
pub fn wander_scenario(size: f32, count: usize) -> Value {
    json!({
        "name": "wander",
        "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": size, "y": size}},
        "edge": "wrap",
        "tick_rate": 20,
        "seed": 7,
        "groups": [{
            "name": "w",
            "count": count,
            "area": {"type": "rect", "min_x": 0, "min_y": 0, "max_x": size, "max_y": size},
            "limits": {"max_speed": 5, "max_accel": 10, "radius": 0.5},
            "initial_speed": 3,
            "behaviors": [{"behavior": {"type": "wander"}, "weight": 1, "priority": 0}],
        }],
    })
}

/// PUTs a scenario and creates world `world` from it (panics on failure).
pub async fn create_world(http: &Http, world: &str, scenario_name: &str, scenario: &Value) {
    http.put(&format!("/scenarios/{scenario_name}"), scenario)
        .await
        .ok();
    http.post(
        "/worlds",
        &json!({"name": world, "scenario": scenario_name}),
    )
    .await
    .expect(201);
}

/// The snapshot's agent count and obstacle list: the tick-independent part of a world.
pub async fn shape(http: &Http, world: &str) -> (usize, Value) {
    let s = http.get(&format!("/worlds/{world}/snapshot")).await.ok();
    (
        s["agents"].as_array().map_or(0, Vec::len),
        s["obstacles"].clone(),
    )
}

/// The id of the first agent of a world's snapshot.
pub async fn first_agent(http: &Http, world: &str) -> u32 {
    let s = http.get(&format!("/worlds/{world}/snapshot")).await.ok();
    s["agents"][0]["id"].as_u64().expect("a world with agents") as u32
}

/// The world's current tick (`GET /worlds/{w}`).
pub async fn tick(http: &Http, world: &str) -> u64 {
    http.get(&format!("/worlds/{world}")).await.ok()["tick"]
        .as_u64()
        .expect("tick")
}

/// A metric's value (sum over label sets) from `/metrics` text.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            let base = key.split('{').next()?;
            (base == name).then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

/// A seeded generator for test timing and inputs (`fastrand`), seeded from the clock with the
/// seed printed so a failure can be replayed.
pub struct Rng(fastrand::Rng);

impl Rng {
    /// Seeded from the clock; prints the seed.
    pub fn from_clock() -> Rng {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        eprintln!("rng seed {seed}");
        Rng(fastrand::Rng::with_seed(seed))
    }

    /// Uniform in `[0, n)` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.u64(..n.max(1))
    }
}

/// Serializes load-sensitive tests (throughput, many subscribers, kill loops) so that on a
/// 2-core machine they do not starve each other.
pub async fn heavy_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}
