// ClockSync (Ping/Pong → server tick clock) and WorldView (the agent table of one subscribed
// world, with a short history per cell for interpolated rendering). Same design as the
// TypeScript SDK (clients/typescript/src/clock.ts, view.ts).

using System;
using System.Collections.Generic;

namespace Steerd.Client
{
    /// <summary>
    /// Maps local time (ms) to the server's tick clock. Each Pong is a sample: the server tick seen
    /// between the Ping's send and the Pong's arrival (midpoint; tick + 0.5). Samples whose round
    /// trip is far above the best recent ones are ignored; drift is the median of pairwise slopes
    /// (Theil–Sen, clamped to ±1 %, once samples span 5 s); the offset is the median offset.
    /// </summary>
    public sealed class ClockSync
    {
        struct S { public double T, Tick, Rtt; }
        readonly List<S> samples = new List<S>();
        readonly int maxSamples;
        readonly double rttSlackMs;
        double rate = 20, offset, drift;
        bool fitted;

        public ClockSync(int maxSamples = 32, double rttSlackMs = 30) { this.maxSamples = Math.Max(3, maxSamples); this.rttSlackMs = rttSlackMs; }

        public double TickRate { get { return rate; } }
        public bool Synced { get { return fitted; } }
        public double Drift { get { return drift; } }

        public void SetRate(double hz)
        {
            if (hz > 0 && !double.IsInfinity(hz) && hz != rate) { rate = hz; Reset(); }
        }

        public void Reset() { samples.Clear(); fitted = false; drift = 0; }

        public void AddSample(double sentMs, double recvMs, long serverTick)
        {
            if (!(recvMs >= sentMs)) return;
            if (samples.Count > 0 && serverTick < samples[samples.Count - 1].Tick - 0.5) Reset();
            samples.Add(new S { T = (sentMs + recvMs) / 2, Tick = serverTick + 0.5, Rtt = recvMs - sentMs });
            if (samples.Count > maxSamples) samples.RemoveAt(0);
            Fit();
        }

        void Fit()
        {
            double best = double.MaxValue;
            foreach (var x in samples) best = Math.Min(best, x.Rtt);
            double limit = Math.Max(best * 2, best + rttSlackMs);
            var good = samples.FindAll(x => x.Rtt <= limit);
            double k = rate / 1000;
            double d = 0;
            if (good.Count >= 3 && good[good.Count - 1].T - good[0].T >= 5000)
            {
                var slopes = new List<double>();
                for (int i = 0; i < good.Count; i++)
                    for (int j = i + 1; j < good.Count; j++)
                    {
                        double dt = good[j].T - good[i].T;
                        if (dt >= 1000) slopes.Add((good[j].Tick - good[i].Tick) / (dt * k) - 1);
                    }
                if (slopes.Count > 0) d = Math.Max(-0.01, Math.Min(0.01, Median(slopes)));
            }
            var offs = new List<double>();
            foreach (var x in good) offs.Add(x.Tick - x.T * k * (1 + d));
            drift = d;
            offset = Median(offs);
            fitted = true;
        }

        /// <summary>Server tick (fractional) at local time `localMs`; NaN before the first sample.</summary>
        public double ServerTick(double localMs) { return fitted ? offset + localMs * (rate / 1000) * (1 + drift) : double.NaN; }

        static double Median(List<double> a)
        {
            a.Sort();
            int m = a.Count / 2;
            return a.Count % 2 == 1 ? a[m] : (a[m - 1] + a[m]) / 2;
        }
    }

    /// <summary>One agent as rendered at a moment: world units, radians in [0, 2π) (0 = +x, counter-clockwise).</summary>
    public sealed class SampledAgent
    {
        public uint Id;
        public int Group;
        public float X, Y, Heading, Vx, Vy;
    }

    public sealed class WorldView
    {
        sealed class Snap
        {
            public long Tick = -1;
            public int N;
            public uint[] Id = new uint[0];
            public int[] Group = new int[0];
            public int[] V = new int[0]; // N × [px, py, vx, vy, orient]
            public void Fill(List<QAgent> list, long tick)
            {
                int n = list.Count;
                if (Id.Length < n)
                {
                    int cap = Math.Max(n, Math.Max(Id.Length * 2, 16));
                    Id = new uint[cap]; Group = new int[cap]; V = new int[cap * 5];
                }
                for (int i = 0; i < n; i++)
                {
                    var a = list[i];
                    Id[i] = a.Id; Group[i] = a.Group;
                    int o = i * 5;
                    V[o] = a.PosX; V[o + 1] = a.PosY; V[o + 2] = a.VelX; V[o + 3] = a.VelY; V[o + 4] = a.Orient;
                }
                N = n; Tick = tick;
            }
        }

        sealed class History
        {
            public readonly Snap[] Snaps;
            public int Start, N;
            public History(int k) { Snaps = new Snap[k]; for (int i = 0; i < k; i++) Snaps[i] = new Snap(); }
            public Snap At(int i) { return Snaps[(Start + i) % Snaps.Length]; }
            public void Push(List<QAgent> list, long tick)
            {
                int k = Snaps.Length;
                if (N > 0)
                {
                    var last = At(N - 1);
                    if (tick < last.Tick) N = 0; else if (tick == last.Tick) N--;
                }
                if (N == k) { Start = (Start + 1) % k; N--; }
                At(N).Fill(list, tick);
                N++;
            }
        }

        public WorldInfo Info { get; private set; }
        public Quantization Quant { get; private set; }
        public readonly Dictionary<uint, CellMap> Cells = new Dictionary<uint, CellMap>();
        /// <summary>Cells of the last Subscribed answer (null before it).</summary>
        public HashSet<uint> SubscribedCells;
        /// <summary>The area last subscribed (re-sent on a resync or reconnect): null = whole world, else min_x, min_y, max_x, max_y.</summary>
        public float[] Area;
        /// <summary>The subscription's send rate (every_n_ticks, re-sent with the area).</summary>
        public int EveryNTicks = 1;
        public long LatestTick = -1;
        /// <summary>
        /// Keyframes and deltas applied (a cells message counts each of its entries), cells messages
        /// applied, and frames that could not be (each leads to a resubscribe).
        /// </summary>
        public int Keyframes, Deltas, CellsMessages, Resyncs;
        /// <summary>Span of the last cells message (the subscription's every_n_ticks); 0 before one.</summary>
        public long Span;
        /// <summary>Tick of the last cells message applied; -1 before one.</summary>
        public long CellsTick = -1;
        /// <summary>Clock of this world's ticks (Ping/Pong samples when it is the connection's first subscribed world).</summary>
        public readonly ClockSync Clock = new ClockSync();
        /// <summary>How far behind the estimated server time Sample() renders (ms, default 100).</summary>
        public double InterpDelayMs = 100;
        /// <summary>Called with a reason when the view needs keyframes again (the client resubscribes).</summary>
        public Action<string> OnResync = delegate { };

        readonly Dictionary<uint, History> history = new Dictionary<uint, History>();
        readonly int k;
        readonly List<SampledAgent> pool = new List<SampledAgent>();
        readonly List<SampledAgent> output = new List<SampledAgent>();
        double latestArrivalMs = double.NaN;

        public WorldView(WorldInfo info, Quantization quant, double tickRate, float[] area, int historyLength = 8)
        {
            Info = info; Quant = quant; Area = area;
            Clock.SetRate(tickRate);
            k = Math.Max(2, historyLength);
        }

        public double TickRate { get { return Clock.TickRate; } }

        /// <summary>A new Welcome (reconnect): same world name, maybe a new id, quantization or grid.</summary>
        public void Rebind(WorldInfo info, Quantization quant, double tickRate)
        {
            bool changed = !info.SameGrid(Info) || !quant.SameAs(Quant);
            Info = info; Quant = quant;
            Clock.SetRate(tickRate);
            if (changed) Clear();
        }

        public void Clear() { Cells.Clear(); history.Clear(); SubscribedCells = null; LatestTick = -1; }

        /// <summary>The Subscribed answer: drop the cells no longer covered.</summary>
        public void Subscribed(List<uint> cells)
        {
            SubscribedCells = new HashSet<uint>(cells);
            var drop = new List<uint>();
            foreach (var c in Cells.Keys) if (!SubscribedCells.Contains(c)) drop.Add(c);
            foreach (var c in drop) { Cells.Remove(c); history.Remove(c); }
        }

        public void ApplyKeyframe(Frame f, double nowMs = double.NaN)
        {
            if (SubscribedCells != null && !SubscribedCells.Contains(f.Cell)) return;
            CellMap cell;
            if (!Cells.TryGetValue(f.Cell, out cell)) { cell = new CellMap(); Cells[f.Cell] = cell; }
            try { cell.Keyframe(f); }
            catch (ProtoException e) { Resync("cell " + f.Cell + ": " + e.Message); return; }
            Keyframes++;
            Remember(f.Cell, cell, f.Tick, nowMs);
        }

        public void ApplyDelta(Frame f, double nowMs = double.NaN)
        {
            CellMap cell;
            if (!Cells.TryGetValue(f.Cell, out cell)) return; // its keyframe comes first
            try
            {
                if (!cell.Delta(f, Quant.PredictNum))
                {
                    Resync("cell " + f.Cell + ": delta " + f.BaseTick + "→" + f.Tick + " on a cell held at " + cell.Tick);
                    return;
                }
            }
            catch (ProtoException e) { Resync("cell " + f.Cell + ": " + e.Message); return; }
            Deltas++;
            Remember(f.Cell, cell, f.Tick, nowMs);
        }

        readonly CellsTxn txn = new CellsTxn();

        /// <summary>
        /// Applies a cells message of this world (§6.8) whole: every entry, then the message checksum.
        /// A chain break, a malformed entry or a checksum mismatch leaves every cell as it was and
        /// resyncs (see CellMap.ApplyCells).
        /// </summary>
        public void ApplyCells(CellsMessage m, double nowMs = double.NaN)
        {
            var why = CellMap.ApplyCells(Cells, m, Info.Cols, Info.Rows, Quant.PredictNum, SubscribedCells, txn);
            if (why != null) { Resync(why); return; }
            CellsMessages++;
            Span = m.Span;
            CellsTick = m.Tick;
            foreach (var e in m.Entries)
            {
                CellMap cell;
                if (!Cells.TryGetValue(e.Cell, out cell)) continue;
                if (!e.IsDelta)
                {
                    if (SubscribedCells != null && !SubscribedCells.Contains(e.Cell)) continue;
                    Keyframes++;
                }
                else Deltas++;
                Remember(e.Cell, cell, cell.Tick, nowMs);
            }
        }

        public void Resync(string reason) { Resyncs++; OnResync(reason); }

        void Remember(uint c, CellMap cell, long tick, double nowMs)
        {
            History h;
            if (!history.TryGetValue(c, out h)) { h = new History(k); history[c] = h; }
            h.Push(cell.Agents, tick);
            if (tick > LatestTick) { LatestTick = tick; latestArrivalMs = nowMs; }
        }

        public int Count { get { int n = 0; foreach (var c in Cells.Values) n += c.Agents.Count; return n; } }

        /// <summary>The agent table (quantized records, §6.1) sorted by id. Records are live.</summary>
        public List<QAgent> Agents()
        {
            var o = new List<QAgent>();
            foreach (var c in Cells.Values) o.AddRange(c.Agents);
            o.Sort((a, b) => a.Id.CompareTo(b.Id));
            return o;
        }

        public QAgent Agent(uint id)
        {
            foreach (var c in Cells.Values)
            {
                var l = c.Agents;
                int lo = 0, hi = l.Count - 1;
                while (lo <= hi)
                {
                    int mid = (lo + hi) >> 1;
                    if (l[mid].Id == id) return l[mid];
                    if (l[mid].Id < id) lo = mid + 1; else hi = mid - 1;
                }
            }
            return null;
        }

        /// <summary>Estimated server tick (fractional) at local time `nowMs`.</summary>
        public double ServerTick(double nowMs)
        {
            if (Clock.Synced) return Clock.ServerTick(nowMs);
            if (LatestTick < 0 || double.IsNaN(latestArrivalMs)) return LatestTick;
            return LatestTick + (nowMs - latestArrivalMs) * TickRate / 1000;
        }

        /// <summary>The tick Sample(nowMs) renders: server time − InterpDelayMs, at most one send period (one tick, or EveryNTicks) past the newest state.</summary>
        public double RenderTick(double nowMs)
        {
            double st = ServerTick(nowMs) - InterpDelayMs * TickRate / 1000;
            if (double.IsNaN(st) || double.IsInfinity(st)) return LatestTick;
            return Math.Min(st, LatestTick + Math.Max(1, EveryNTicks));
        }

        /// <summary>
        /// Every agent at local time `renderTimeMs` (the clock the client uses: Stopwatch milliseconds,
        /// see SteerClient.NowMs): positions and headings interpolated between the two states around
        /// RenderTick, extrapolated along the velocity by at most one send period past the newest state
        /// (with EveryNTicks N a change reached at state tick t is interpolated over the N ticks before
        /// t: give InterpDelayMs at least one send period to render between states). The
        /// returned list and its objects are reused by the next call.
        /// </summary>
        public List<SampledAgent> Sample(double renderTimeMs)
        {
            double target = RenderTick(renderTimeMs);
            float ps = Quant.PosStep, vs = Quant.VelStep;
            int period = Math.Max(1, EveryNTicks);
            double rate = TickRate;
            output.Clear();
            int n = 0;
            foreach (var h in history.Values)
            {
                if (h.N == 0) continue;
                int i = h.N - 1;
                while (i > 0 && h.At(i).Tick > target) i--;
                var s0 = h.At(i);
                var s1 = i < h.N - 1 && s0.Tick <= target ? h.At(i + 1) : null;
                double f = 0, ext = 0;
                if (s1 != null)
                {
                    double t1 = Math.Max(s0.Tick, s1.Tick - period);
                    if (target > t1) f = (target - t1) / (s1.Tick - t1);
                }
                else if (target > s0.Tick) ext = Math.Min(target - s0.Tick, period) / rate;
                var ids = s0.Id; var v0 = s0.V;
                int j = 0;
                for (int a = 0; a < s0.N; a++)
                {
                    uint id = ids[a];
                    int o = a * 5;
                    double x = v0[o], y = v0[o + 1], hd = v0[o + 4];
                    int vx = v0[o + 2], vy = v0[o + 3];
                    if (f > 0)
                    {
                        while (j < s1.N && s1.Id[j] < id) j++;
                        if (j < s1.N && s1.Id[j] == id)
                        {
                            int p = j * 5;
                            x += (s1.V[p] - x) * f;
                            y += (s1.V[p + 1] - y) * f;
                            double dh = s1.V[p + 4] - hd;
                            if (dh > 32768) dh -= 65536; else if (dh < -32768) dh += 65536;
                            hd += dh * f;
                        }
                    }
                    else if (ext > 0)
                    {
                        x += vx * vs * ext / ps;
                        y += vy * vs * ext / ps;
                    }
                    SampledAgent s;
                    if (n < pool.Count) s = pool[n]; else { s = new SampledAgent(); pool.Add(s); }
                    n++;
                    s.Id = id;
                    s.Group = s0.Group[a];
                    s.X = (float)(x * ps);
                    s.Y = (float)(y * ps);
                    double rad = hd * (2 * Math.PI / 65536);
                    if (rad >= 2 * Math.PI) rad -= 2 * Math.PI; else if (rad < 0) rad += 2 * Math.PI;
                    s.Heading = (float)rad;
                    s.Vx = vx * vs;
                    s.Vy = vy * vs;
                    output.Add(s);
                }
            }
            return output;
        }
    }
}
