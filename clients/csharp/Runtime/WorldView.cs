// ClockSync (Ping/Pong → server tick clock) and WorldView (the agent table of one subscribed
// world, with a short history per agent for interpolated rendering). Same design as the
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
        /// <summary>The record's group index, and its name from the world's group table ("" if not known).</summary>
        public int Group;
        public string GroupName;
        /// <summary>
        /// Whether this client spawned the agent (for its player) and has not seen it despawned: your
        /// units. Kept across resumes; cleared when the server gives the client another player id.
        /// </summary>
        public bool Mine;
        public float X, Y, Heading, Vx, Vy;
    }

    public sealed class WorldView
    {
        /// <summary>
        /// The last K states of one agent, oldest first, whichever cells reported them (so an agent
        /// crossing cells interpolates across the boundary). Gone: the state tick from which the view
        /// no longer holds the agent (it left the subscribed area or was despawned).
        /// </summary>
        sealed class Track
        {
            public readonly uint Id;
            public readonly long[] Ticks;
            public readonly int[] V; // K × [px, py, vx, vy, orient]
            public int Start, N, Group;
            /// <summary>The cell that last reported the agent.</summary>
            public uint Cell;
            public long Gone = long.MaxValue;
            /// <summary>The first state came with a delta's `entered` (the agent came into the area), not a keyframe.</summary>
            public bool Entered;
            public bool Deleted;
            public Track(uint id, int k) { Id = id; Ticks = new long[k]; V = new int[k * 5]; }
            public int At(int i) { return (Start + i) % Ticks.Length; }
            public long LastTick { get { return N > 0 ? Ticks[At(N - 1)] : -1; } }
            public void Push(QAgent a, long tick)
            {
                int k = Ticks.Length;
                if (N > 0)
                {
                    long last = Ticks[At(N - 1)];
                    if (tick < last) N = 0; else if (tick == last) N--;
                }
                if (N == k) { Start = (Start + 1) % k; N--; }
                int s = At(N);
                Ticks[s] = tick;
                int o = s * 5;
                V[o] = a.PosX; V[o + 1] = a.PosY; V[o + 2] = a.VelX; V[o + 3] = a.VelY; V[o + 4] = a.Orient;
                Group = a.Group;
                N++;
            }
        }

        public WorldInfo Info { get; private set; }
        public Quantization Quant { get; private set; }
        public readonly Dictionary<uint, CellMap> Cells = new Dictionary<uint, CellMap>();
        /// <summary>The world's group names (a record's Group indexes them): from Subscribed and the groups event.</summary>
        public List<string> Groups = new List<string>();
        /// <summary>Ids of the agents this client spawned in this world (SampledAgent.Mine); the client keeps it.</summary>
        public HashSet<uint> Mine = new HashSet<uint>();
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
        /// <summary>
        /// Per-agent callbacks: an agent came into the view (spawned, entered the area or sight, the
        /// first keyframes), left it (despawned, left the area), or its record changed. Raised once
        /// the tick is applied (a cell crossing is neither a removal nor an addition), with the live
        /// record, on the thread that handles messages (see SteerClient).
        /// </summary>
        public event Action<QAgent> AgentAdded;
        public event Action<uint> AgentRemoved;
        public event Action<QAgent> AgentChanged;
        readonly List<QAgent> pendingAdded = new List<QAgent>();
        readonly List<QAgent> pendingChanged = new List<QAgent>();
        readonly List<Track> pendingRemoved = new List<Track>();
        bool Listening { get { return AgentAdded != null || AgentRemoved != null || AgentChanged != null; } }

        /// <summary>Raises the agents added and changed, and those removed that no cell took back before tick `complete`.</summary>
        void FlushAgentEvents(long complete = long.MaxValue)
        {
            if (!Listening) { pendingAdded.Clear(); pendingChanged.Clear(); pendingRemoved.Clear(); return; }
            var removed = new List<uint>();
            var later = new List<Track>();
            foreach (var t in pendingRemoved)
            {
                if (t.Deleted || t.Gone == long.MaxValue) continue; // taken back by another cell
                if (t.Gone < complete) removed.Add(t.Id); else later.Add(t);
            }
            pendingRemoved.Clear();
            pendingRemoved.AddRange(later);
            var added = pendingAdded.ToArray();
            var changed = pendingChanged.ToArray();
            pendingAdded.Clear();
            pendingChanged.Clear();
            foreach (var id in removed) Call(AgentRemoved, id);
            foreach (var a in added) Call(AgentAdded, a);
            foreach (var a in changed) Call(AgentChanged, a);
        }

        static void Call<T>(Action<T> h, T arg)
        {
            if (h == null) return;
            // A listener's bug must not break the view.
            try { h(arg); } catch (Exception e) { System.Diagnostics.Trace.TraceError("steerd view listener: " + e); }
        }

        /// <summary>Called with a reason when the view needs keyframes again (the client resubscribes).</summary>
        public Action<string> OnResync = delegate { };

        /// <summary>Per agent: its last states (interpolation follows agents, not cells).</summary>
        readonly Dictionary<uint, Track> tracks = new Dictionary<uint, Track>();
        /// <summary>Per cell: the agents it held at its last state, by id (to notice who left it).</summary>
        readonly Dictionary<uint, List<Track>> members = new Dictionary<uint, List<Track>>();
        /// <summary>The other buffer of each cell's members (swapped in by Remember: no garbage per tick).</summary>
        readonly Dictionary<uint, List<Track>> spare = new Dictionary<uint, List<Track>>();
        readonly List<Track> gone = new List<Track>();
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
        /// <summary>The world's tick rate changed (the tick_rate event): the clock starts a new fit at the new rate (frame arrivals stand in until Pongs come).</summary>
        public void SetTickRate(double hz)
        {
            Info.TickRateHz = (float)hz;
            Clock.SetRate(hz);
        }

        public void Rebind(WorldInfo info, Quantization quant, double tickRate)
        {
            bool changed = !info.SameGrid(Info) || !quant.SameAs(Quant);
            Info = info; Quant = quant;
            Clock.SetRate(tickRate);
            if (changed) Clear();
        }

        public void Clear()
        {
            if (Listening)
            {
                foreach (var t in tracks.Values) if (!t.Deleted && t.Gone == long.MaxValue && t.N > 0) { t.Gone = Math.Max(0, LatestTick); pendingRemoved.Add(t); }
                pendingAdded.Clear();
                pendingChanged.Clear();
                FlushAgentEvents();
            }
            Cells.Clear(); tracks.Clear(); members.Clear(); spare.Clear(); gone.Clear();
            SubscribedCells = null; LatestTick = -1;
        }

        /// <summary>The Subscribed answer: drop the cells no longer covered.</summary>
        public void Subscribed(List<uint> cells)
        {
            SubscribedCells = new HashSet<uint>(cells);
            var drop = new List<uint>();
            foreach (var c in Cells.Keys) if (!SubscribedCells.Contains(c)) drop.Add(c);
            foreach (var c in drop)
            {
                Cells.Remove(c);
                List<Track> m;
                spare.Remove(c);
                if (members.TryGetValue(c, out m)) { members.Remove(c); foreach (var t in m) MarkGone(t, c, Math.Max(0, LatestTick)); }
            }
        }

        public void ApplyKeyframe(Frame f, double nowMs = double.NaN)
        {
            if (SubscribedCells != null && !SubscribedCells.Contains(f.Cell)) return;
            CellMap cell;
            if (!Cells.TryGetValue(f.Cell, out cell)) { cell = new CellMap(); Cells[f.Cell] = cell; }
            try { cell.Keyframe(f); }
            catch (ProtoException e) { Resync("cell " + f.Cell + ": " + e.Message); return; }
            Keyframes++;
            Remember(f.Cell, cell, f.Tick, nowMs, false);
            FlushAgentEvents(f.Tick);
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
            Remember(f.Cell, cell, f.Tick, nowMs, true);
            FlushAgentEvents(f.Tick);
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
                Remember(e.Cell, cell, cell.Tick, nowMs, e.IsDelta);
            }
            // A cells message is a whole tick: every removal is final.
            FlushAgentEvents();
        }

        public void Resync(string reason) { Resyncs++; OnResync(reason); }

        /// <summary>
        /// Cell c holds cell.Agents at state `tick`: each agent's track takes the state; an agent the
        /// cell held before and that no cell reported at this tick since is gone from `tick` on (a
        /// later cell of the same message that takes it in revives it). fromDelta: new tracks came
        /// in by a delta (entered the area), not by a keyframe. Both lists are sorted by id: one
        /// merge walk finds who stayed and who left.
        /// </summary>
        void Remember(uint c, CellMap cell, long tick, double nowMs, bool fromDelta)
        {
            var list = cell.Agents;
            List<Track> m;
            if (!members.TryGetValue(c, out m)) { m = new List<Track>(); members[c] = m; }
            List<Track> next;
            if (!spare.TryGetValue(c, out next)) next = new List<Track>(list.Count);
            next.Clear();
            int j = 0;
            for (int i = 0; i < list.Count; i++)
            {
                var a = list[i];
                while (j < m.Count && m[j].Id < a.Id) MarkGone(m[j++], c, tick);
                Track t;
                if (j < m.Count && m[j].Id == a.Id && !m[j].Deleted) t = m[j++];
                else
                {
                    if (j < m.Count && m[j].Id == a.Id) j++;
                    if (!tracks.TryGetValue(a.Id, out t)) { t = new Track(a.Id, k) { Entered = fromDelta }; tracks[a.Id] = t; }
                    else if (t.Gone != long.MaxValue && t.Gone < tick)
                    {
                        // Back after a gap (left the area and came back): the old states are not a path.
                        t.N = 0;
                        t.Entered = fromDelta;
                    }
                }
                if (Listening)
                {
                    if (t.N == 0) pendingAdded.Add(a);
                    else
                    {
                        int o = t.At(t.N - 1) * 5;
                        var v = t.V;
                        if (v[o] != a.PosX || v[o + 1] != a.PosY || v[o + 2] != a.VelX || v[o + 3] != a.VelY || v[o + 4] != a.Orient || t.Group != a.Group) pendingChanged.Add(a);
                    }
                }
                t.Push(a, tick);
                t.Cell = c;
                t.Gone = long.MaxValue;
                next.Add(t);
            }
            while (j < m.Count) MarkGone(m[j++], c, tick);
            members[c] = next;
            m.Clear();
            spare[c] = m;
            if (tick > LatestTick) { LatestTick = tick; latestArrivalMs = nowMs; Sweep(); }
        }

        /// <summary>Track t is no longer in cell c at `tick`: gone, unless another cell reported it since.</summary>
        void MarkGone(Track t, uint c, long tick)
        {
            if (t.Deleted || t.Cell != c || t.LastTick >= tick || t.Gone != long.MaxValue) return;
            t.Gone = tick;
            gone.Add(t);
            if (Listening) pendingRemoved.Add(t);
        }

        /// <summary>Deletes the tracks gone for longer than the history spans.</summary>
        void Sweep()
        {
            if (gone.Count == 0) return;
            long horizon = LatestTick - (long)k * Math.Max(1, EveryNTicks);
            gone.RemoveAll(t =>
            {
                if (t.Deleted || t.Gone == long.MaxValue) return true;
                if (t.Gone >= horizon) return false;
                t.Deleted = true;
                tracks.Remove(t.Id);
                return true;
            });
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
        /// see SteerClient.NowMs): positions and headings interpolated between the agent's two states
        /// around RenderTick (whichever cells reported them: crossing a cell boundary is seamless),
        /// extrapolated along the velocity by at most one send period past its newest state. An agent
        /// that left the area is extrapolated until the tick it left; one that came in is drawn along
        /// its velocity up to one send period before its first state (no hold, no jump at the area's
        /// edge). With EveryNTicks N a change reached at state tick t is interpolated over the N ticks
        /// before t: give InterpDelayMs at least one send period to render between states. The
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
            foreach (var t in tracks.Values)
            {
                if (t.N == 0 || target >= t.Gone) continue;
                int i = t.N - 1;
                while (i > 0 && t.Ticks[t.At(i)] > target) i--;
                int i0 = t.At(i);
                long t0 = t.Ticks[i0];
                var v = t.V;
                int o = i0 * 5;
                double x = v[o], y = v[o + 1], hd = v[o + 4];
                int vx = v[o + 2], vy = v[o + 3];
                if (target < t0)
                {
                    // Before its first state: an agent that came into the area is drawn where its
                    // velocity puts it, at most one send period earlier; one from a keyframe is held.
                    if (t.Entered)
                    {
                        if (t0 - target > period) continue;
                        double back = (t0 - target) / rate;
                        x -= vx * vs * back / ps;
                        y -= vy * vs * back / ps;
                    }
                }
                else if (i < t.N - 1)
                {
                    // The agent held s0 until the send period before s1, then moved to s1.
                    int i1 = t.At(i + 1);
                    long t1 = t.Ticks[i1];
                    double from = Math.Max(t0, t1 - period);
                    if (target > from)
                    {
                        double f = (target - from) / (t1 - from);
                        int p = i1 * 5;
                        x += (v[p] - x) * f;
                        y += (v[p + 1] - y) * f;
                        double dh = v[p + 4] - hd;
                        if (dh > 32768) dh -= 65536; else if (dh < -32768) dh += 65536;
                        hd += dh * f;
                    }
                }
                else if (target > t0)
                {
                    double ext = Math.Min(target - t0, period) / rate;
                    x += vx * vs * ext / ps;
                    y += vy * vs * ext / ps;
                }
                SampledAgent s;
                if (n < pool.Count) s = pool[n]; else { s = new SampledAgent(); pool.Add(s); }
                n++;
                s.Id = t.Id;
                s.Group = t.Group;
                s.GroupName = t.Group < Groups.Count ? Groups[t.Group] : "";
                s.Mine = Mine.Contains(t.Id);
                s.X = (float)(x * ps);
                s.Y = (float)(y * ps);
                double rad = hd * (2 * Math.PI / 65536);
                if (rad >= 2 * Math.PI) rad -= 2 * Math.PI; else if (rad < 0) rad += 2 * Math.PI;
                s.Heading = (float)rad;
                s.Vx = vx * vs;
                s.Vy = vy * vs;
                output.Add(s);
            }
            return output;
        }
    }
}
