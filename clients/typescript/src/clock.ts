// Clock sync from Ping/Pong: maps the local clock (milliseconds) to the server's tick clock.
//
// Each Pong gives one sample: the server tick `s` observed somewhere between the Ping's send
// time `t0` and the Pong's arrival `t1` (local ms). We take the midpoint and `s + 0.5` (the tick
// counter is an integer; on average the server is half a tick past it). The model is
// `serverTick(t) = offset + rate · (1 + drift) · t / 1000`, fitted robustly:
//  * samples whose round trip is far above the best recent ones are discarded (queueing delay
//    is the main source of error, and it only ever adds);
//  * drift is the median of pairwise slopes (Theil–Sen), clamped to ±1 % and used only once the
//    samples span at least 5 s;
//  * the offset is the median of the samples' offsets under that drift.
// A tick counter that goes backwards (a world reset, a different world) restarts the fit.
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)

export interface ClockOptions {
  /** Samples kept (default 32). */
  maxSamples?: number;
  /** Samples with a round trip above `best + rttSlackMs` (or 2× best) are ignored (default 30). */
  rttSlackMs?: number;
}

interface Sample { t: number; s: number; rtt: number }

export class ClockSync {
  private samples: Sample[] = [];
  private readonly maxSamples: number;
  private readonly rttSlackMs: number;
  private rate = 20;
  private offset = 0;
  private drift = 0;
  private fitted = false;

  constructor(opts: ClockOptions = {}) {
    this.maxSamples = Math.max(3, opts.maxSamples ?? 32);
    this.rttSlackMs = opts.rttSlackMs ?? 30;
  }

  /** Ticks per second of the clock (Welcome.tick_rate_hz). */
  setRate(hz: number): void {
    if (Number.isFinite(hz) && hz > 0 && hz !== this.rate) {
      this.rate = hz;
      this.reset();
    }
  }

  get tickRate(): number {
    return this.rate;
  }

  reset(): void {
    this.samples = [];
    this.fitted = false;
    this.drift = 0;
  }

  /** True once at least one sample was taken. */
  get synced(): boolean {
    return this.fitted;
  }

  /** Estimated drift of the server clock against the local one (fraction, e.g. 1e-4). */
  get driftRatio(): number {
    return this.drift;
  }

  /** Round trip of the best recent sample (ms), or NaN. */
  get bestRttMs(): number {
    let best = Infinity;
    for (const x of this.samples) best = Math.min(best, x.rtt);
    return best === Infinity ? NaN : best;
  }

  /** One Ping/Pong: sent at `sentMs`, answered at `recvMs` (local ms) with `serverTick`. */
  addSample(sentMs: number, recvMs: number, serverTick: number): void {
    if (!(recvMs >= sentMs) || !Number.isFinite(serverTick)) return;
    const last = this.samples[this.samples.length - 1];
    if (last && serverTick < last.s - 0.5) this.reset(); // the tick counter went back
    this.samples.push({ t: (sentMs + recvMs) / 2, s: serverTick + 0.5, rtt: recvMs - sentMs });
    if (this.samples.length > this.maxSamples) this.samples.shift();
    this.fit();
  }

  private fit(): void {
    let best = Infinity;
    for (const x of this.samples) best = Math.min(best, x.rtt);
    const limit = Math.max(best * 2, best + this.rttSlackMs);
    const good = this.samples.filter((x) => x.rtt <= limit);
    const k = this.rate / 1000; // ticks per local ms at zero drift
    let drift = 0;
    if (good.length >= 3 && good[good.length - 1].t - good[0].t >= 5000) {
      const slopes: number[] = [];
      for (let i = 0; i < good.length; i++) {
        for (let j = i + 1; j < good.length; j++) {
          const dt = good[j].t - good[i].t;
          if (dt >= 1000) slopes.push((good[j].s - good[i].s) / (dt * k) - 1);
        }
      }
      if (slopes.length) drift = Math.max(-0.01, Math.min(0.01, median(slopes)));
    }
    const offs = good.map((x) => x.s - x.t * k * (1 + drift));
    this.drift = drift;
    this.offset = median(offs);
    this.fitted = true;
  }

  /** The server tick (fractional) at local time `localMs`; NaN before the first sample. */
  serverTick(localMs: number): number {
    if (!this.fitted) return NaN;
    return this.offset + localMs * (this.rate / 1000) * (1 + this.drift);
  }
}

function median(a: number[]): number {
  const s = a.slice().sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
