// Unit tests: ClockSync (offset, drift, outliers) and WorldView.Sample() (interpolation between
// the states around the render tick, at most one tick of extrapolation, cell crossings).
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
    }
}
