// Unit tests: ClockSync (offset, drift, outliers) and WorldView.Sample() (interpolation between
// the states around the render tick, at most one tick of extrapolation, cell crossings, speed kept
// across a cell boundary and the subscription area's edges).
using System;
using System.Collections.Generic;
using System.Linq;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    [TestFixture]
    public class ViewTests
    {
        static readonly WorldInfo Info = new WorldInfo { Id = 1, Name = "w", MinX = 0, MinY = 0, MaxX = 100, MaxY = 100, AoiCellSize = 50, Cols = 2, Rows = 1 };
        static readonly Quantization Quant = new Quantization { PosStep = 0.01f, VelStep = 0.1f, PredictNum = 32768, OrientSnap = 0.035f };

        static QAgent A(uint id, int x, int y, int vx, int vy, int orient = -1)
        {
            return new QAgent(id, 0, x, y, vx, vy, orient >= 0 ? (ushort)orient : Codec.Heading(vx, vy));
        }
        static Frame Kf(uint cell, long tick, params QAgent[] agents) { return new Frame { World = 1, Cell = cell, Tick = tick, Agents = agents.ToList() }; }
        static WorldView View(double delayMs) { return new WorldView(Info, Quant, 20, null) { InterpDelayMs = delayMs }; }

        [Test]
        public void ClockFitsOffsetAndDriftAndIgnoresOutliers()
        {
            var c = new ClockSync();
            c.SetRate(20);
            Func<double, double> truth = t => 500 + 0.02 * (1 + 2e-4) * t;
            var rnd = new Random(1);
            for (int i = 0; i < 60; i++)
            {
                double sent = 1000 + i * 500;
                bool slow = i % 7 == 3;
                double rtt = slow ? 400 : 4 + rnd.NextDouble() * 4;
                double at = sent + (slow ? 390 : rtt * rnd.NextDouble());
                c.AddSample(sent, sent + rtt, (long)Math.Floor(truth(at)));
            }
            double now = 1000 + 60 * 500;
            Assert.AreEqual(truth(now), c.ServerTick(now), 0.35);
            Assert.AreEqual(2e-4, c.Drift, 1e-3);
        }

        [Test]
        public void SampleInterpolatesPositionAndHeading()
        {
            var v = View(0);
            v.ApplyKeyframe(Kf(0, 10, A(1, 1000, 1000, 20, 0, 0)));
            v.ApplyKeyframe(Kf(0, 11, A(1, 1020, 1000, 20, 0, 1000)));
            v.Clock.AddSample(0, 0, 10); // server tick 10.5 at local 0
            var s = v.Sample(0)[0];
            Assert.AreEqual(10.1, s.X, 1e-4);
            Assert.AreEqual(10, s.Y, 1e-4);
            Assert.AreEqual(500 * 2 * Math.PI / 65536, s.Heading, 1e-5);
        }

        [Test]
        public void SampleExtrapolatesAtMostOneTickAndRendersBehindByTheDelay()
        {
            var v = View(0);
            v.ApplyKeyframe(Kf(0, 10, A(1, 1000, 0, 20, 0)));
            v.Clock.AddSample(0, 0, 100);
            Assert.AreEqual(10 + 2.0 / 20, v.Sample(0)[0].X, 1e-4);
            var d = View(100);
            d.ApplyKeyframe(Kf(0, 10, A(1, 0, 0, 0, 0, 0)));
            d.ApplyKeyframe(Kf(0, 11, A(1, 100, 0, 0, 0, 0)));
            d.ApplyKeyframe(Kf(0, 12, A(1, 200, 0, 0, 0, 0)));
            d.Clock.AddSample(0, 0, 12);
            Assert.AreEqual(10.5, d.RenderTick(0), 1e-9);
            Assert.AreEqual(0.5, d.Sample(0)[0].X, 1e-4);
        }

        [Test]
        public void AnAgentCrossingCellsAppearsOnce()
        {
            var v = View(0);
            v.ApplyKeyframe(Kf(0, 10, A(1, 4990, 0, 20, 0), A(2, 100, 100, 0, 0, 0)));
            v.ApplyKeyframe(Kf(1, 10));
            v.Subscribed(new List<uint> { 0, 1 });
            v.ApplyDelta(new Frame { IsDelta = true, World = 1, Cell = 0, Tick = 11, BaseTick = 10, Left = new List<object> { 1L }, Changed = new List<object>(), Agents = new List<QAgent>() });
            v.ApplyDelta(new Frame { IsDelta = true, World = 1, Cell = 1, Tick = 11, BaseTick = 10, Left = new List<object>(), Changed = new List<object>(), Agents = new List<QAgent> { A(1, 5010, 0, 20, 0) } });
            foreach (var t in new[] { 10, 10.5, 11, 11.5 })
            {
                v.Clock.Reset();
                v.Clock.AddSample(0, 0, (long)Math.Floor(t - 0.5));
                var ids = v.Sample((t - 0.5 - Math.Floor(t - 0.5)) * 50).Select(s => s.Id).OrderBy(x => x).ToList();
                CollectionAssert.AreEqual(new uint[] { 1, 2 }, ids, "tick " + t);
            }
            Assert.AreEqual(5010, v.Agent(1).PosX);
        }

        [Test]
        public void AWrongBaseResyncsAndKeepsTheTable()
        {
            var v = View(100);
            var reasons = new List<string>();
            v.OnResync = reasons.Add;
            v.ApplyKeyframe(Kf(0, 10, A(1, 0, 0, 0, 0, 0)));
            v.ApplyDelta(new Frame { IsDelta = true, World = 1, Cell = 0, Tick = 13, BaseTick = 12, Left = new List<object>(), Changed = new List<object>(), Agents = new List<QAgent>() });
            Assert.AreEqual(1, reasons.Count);
            Assert.AreEqual(1, v.Count);
            var bad = Kf(0, 11, A(1, 5, 0, 0, 0, 0));
            bad.Checksum = 12345;
            v.ApplyKeyframe(bad);
            Assert.AreEqual(2, reasons.Count);
            Assert.AreEqual(0, v.Agent(1).PosX);
        }

        [Test]
        public void EveryFourTicksInterpolatesOverTheSendPeriod()
        {
            var v = View(0);
            v.EveryNTicks = 4;
            var c0 = new CellsMessage { World = 1, Tick = 100, Span = 4 };
            c0.Entries.Add(Kf(0, 100, A(1, 1000, 1000, 0, 0, 0)));
            v.ApplyCells(c0, 0);
            var c1 = new CellsMessage { World = 1, Tick = 104, Span = 4 };
            c1.Entries.Add(new Frame
            {
                IsDelta = true, World = 1, Cell = 0, Tick = 104, BaseTick = 100, Left = new List<object>(), Agents = new List<QAgent>(),
                Changed = new List<object> { new Dictionary<string, object> { { "index", 0L }, { "dpos", new List<object> { 400L, 0L } }, { "dvel", new List<object> { 0L, 0L } } } },
            });
            v.ApplyCells(c1, 0);
            Assert.AreEqual(0, v.Resyncs);
            Assert.AreEqual(104, v.CellsTick);
            v.Clock.AddSample(0, 0, 101); // server tick 101.5 at local 0
            Assert.AreEqual(11.5, v.Sample(0)[0].X, 1e-4, "1.5 of the 4 ticks done");
            v.EveryNTicks = 1;
            Assert.AreEqual(10.0, v.Sample(0)[0].X, 1e-4, "span 1: held until the tick before");
            v.EveryNTicks = 4;
            Assert.AreEqual(108, v.RenderTick(10000), 1e-9);
        }

        // Smooth everywhere: an agent at a constant 5 units/s entering the subscribed area, crossing
        // a cell boundary and leaving the area, streamed as the server does (one cells message per
        // tick at 20 Hz with left / changed / entered delta entries), sampled at 60 Hz: every step
        // between consecutive samples within 5 % of the true speed, drawn once, without a gap.
        static readonly WorldInfo Strip = new WorldInfo { Id = 1, Name = "w", MinX = 0, MinY = 0, MaxX = 100, MaxY = 25, AoiCellSize = 25, Cols = 4, Rows = 1 };
        static readonly uint[] Covered = { 1, 2 }; // x in [25, 75)
        const double Speed = 5;

        static Dictionary<uint, List<QAgent>> CellsAt(long tick)
        {
            int vel = (int)Math.Round(Speed / Quant.VelStep);
            int x = (int)Math.Round((15 + Speed * tick / 20) / Quant.PosStep);
            var agents = new[] { new QAgent(7, 0, x, 1000, vel, 0, Codec.Heading(vel, 0)), new QAgent(9, 0, 5000, 2000, 0, 0, 0) };
            var o = Covered.ToDictionary(c => c, c => new List<QAgent>());
            foreach (var a in agents)
            {
                uint c = (uint)Math.Floor(a.PosX * Quant.PosStep / Strip.AoiCellSize);
                if (o.ContainsKey(c)) o[c].Add(a);
            }
            return o;
        }

        static Frame DeltaOf(uint cell, long tick, long baseTick, List<QAgent> prev, List<QAgent> next)
        {
            var left = prev.Where(p => !next.Any(n => n.Id == p.Id)).Select(p => (object)(long)p.Id).ToList();
            var entered = next.Where(n => !prev.Any(p => p.Id == n.Id)).ToList();
            var changed = new List<object>();
            foreach (var n in next)
            {
                var p = prev.FirstOrDefault(q => q.Id == n.Id);
                if (p == null || (p.PosX == n.PosX && p.PosY == n.PosY && p.VelX == n.VelX && p.VelY == n.VelY)) continue;
                changed.Add(new Dictionary<string, object>
                {
                    { "id", (long)n.Id },
                    { "dvel", new List<object> { (long)(n.VelX - p.VelX), (long)(n.VelY - p.VelY) } },
                    { "dpos", new List<object> { (long)(n.PosX - p.PosX - Codec.Predict(n.VelX, Quant.PredictNum)), (long)(n.PosY - p.PosY - Codec.Predict(n.VelY, Quant.PredictNum)) } },
                });
            }
            if (left.Count == 0 && entered.Count == 0 && changed.Count == 0) return null;
            return new Frame { IsDelta = true, World = 1, Cell = cell, Tick = tick, BaseTick = baseTick, Left = left, Changed = changed, Agents = entered };
        }

        [Test]
        public void SixtyHertzSamplesAcrossACellBoundaryAndTheAreaEdgesKeepTheSpeed()
        {
            var view = new WorldView(Strip, Quant, 20, new float[] { 25, 0, 75, 25 }) { InterpDelayMs = 100 };
            view.Clock.AddSample(0, 0, 0); // server tick = local ms · 20 / 1000
            var reasons = new List<string>();
            view.OnResync = reasons.Add;
            Dictionary<uint, List<QAgent>> held = null;
            var heldTick = new Dictionary<uint, long>();
            long nextTick = 0;
            double dt = 1000.0 / 60;
            double prevX = double.NaN, prevY = 0;
            int drawn = 0, gaps = 0, lastSeen = -1, firstSeen = -1;
            var bad = new List<string>();
            double minX = double.MaxValue, maxX = double.MinValue;
            bool nearBoundary = false;
            for (int k = 0; k * dt <= 15000; k++)
            {
                double t = k * dt;
                while (nextTick * 50 <= t)
                {
                    long tick = nextTick++;
                    var now = CellsAt(tick);
                    var m = new CellsMessage { World = 1, Tick = tick, Span = 1 };
                    if (held == null)
                    {
                        view.Subscribed(Covered.ToList());
                        foreach (var c in Covered) m.Entries.Add(new Frame { World = 1, Cell = c, Tick = tick, Agents = now[c] });
                    }
                    else foreach (var c in Covered) { var d = DeltaOf(c, tick, heldTick[c], held[c], now[c]); if (d != null) m.Entries.Add(d); }
                    foreach (var e in m.Entries) heldTick[e.Cell] = tick;
                    view.ApplyCells(m, tick * 50);
                    held = now;
                }
                var mine = view.Sample(t).Where(a => a.Id == 7).ToList();
                Assert.LessOrEqual(mine.Count, 1, "drawn once at " + t);
                if (mine.Count == 1)
                {
                    var a = mine[0];
                    if (firstSeen < 0) firstSeen = k; else if (lastSeen != k - 1) gaps++;
                    lastSeen = k;
                    drawn++;
                    minX = Math.Min(minX, a.X); maxX = Math.Max(maxX, a.X);
                    if (a.X > 49 && a.X < 51) nearBoundary = true;
                    if (!double.IsNaN(prevX))
                    {
                        double speed = Math.Sqrt((a.X - prevX) * (a.X - prevX) + (a.Y - prevY) * (a.Y - prevY)) / (dt / 1000);
                        if (Math.Abs(speed - Speed) > 0.05 * Speed) bad.Add("x " + a.X.ToString("F3") + ": " + speed.ToString("F2") + " u/s");
                    }
                    prevX = a.X; prevY = a.Y;
                }
                else prevX = double.NaN;
            }
            CollectionAssert.IsEmpty(reasons);
            Assert.AreEqual(0, gaps, "drawn without a gap from entry to exit");
            Assert.Greater(drawn, 580, "drawn through the area (50 units at 5 u/s: 600 samples)");
            Assert.Less(minX, 25.5);
            Assert.Greater(maxX, 74.5);
            Assert.IsTrue(nearBoundary, "samples across the cell boundary at x = 50");
            CollectionAssert.IsEmpty(bad, "every step within 5 % of 5 u/s");
        }

        [Test]
        public void PerAgentCallbacksAddedChangedRemovedOnceACrossingIsNeither()
        {
            var v = View(0);
            var log = new List<string>();
            v.AgentAdded += a => log.Add("+" + a.Id);
            v.AgentRemoved += id => log.Add("-" + id);
            Action<QAgent> changed = a => log.Add("~" + a.Id + "@" + a.PosX);
            v.AgentChanged += changed;
            Func<List<string>> take = () => { var l = new List<string>(log); log.Clear(); return l; };
            Func<uint, long, long, List<object>, List<QAgent>, Frame> delta = (cell, tick, bas, left, entered) => new Frame { IsDelta = true, World = 1, Cell = cell, Tick = tick, BaseTick = bas, Left = left, Changed = new List<object>(), Agents = entered };
            v.Subscribed(new List<uint> { 0, 1 });
            var m0 = new CellsMessage { World = 1, Tick = 10, Span = 1 };
            m0.Entries.Add(Kf(0, 10, A(1, 4990, 0, 20, 0), A(2, 100, 100, 0, 0, 0)));
            m0.Entries.Add(Kf(1, 10));
            v.ApplyCells(m0, 0);
            CollectionAssert.AreEqual(new[] { "+1", "+2" }, take());
            // Tick 11: agent 1 crosses from cell 0 to cell 1.
            var m1 = new CellsMessage { World = 1, Tick = 11, Span = 1 };
            m1.Entries.Add(delta(0, 11, 10, new List<object> { 1L }, new List<QAgent>()));
            m1.Entries.Add(delta(1, 11, 10, new List<object>(), new List<QAgent> { A(1, 5010, 0, 20, 0) }));
            v.ApplyCells(m1, 0);
            CollectionAssert.AreEqual(new[] { "~1@5010" }, take());
            // Tick 12: agent 2 despawned, agent 3 spawned.
            var m2 = new CellsMessage { World = 1, Tick = 12, Span = 1 };
            m2.Entries.Add(delta(0, 12, 11, new List<object> { 2L }, new List<QAgent> { A(3, 200, 200, 0, 0, 0) }));
            v.ApplyCells(m2, 0);
            CollectionAssert.AreEqual(new[] { "-2", "+3" }, take());
            // Per-cell frames: the crossing back in two frames is a change; a removal is reported
            // once the tick is complete (the next tick's first frame).
            v.ApplyDelta(delta(1, 13, 11, new List<object> { 1L }, new List<QAgent>()));
            CollectionAssert.IsEmpty(take());
            v.ApplyDelta(delta(0, 13, 12, new List<object> { 3L }, new List<QAgent> { A(1, 4980, 0, -20, 0) }));
            CollectionAssert.AreEqual(new[] { "~1@4980" }, take());
            v.AgentChanged -= changed;
            v.ApplyDelta(delta(0, 14, 13, new List<object>(), new List<QAgent>()));
            Assert.AreEqual(0, v.Resyncs);
            CollectionAssert.AreEqual(new[] { "-3" }, take());
        }
    }
}
