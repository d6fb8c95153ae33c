// Protocol v4 cells messages (PROTOCOL.md §6.8) from the spec, independent of the golden vectors:
// a seeded property-style round trip (random worlds over many ticks as cells messages with
// keyframe and delta entries, spans and ages: decode == the message, re-encode == the bytes,
// applied through a WorldView equal to the truth with every message checksum), all-or-nothing
// (a chain break, a bad entry or a checksum mismatch leaves every cell as it was and resyncs), the
// malformed encodings the decoder refuses, Subscribe.every_n_ticks, and the protocol-7 codings:
// positions chained through a whole message (keyframe → keyframe, keyframe → entered, entered →
// keyframe) and the runs of subscribed.cells (with the run lists a decoder refuses).
using System;
using System.Collections;
using System.Collections.Generic;
using System.Linq;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    [TestFixture]
    public class CellsTests
    {
        static readonly Quantization Quant = new Quantization { PosStep = 0.01f, VelStep = 0.1f, PredictNum = 32768, OrientSnap = 0.035f };
        static readonly WorldInfo Info = new WorldInfo { Id = 3, Name = "cells", MinX = 0, MinY = 0, MaxX = 80, MaxY = 80, AoiCellSize = 20, Cols = 4, Rows = 4 };
        const int NCells = 16;

        static byte[] Hex(string s)
        {
            var b = new byte[s.Length / 2];
            for (int i = 0; i < b.Length; i++) b[i] = Convert.ToByte(s.Substring(2 * i, 2), 16);
            return b;
        }
        static string ToHex(byte[] b) { return string.Concat(b.Select(x => x.ToString("x2"))); }

        static Dictionary<string, object> Kf(long cell, long tick, List<QAgent> agents)
        {
            return new Dictionary<string, object> { { "keyframe", new Dictionary<string, object> { { "cell", cell }, { "tick", tick }, { "agents", agents } } } };
        }
        static Dictionary<string, object> Dl(long cell, long baseTick, List<object> left, List<object> changed, List<QAgent> entered)
        {
            return new Dictionary<string, object> { { "delta", new Dictionary<string, object> { { "cell", cell }, { "base_tick", baseTick }, { "left", left }, { "changed", changed }, { "entered", entered } } } };
        }
        static Dictionary<string, object> Msg(long world, long tick, long span, ulong? sum, List<object> entries)
        {
            return new Dictionary<string, object>
            {
                { "type", "cells" }, { "world", world }, { "tick", tick }, { "span", span },
                { "checksum", sum.HasValue ? sum.Value.ToString("x16") : null }, { "entries", entries },
            };
        }

        /// <summary>The delta from prev to next (sorted) as the server builds it (frames.rs encode_delta).</summary>
        static Dictionary<string, object> Diff(long cell, long baseTick, List<QAgent> prev, List<QAgent> next)
        {
            var left = new List<object>();
            var changed = new List<object>();
            var entered = new List<QAgent>();
            int i = 0, j = 0;
            while (i < prev.Count && j < next.Count)
            {
                var p = prev[i];
                var n = next[j];
                if (p.Id == n.Id)
                {
                    if (p.Group != n.Group) { left.Add((long)p.Id); entered.Add(n); }
                    else
                    {
                        bool moved = p.PosX != n.PosX || p.PosY != n.PosY || p.VelX != n.VelX || p.VelY != n.VelY;
                        var c = new Dictionary<string, object> { { "index", (long)i } };
                        if (moved)
                        {
                            c["dvel"] = new List<object> { (long)(n.VelX - p.VelX), (long)(n.VelY - p.VelY) };
                            c["dpos"] = new List<object> { (long)(n.PosX - p.PosX - Codec.Predict(n.VelX, Quant.PredictNum)), (long)(n.PosY - p.PosY - Codec.Predict(n.VelY, Quant.PredictNum)) };
                        }
                        if (p.Orient != n.Orient)
                        {
                            if (Packed.RobustHeading(n.VelX, n.VelY) == n.Orient) c["face"] = true;
                            else c["dorient"] = (long)((n.Orient - p.Orient + 98304) % 65536 - 32768);
                        }
                        if (moved || p.Orient != n.Orient) changed.Add(c);
                    }
                    i++; j++;
                }
                else if (p.Id < n.Id) left.Add((long)prev[i++].Id);
                else entered.Add(next[j++]);
            }
            while (i < prev.Count) left.Add((long)prev[i++].Id);
            while (j < next.Count) entered.Add(next[j++]);
            if (left.Count == 0 && changed.Count == 0 && entered.Count == 0) return null;
            return Dl(cell, baseTick, left, changed, entered);
        }

        sealed class World
        {
            readonly Random r;
            readonly List<QAgent> agents = new List<QAgent>();
            public World(int seed, int n)
            {
                r = new Random(seed);
                uint id = 0;
                for (int k = 0; k < n; k++)
                {
                    id += (uint)(1 + r.Next(r.NextDouble() < 0.1 ? 5000 : 4));
                    int vx = r.Next(60) - 30, vy = r.Next(60) - 30;
                    agents.Add(new QAgent(id, (ushort)r.Next(3), r.Next(8000), r.Next(8000), vx, vy, vx != 0 || vy != 0 ? Codec.Heading(vx, vy) : (ushort)r.Next(65536)));
                }
            }
            public double Next() { return r.NextDouble(); }
            public List<QAgent>[] Cells()
            {
                var o = new List<QAgent>[NCells];
                for (int c = 0; c < NCells; c++) o[c] = new List<QAgent>();
                foreach (var a in agents) o[Math.Min(3, a.PosY / 2000) * 4 + Math.Min(3, a.PosX / 2000)].Add(a.Clone());
                foreach (var l in o) l.Sort((x, y) => x.Id.CompareTo(y.Id));
                return o;
            }
            public void Step()
            {
                foreach (var a in agents)
                {
                    double roll = r.NextDouble();
                    if (roll < 0.3) continue;
                    if (roll < 0.35) { a.Orient = (ushort)((a.Orient + r.Next(2000) - 1000 + 65536) % 65536); continue; }
                    if (roll < 0.37) { a.Group = (ushort)((a.Group + 1) % 3); continue; }
                    bool big = r.NextDouble() < 0.2;
                    a.VelX = Math.Max(-60, Math.Min(60, a.VelX + (big ? r.Next(40) - 20 : r.Next(5) - 2)));
                    a.VelY = Math.Max(-60, Math.Min(60, a.VelY + (big ? r.Next(40) - 20 : r.Next(5) - 2)));
                    a.PosX = Math.Max(0, Math.Min(7999, a.PosX + Codec.Predict(a.VelX, Quant.PredictNum) + r.Next(3) - 1));
                    a.PosY = Math.Max(0, Math.Min(7999, a.PosY + Codec.Predict(a.VelY, Quant.PredictNum) + r.Next(3) - 1));
                    if (a.VelX != 0 || a.VelY != 0) a.Orient = r.NextDouble() < 0.8 ? Codec.Heading(a.VelX, a.VelY) : (ushort)((a.Orient + 7) % 65536);
                }
            }
        }

        static void SameAgents(List<QAgent> a, List<QAgent> b, string what)
        {
            Assert.AreEqual(b.Count, a.Count, what + ": count");
            for (int i = 0; i < a.Count; i++) Assert.IsTrue(a[i].SameAs(b[i]), what + ": " + a[i] + " vs " + b[i]);
        }

        /// <summary>Deep equality of two decoded trees (QAgents by value, ArraySegments by bytes).</summary>
        static void SameTree(object a, object e, string path)
        {
            if (e is QAgent) { Assert.IsTrue(((QAgent)e).SameAs(a as QAgent), path); return; }
            var ed = e as Dictionary<string, object>;
            if (ed != null)
            {
                var ad = a as Dictionary<string, object>;
                Assert.IsNotNull(ad, path + ": object expected");
                CollectionAssert.AreEquivalent(ed.Keys.ToList(), ad.Keys.ToList(), path + ": keys");
                foreach (var k in ed.Keys) SameTree(ad[k], ed[k], path + "." + k);
                return;
            }
            var el = e as IList;
            if (el != null)
            {
                var al = a as IList;
                Assert.IsNotNull(al, path + ": list expected");
                Assert.AreEqual(el.Count, al.Count, path + ": length");
                for (int i = 0; i < el.Count; i++) SameTree(al[i], el[i], path + "[" + i + "]");
                return;
            }
            if (e == null) { Assert.IsNull(a, path); return; }
            Assert.AreEqual(Convert.ToString(e, System.Globalization.CultureInfo.InvariantCulture), Convert.ToString(a, System.Globalization.CultureInfo.InvariantCulture), path);
        }

        [Test]
        public void PropertyRandomWorldsRoundTripAndReplayChecksumExact()
        {
            for (int seed = 1; seed <= 10; seed++)
            {
                var w = new World(seed, 40 + seed * 15);
                long span = 1 + seed % 4;
                var view = new WorldView(Info, Quant, 20, null) { InterpDelayMs = 0 };
                var reasons = new List<string>();
                view.OnResync = reasons.Add;
                view.Subscribed(Enumerable.Range(0, NCells).Select(c => (uint)c).ToList());
                var sent = w.Cells();
                var stateTick = new long[NCells];
                long tick = span * 10;
                var entries = new List<object>();
                for (int c = 0; c < NCells; c++)
                {
                    stateTick[c] = c % 3 == 0 ? tick : tick - 1 - c % 5;
                    entries.Add(Kf(c, stateTick[c], sent[c]));
                }
                int messages = 0;
                Action<Dictionary<string, object>> check = msg =>
                {
                    var bytes = Codec.EncodeServer(msg);
                    var back = Codec.DecodeServer(bytes);
                    SameTree(back, msg, "seed " + seed + " tick " + msg["tick"]);
                    Assert.AreEqual(ToHex(bytes), ToHex(Codec.EncodeServer(back)), "encode(decode(b)) == b");
                    view.ApplyCells(Tree.Cells(Codec.DecodeServer(bytes, Codec.DefaultServerLimit, true)), 0);
                    messages++;
                };
                check(Msg(Info.Id, tick, span, Codec.CellsChecksum(sent.ToList()), entries));
                for (int round = 0; round < 30; round++)
                {
                    for (int s = 0; s < span; s++) w.Step();
                    tick += span;
                    var now = w.Cells();
                    entries = new List<object>();
                    var after = new List<List<QAgent>>();
                    for (int c = 0; c < NCells; c++)
                    {
                        if (w.Next() < 0.05)
                        {
                            long st = w.Next() < 0.5 ? tick : Math.Max(0, tick - 1 - (long)(w.Next() * 3));
                            entries.Add(Kf(c, st, now[c]));
                            after.Add(now[c]);
                            stateTick[c] = st;
                            continue;
                        }
                        var d = Diff(c, stateTick[c], sent[c], now[c]);
                        if (d == null) continue;
                        entries.Add(d);
                        after.Add(now[c]);
                        stateTick[c] = tick;
                    }
                    check(Msg(Info.Id, tick, span, round % 3 != 2 ? Codec.CellsChecksum(after) : (ulong?)null, entries));
                    sent = now;
                }
                CollectionAssert.IsEmpty(reasons, "seed " + seed + ": no resync");
                var truth = sent.SelectMany(l => l).OrderBy(a => a.Id).ToList();
                SameAgents(view.Agents(), truth, "seed " + seed + ": the view equals the world");
                Assert.AreEqual(messages, view.CellsMessages);
                Assert.AreEqual(span, view.Span);
                for (int c = 0; c < NCells; c++) Assert.AreEqual(stateTick[c], view.Cells[(uint)c].Tick, "seed " + seed + " cell " + c);
            }
        }

        static List<QAgent> A() { return new List<QAgent> { new QAgent(1, 0, 100, 100, 10, 0, 0), new QAgent(4, 1, 300, 120, 0, 0, 5) }; }
        static List<QAgent> B() { return new List<QAgent> { new QAgent(7, 0, 2500, 100, 0, -3, Codec.Heading(0, -3)) }; }

        static WorldView TwoCells(List<string> reasons)
        {
            var view = new WorldView(Info, Quant, 20, null) { InterpDelayMs = 0 };
            view.Subscribed(Enumerable.Range(0, NCells).Select(c => (uint)c).ToList());
            view.OnResync = reasons.Add;
            var key = Msg(Info.Id, 10, 1, Codec.CellsChecksum(new List<List<QAgent>> { A(), B() }), new List<object> { Kf(0, 10, A()), Kf(1, 10, B()) });
            view.ApplyCells(Tree.Cells(Codec.DecodeServer(Codec.EncodeServer(key), Codec.DefaultServerLimit, true)), 0);
            CollectionAssert.IsEmpty(reasons);
            return view;
        }

        static string Snapshot(WorldView v)
        {
            return string.Join(";", v.Cells.OrderBy(kv => kv.Key).Select(kv => kv.Key + "@" + kv.Value.Tick + ":" + string.Join(",", kv.Value.Agents.Select(a => a.ToString()))));
        }

        static Dictionary<string, object> MoveA()
        {
            return Dl(0, 10, new List<object>(), new List<object> { new Dictionary<string, object> { { "index", 0L }, { "dpos", new List<object> { 1L, 0L } }, { "dvel", new List<object> { 0L, 0L } } } }, new List<QAgent>());
        }

        [Test]
        public void AllOrNothing()
        {
            var cases = new[]
            {
                Tuple.Create("chain break", (object)Dl(1, 9, new List<object>(), new List<object> { new Dictionary<string, object> { { "index", 0L }, { "dorient", 3L } } }, new List<QAgent>()), (ulong?)null, "held at 10"),
                Tuple.Create("left not held", (object)Dl(1, 10, new List<object> { 8L }, new List<object>(), new List<QAgent>()), (ulong?)null, "left agent 8"),
                Tuple.Create("cell outside the world", (object)Kf(NCells, 11, new List<QAgent>()), (ulong?)null, "outside the world"),
                Tuple.Create("checksum mismatch", (object)Dl(1, 10, new List<object> { 7L }, new List<object>(), new List<QAgent>()), (ulong?)0x0123456789abcdefUL, "checksum mismatch"),
            };
            foreach (var c in cases)
            {
                var reasons = new List<string>();
                var view = TwoCells(reasons);
                var before = Snapshot(view);
                int deltas = view.Deltas;
                var msg = Msg(Info.Id, 11, 1, c.Item3, new List<object> { MoveA(), c.Item2 });
                view.ApplyCells(Tree.Cells(Codec.DecodeServer(Codec.EncodeServer(msg), Codec.DefaultServerLimit, true)), 0);
                Assert.AreEqual(1, reasons.Count, c.Item1 + ": one resync");
                StringAssert.Contains(c.Item4, reasons[0], c.Item1);
                Assert.AreEqual(before, Snapshot(view), c.Item1 + ": every cell as before the message");
                Assert.AreEqual(deltas, view.Deltas, c.Item1 + ": nothing counted");
            }
            // The same first entry with a good second one applies and verifies.
            {
                var reasons = new List<string>();
                var view = TwoCells(reasons);
                var a2 = A();
                a2[0].PosX += Codec.Predict(10, Quant.PredictNum) + 1;
                var msg = Msg(Info.Id, 11, 1, Codec.CellsChecksum(new List<List<QAgent>> { a2, new List<QAgent>() }),
                    new List<object> { MoveA(), Dl(1, 10, new List<object> { 7L }, new List<object>(), new List<QAgent>()) });
                view.ApplyCells(Tree.Cells(Codec.DecodeServer(Codec.EncodeServer(msg), Codec.DefaultServerLimit, true)), 0);
                CollectionAssert.IsEmpty(reasons);
                SameAgents(view.Agents(), a2, "applied");
                Assert.AreEqual(2, view.Deltas);
            }
        }

        [Test]
        public void MessageChecksumFoldsCellChecksumsLittleEndian()
        {
            var lists = new List<List<QAgent>> { new List<QAgent> { new QAgent(3, 1, 5, -6, 7, 8, 9) }, new List<QAgent>(), new List<QAgent> { new QAgent(1, 0, 0, 0, 0, 0, 0) } };
            ulong h = 0xcbf29ce484222325UL;
            foreach (var l in lists)
            {
                var le = BitConverter.GetBytes(Codec.Checksum64(l));
                if (!BitConverter.IsLittleEndian) Array.Reverse(le);
                foreach (var b in le) h = unchecked((h ^ b) * 0x100000001b3UL);
            }
            Assert.AreEqual(h, Codec.CellsChecksum(lists));
            Assert.AreEqual(0xcbf29ce484222325UL, Codec.CellsChecksum(new List<List<QAgent>>()));
        }

        [Test]
        public void ChainedPositionsWrap()
        {
            var agents = new List<QAgent> { new QAgent(2, 0, int.MaxValue, int.MinValue, 0, 0, 0), new QAgent(3, 0, int.MinValue, int.MaxValue, 0, 0, 0) };
            var next = new List<QAgent> { new QAgent(1, 0, 0, 0, 0, 0, 0) };
            var bytes = Codec.EncodeServer(Msg(0, 5, 1, null, new List<object> { Kf(0, 5, agents), Kf(1, 5, next) }));
            var h = ToHex(bytes);
            StringAssert.StartsWith("0700050100", h);
            // Cell 0's second record: id 3 (gap 0, S) -> 02, chained +1, -1 after wrapping -> zz 02 01,
            // vel 0 0, orient 0. Cell 1 (gap 0, K -> 02, one record): id 1 (gap 1, S) -> 06, chained on
            // cell 0's last record: 0 - int.MinValue wraps to int.MinValue -> zz 2^32 - 1 = ff ff ff ff 0f,
            // 0 - int.MaxValue -> zz 2^32 - 3 = fd ff ff ff 0f.
            StringAssert.EndsWith("020201000000" + "0201" + "06ffffffff0ffdffffff0f000000", h, "chained after wrapping, also from one entry to the next");
            var back = Tree.Cells(Codec.DecodeServer(bytes));
            SameAgents(back.Entries[0].Agents, agents, "decoded");
            SameAgents(back.Entries[1].Agents, next, "decoded next entry");
        }

        [Test]
        public void PositionsChainThroughTheWholeMessage()
        {
            // Protocol 7 (§6.8): one position register per message, from (0, 0), through keyframe
            // agents and delta entered records alike; id gaps and the S flag's group restart per list.
            var k0 = new List<QAgent> { new QAgent(5, 1, 1000, 2000, 0, 0, 0), new QAgent(9, 1, 1003, 1998, 0, 0, 0) };
            var k2 = new List<QAgent> { new QAgent(2, 1, 1010, 1990, 0, 0, 0) };
            var e3 = new List<QAgent> { new QAgent(7, 3, 1000, 2010, 0, 0, 0) };
            var k4 = new List<QAgent> { new QAgent(1, 0, 1000, 2010, 10, 0, 0) };
            var msg = Msg(Info.Id, 100, 1, null, new List<object>
            {
                Kf(0, 100, k0), Kf(1, 97, new List<QAgent>()), Kf(2, 100, k2),
                Dl(3, 99, new List<object>(), new List<object>(), e3), Kf(4, 100, k4),
            });
            var expected =
                // cell 0: gap 0, K -> 02; 2 records. id 5: gap 5, S=0, F=0 -> 14, group 1, pos from
                // (0, 0): zz 1000 = 2000 -> d0 0f, zz 2000 = 4000 -> a0 1f, vel 0 0, orient 0. id 9:
                // gap 3, S=1 -> 0e, pos (+3, -2) -> zz 06 03, vel 0 0, orient 0.
                "0202" + "1401d00fa01f000000" + "0e0603000000" +
                // cell 1: gap 0, K|B -> 03, age 3, no records (the register stays at (1003, 1998)).
                "030300" +
                // cell 2: gap 0, K -> 02; 1 record. id 2: its gap and group restart with the list
                // (gap 2, S=0 -> 08, group 1), pos chained on cell 0's last record: (7, -8) -> zz 0e 0f
                // (version 6 restarted here: zz 1010, zz 1990 = e4 0f 8c 1f).
                "0201" + "08010e0f000000" +
                // cell 3: delta, base implied by the span -> 00; c = E -> 01; 1 entered: id 7 (gap 7,
                // S=0 -> 1c), group 3, pos chained on cell 2's record: (-10, 20) -> zz 13 28.
                "0001" + "01" + "1c031328000000" +
                // cell 4: gap 0, K -> 02; 1 record. id 1 (gap 1, S=1, F=1 -> 07), pos chained on the
                // entered record: (0, 0) -> 00 00, vel zz 10 = 14, 0, orient heading(vel).
                "0201" + "0700001400";
            var bytes = Codec.EncodeServer(msg);
            Assert.AreEqual("07036401" + "00" + (expected.Length / 2).ToString("x2") + expected, ToHex(bytes));
            var back = Codec.DecodeServer(bytes);
            SameTree(back, msg, "decoded");
            var c = Tree.Cells(Codec.DecodeServer(bytes, Codec.DefaultServerLimit, true));
            Assert.AreEqual(5, c.Entries.Count);
            SameAgents(c.Entries[2].Agents, k2, "keyframe after keyframe");
            SameAgents(c.Entries[3].Agents, e3, "entered after keyframe");
            SameAgents(c.Entries[4].Agents, k4, "keyframe after entered");
            // The same entries through Packed directly.
            var entries = Hex(expected);
            SameTree(Packed.DecodeEntries(entries, 0, entries.Length, 100, 1, false), msg["entries"], "entries");
            Assert.AreEqual(expected, ToHex(Packed.EncodeEntries((IList)msg["entries"], 100, 1)));
            // Applied through a view: every cell holds its agents at their positions.
            var view = new WorldView(Info, Quant, 20, null) { InterpDelayMs = 0 };
            var reasons = new List<string>();
            view.OnResync = reasons.Add;
            view.Subscribed(Enumerable.Range(0, NCells).Select(x => (uint)x).ToList());
            view.ApplyCells(Tree.Cells(Codec.DecodeServer(Codec.EncodeServer(Msg(Info.Id, 99, 1, null, new List<object> { Kf(3, 99, new List<QAgent>()) })), Codec.DefaultServerLimit, true)), 0);
            var sum = Codec.CellsChecksum(new List<List<QAgent>> { k0, new List<QAgent>(), k2, e3, k4 });
            msg["checksum"] = sum.ToString("x16");
            view.ApplyCells(Tree.Cells(Codec.DecodeServer(Codec.EncodeServer(msg), Codec.DefaultServerLimit, true)), 0);
            CollectionAssert.IsEmpty(reasons);
            SameAgents(view.Agents(), k0.Concat(k2).Concat(e3).Concat(k4).OrderBy(a => a.Id).ToList(), "view");
        }

        static Dictionary<string, object> SubscribedMsg(long world, List<object> cells)
        {
            return new Dictionary<string, object>
            {
                { "type", "command_result" }, { "request_id", 7L },
                // (Protocol v9 appended `groups`: here none, one byte.)
                { "result", new Dictionary<string, object> { { "type", "subscribed" }, { "world", world }, { "cells", cells }, { "groups", new List<object>() } } },
            };
        }

        static List<object> CellsOf(Dictionary<string, object> msg) { return (List<object>)((Dictionary<string, object>)msg["result"])["cells"]; }

        [Test]
        public void SubscribedCellsAreRuns()
        {
            // Protocol 7 (§5.2): per run `start - next`, `length - 1`, `next` the cell after the previous
            // run (initially 0). Runs (0, 3 cells), (5 = 3 + 2, 1), (9 = 6 + 3, 2), then the last cell
            // 2^32 - 1 = 11 + 4294967284 (f4 ff ff ff 0f), 1 cell: 12 bytes.
            var cells = new List<object> { 0L, 1L, 2L, 5L, 9L, 10L, 4294967295L };
            var bytes = Codec.EncodeServer(SubscribedMsg(2, cells));
            Assert.AreEqual("04070102" + "0c" + "0002" + "0200" + "0301" + "f4ffffff0f00" + "00", ToHex(bytes));
            var back = Codec.DecodeServer(bytes);
            SameTree(back, SubscribedMsg(2, cells), "decoded");
            CollectionAssert.AreEqual(new uint[] { 0, 1, 2, 5, 9, 10, uint.MaxValue }, Tree.U32s(CellsOf(back)), "as the client reads them");
            // None: no bytes. A whole 10 x 10 world: one run, (0, 100 cells).
            Assert.AreEqual("040701020000", ToHex(Codec.EncodeServer(SubscribedMsg(2, new List<object>()))));
            CollectionAssert.IsEmpty(CellsOf(Codec.DecodeServer(Hex("040701020000"))));
            var world = Enumerable.Range(0, 100).Select(c => (object)(long)c).ToList();
            Assert.AreEqual("0407010202006300", ToHex(Codec.EncodeServer(SubscribedMsg(2, world))));
            CollectionAssert.AreEqual(world, CellsOf(Codec.DecodeServer(Hex("0407010202006300"))));
            // A rectangle of a 10-column grid, rows 3..4, columns 6..7: one run per row.
            Assert.AreEqual("04070102" + "04" + "2401" + "0801" + "00", ToHex(Codec.EncodeServer(SubscribedMsg(2, new List<object> { 36L, 37L, 46L, 47L }))));
            // 2^20 cells are the most a run list may hold (here one run, length - 1 = ff ff 3f).
            var most = CellsOf(Codec.DecodeServer(Hex("04070102" + "04" + "00ffff3f" + "00")));
            Assert.AreEqual(Packed.MaxRunCells, most.Count);
            Assert.AreEqual((long)Packed.MaxRunCells - 1, most[most.Count - 1]);
            // Not ascending, repeated or out of u32: the encoder refuses them.
            foreach (var bad in new[] { new List<object> { 3L, 2L }, new List<object> { 3L, 3L }, new List<object> { -1L }, new List<object> { 4294967296L } })
                Assert.AreEqual(ProtoErrorKind.Malformed, Assert.Throws<ProtoException>(() => Codec.EncodeServer(SubscribedMsg(2, bad))).Kind, string.Join(",", bad));
        }

        [TestCase("0401010104" + "00808040", TestName = "MalformedRuns(one run of 2^20 + 1 cells)")]
        [TestCase("0401010106" + "00ffff3f" + "0000", TestName = "MalformedRuns(2^20 cells, then one more)")]
        [TestCase("040101010a" + "00" + "ffffffffffffffff7f", TestName = "MalformedRuns(a run of 2^63 cells, refused before allocating)")]
        [TestCase("040101010b" + "00" + "ffffffffffffffffff01", TestName = "MalformedRuns(length - 1 of 2^64 - 1)")]
        [TestCase("0401010106" + "ffffffff0f01", TestName = "MalformedRuns(run from cell 2^32 - 1, 2 cells)")]
        [TestCase("0401010106" + "808080801000", TestName = "MalformedRuns(run from cell 2^32)")]
        [TestCase("0401010108" + "ffffffff0f00" + "0000", TestName = "MalformedRuns(a run after the one ending at cell 2^32 - 1)")]
        [TestCase("040101010d" + "0000" + "ffffffffffffffffff01" + "00", TestName = "MalformedRuns(start - next overflowing 64 bits)")]
        [TestCase("0401010101" + "00", TestName = "MalformedRuns(a run cut short)")]
        public void MalformedSubscribedRunsAreRefused(string hex)
        {
            var e = Assert.Throws<ProtoException>(() => Codec.DecodeServer(Hex(hex)));
            Assert.AreEqual(ProtoErrorKind.Malformed, e.Kind, e.Message);
        }

        [TestCase("07000a000000", "malformed", TestName = "Malformed(span 0)")]
        [TestCase("07000a010003030000", "malformed", TestName = "Malformed(age 0, keyframe)")]
        [TestCase("07000a010003010000", "malformed", TestName = "Malformed(age 0, delta)")]
        [TestCase("07000a010003030b00", "malformed", TestName = "Malformed(state tick below 0)")]
        [TestCase("07000a0b00020000", "malformed", TestName = "Malformed(base tick below 0)")]
        [TestCase("07000a0100020205", "malformed", TestName = "Malformed(record count past the end)")]
        [TestCase("07000a0100020014", "malformed", TestName = "Malformed(change count past the end)")]
        [TestCase("07000a010003000403", "malformed", TestName = "Malformed(reserved motion mode)")]
        [TestCase("07000a010005020000", "unexpected_end", TestName = "Malformed(entries longer than the frame)")]
        [TestCase("07000a01000000", "trailing_bytes", TestName = "Malformed(trailing byte)")]
        public void MalformedCellsAreRefused(string hex, string kind)
        {
            var e = Assert.Throws<ProtoException>(() => Codec.DecodeServer(Hex(hex)));
            Assert.AreEqual(kind, ProtoException.KindName(e.Kind), e.Message);
        }

        [Test]
        public void EmptyCellsMessageDecodes()
        {
            var c = Tree.Cells(Codec.DecodeServer(Hex("07000a010000")));
            Assert.AreEqual(10, c.Tick);
            Assert.AreEqual(1, c.Span);
            Assert.IsFalse(c.Checksum.HasValue);
            Assert.AreEqual(0, c.Entries.Count);
        }

        [Test]
        public void SubscribeCarriesEveryNTicks()
        {
            var msg = new Dictionary<string, object> { { "type", "subscribe" }, { "request_id", 5L }, { "world", "w" }, { "area", new Dictionary<string, object> { { "type", "whole_world" } } } };
            var bytes = Codec.EncodeClient(msg);
            Assert.AreEqual("010501770101", ToHex(bytes));
            Assert.AreEqual(1L, Codec.DecodeClient(bytes)["every_n_ticks"]);
            msg["every_n_ticks"] = 4L;
            Assert.AreEqual(4L, Codec.DecodeClient(Codec.EncodeClient(msg))["every_n_ticks"]);
        }
    }
}
