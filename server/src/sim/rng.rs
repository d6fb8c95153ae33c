//! Seeded, splittable random numbers. There is no global RNG: each agent draws from a stream
//! derived from (world seed, agent id, tick), so the result of a tick does not depend on the
//! order in which agents are computed or on how many threads compute them.

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for steering noise.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A stream seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng { state: mix(seed ^ GOLDEN) }
    }

    /// The stream's position (a saved world keeps it: [`Rng::from_state`] continues the stream).
    pub fn state(&self) -> u64 {
        self.state
    }

    /// The stream at a position [`Rng::state`] returned.
    pub fn from_state(state: u64) -> Self {
        Rng { state }
    }

    /// The stream of one agent in one tick.
    pub fn for_agent(world_seed: u64, agent_id: u32, tick: u64) -> Self {
        Rng::for_agent_in(world_seed, agent_id, Rng::tick_key(tick))
    }

    /// What the streams of every agent in tick `tick` share ([`Rng::for_agent_in`]): computed
    /// once per tick instead of once per agent.
    pub fn tick_key(tick: u64) -> u64 {
        mix(tick.wrapping_add(GOLDEN))
    }

    /// [`Rng::for_agent`] of the tick whose [`Rng::tick_key`] is `key` (the same stream).
    #[inline]
    pub fn for_agent_in(world_seed: u64, agent_id: u32, key: u64) -> Self {
        Rng::new(mix(world_seed ^ mix(u64::from(agent_id) ^ key)))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in [0, 1).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in [lo, hi); `lo` when the range is empty.
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        if hi > lo { lo + (hi - lo) * self.next_f32() } else { lo }
    }

    /// Uniform in [−1, 1) (Unity's `Random.Range(-1f, 1f)`).
    pub fn binomial(&mut self) -> f32 {
        self.range(-1.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_streams_differ() {
        let a: Vec<u64> = (0..4).map(|_| 0).scan(Rng::new(7), |r, _: u64| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..4).map(|_| 0).scan(Rng::new(7), |r, _: u64| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(Rng::for_agent(1, 2, 3).next_u64(), Rng::for_agent(1, 3, 3).next_u64());
        assert_ne!(Rng::for_agent(1, 2, 3).next_u64(), Rng::for_agent(1, 2, 4).next_u64());
    }

    #[test]
    fn floats_stay_in_range_and_cover_it() {
        let mut r = Rng::new(42);
        let (mut lo, mut hi) = (1.0f32, 0.0f32);
        for _ in 0..10_000 {
            let x = r.next_f32();
            assert!((0.0..1.0).contains(&x));
            lo = lo.min(x);
            hi = hi.max(x);
        }
        assert!(lo < 0.01 && hi > 0.99);
        assert_eq!(r.range(3.0, 3.0), 3.0);
    }
}
