// Conformance: the C# SDK against the golden vectors of client-proto (the files the Rust and
// TypeScript tests use): every NAME.hex/NAME.json pair, every entry of invalid.json with its error
// kind, the recorded frame chain replayed (packed, decoded entries, JSON form) with every
// checksum, and the protocol-4 cells messages (server_cells_*) replayed in order the same way with
// every message checksum. VECTORS_DIR overrides the directory.
using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    [TestFixture]
    public class ConformanceTests
    {
        public static string Dir
        {
            get
            {
                var env = Environment.GetEnvironmentVariable("VECTORS_DIR");
                if (!string.IsNullOrEmpty(env)) return env;
                return Path.Combine(Root, "client-proto/tests/vectors");
            }
        }

        /// <summary>The repository (Repo.Root).</summary>
        public static string Root { get { return Repo.Root; } }

        static byte[] Hex(string s)
        {
            s = s.Trim();
            var b = new byte[s.Length / 2];
            for (int i = 0; i < b.Length; i++) b[i] = byte.Parse(s.Substring(2 * i, 2), NumberStyles.HexNumber);
            return b;
        }
        static string ToHex(byte[] b) { return string.Concat(b.Select(x => x.ToString("x2"))); }
        static byte[] ReadHex(string name) { return Hex(File.ReadAllText(Path.Combine(Dir, name + ".hex"))); }
        static Dictionary<string, object> ReadJson(string name) { return (Dictionary<string, object>)MiniJson.Parse(File.ReadAllText(Path.Combine(Dir, name + ".json"))); }

        public static IEnumerable<string> Pairs()
        {
            var names = Directory.GetFiles(Dir, "*.hex").Select(f => Path.GetFileNameWithoutExtension(f)).OrderBy(n => n, StringComparer.Ordinal).ToList();
            if (names.Count == 0) throw new Exception("no vectors in " + Dir);
            return names;
        }
        public static IEnumerable<string> Plain() { return Pairs().Where(n => !n.StartsWith("server_chain_") && !n.StartsWith("server_cells_")); }
        static List<string> Chain() { return Pairs().Where(n => n.StartsWith("server_chain_")).ToList(); }
        static List<string> CellsChain() { return Pairs().Where(n => n.StartsWith("server_cells_")).ToList(); }

        static Dictionary<string, object> AgentTree(QAgent a)
        {
            return new Dictionary<string, object>
            {
                { "id", (long)a.Id }, { "group", (long)a.Group }, { "pos", new List<object> { (long)a.PosX, (long)a.PosY } },
                { "vel", new List<object> { (long)a.VelX, (long)a.VelY } }, { "orient", (long)a.Orient },
            };
        }

        static QAgent AgentOf(object o)
        {
            var d = (Dictionary<string, object>)o;
            var pos = (List<object>)d["pos"];
            var vel = (List<object>)d["vel"];
            return new QAgent((uint)(double)d["id"], (ushort)(double)d["group"], (int)(double)pos[0], (int)(double)pos[1], (int)(double)vel[0], (int)(double)vel[1], (ushort)(double)d["orient"]);
        }

        /// <summary>A decoded tree with agent records as JSON-form objects.</summary>
        static object Plainify(object v)
        {
            var a = v as QAgent;
            if (a != null) return AgentTree(a);
            var d = v as Dictionary<string, object>;
            if (d != null) return d.ToDictionary(kv => kv.Key, kv => Plainify(kv.Value));
            var ql = v as List<QAgent>;
            if (ql != null) return ql.Select(x => (object)AgentTree(x)).ToList();
            var l = v as List<object>;
            if (l != null) return l.Select(Plainify).ToList();
            return v;
        }

        /// <summary>JSON tree → encodable tree: agent records as QAgents.</summary>
        static Dictionary<string, object> Encodable(Dictionary<string, object> json)
        {
            var d = new Dictionary<string, object>(json);
            foreach (var k in new[] { "agents", "entered" })
                if (d.ContainsKey(k) && (string)d["type"] != "spawned" && d[k] is List<object> && ((List<object>)d[k]).All(x => x is Dictionary<string, object>))
                    d[k] = ((List<object>)d[k]).Select(AgentOf).ToList();
            return d;
        }

        /// <summary>Deep equality where a JSON number written for an f32 compares after rounding to f32.</summary>
        static void Same(object actual, object expected, string path)
        {
            if (expected is double)
            {
                double e = (double)expected;
                double a;
                if (actual is float) a = (float)actual;
                else if (actual is long) a = (long)actual;
                else { Assert.Fail(path + ": number expected, got " + (actual == null ? "null" : actual.GetType().Name)); return; }
                Assert.IsTrue(a == e || a == (double)(float)e, path + ": " + a + " != " + e);
                return;
            }
            if (expected == null || expected is string || expected is bool) { Assert.AreEqual(expected, actual, path); return; }
            var el = expected as List<object>;
            if (el != null)
            {
                var al = actual as IList;
                Assert.IsNotNull(al, path + ": list expected");
                Assert.AreEqual(el.Count, al.Count, path + ": length");
                for (int i = 0; i < el.Count; i++) Same(al[i], el[i], path + "[" + i + "]");
                return;
            }
            var ed = (Dictionary<string, object>)expected;
            var ad = actual as Dictionary<string, object>;
            Assert.IsNotNull(ad, path + ": object expected");
            CollectionAssert.AreEquivalent(ed.Keys.ToList(), ad.Keys.ToList(), path + ": keys");
            foreach (var k in ed.Keys) Same(ad[k], ed[k], path + "." + k);
        }

        [Test, TestCaseSource("Plain")]
        public void Vector(string name)
        {
            var bytes = ReadHex(name);
            var json = ReadJson(name);
            bool client = name.StartsWith("client_");
            var msg = client ? Codec.DecodeClient(bytes) : Codec.DecodeServer(bytes);
            Same(Plainify(msg), json, "$");
            var again = client ? Codec.EncodeClient(Encodable(json)) : Codec.EncodeServer(Encodable(json));
            Assert.AreEqual(ToHex(bytes), ToHex(again), "encode(json) == hex");
        }

        [Test]
        public void TheHelloThisSdkSendsIsTheGoldenHello()
        {
            var v = ReadJson("client_hello");
            Assert.AreEqual(11, Codec.ProtocolVersion);
            Assert.AreEqual(Codec.ProtocolVersion, (int)(double)v["protocol_version"]);
            var h = Codec.Hello((string)v["token"], null);
            Assert.AreEqual(ToHex(ReadHex("client_hello")), ToHex(Codec.EncodeClient(h)));
            // A reconnect's Hello carries the previous Welcome's resume token.
            var r = ReadJson("client_hello_resume");
            Assert.IsNotNull(r["resume"]);
            var hr = Codec.Hello((string)r["token"], (string)r["resume"]);
            Assert.AreEqual(ToHex(ReadHex("client_hello_resume")), ToHex(Codec.EncodeClient(hr)));
        }

        [Test]
        public void TheGoldenWelcomesTellPlayerRoleAndResumeToken()
        {
            var w = Tree.Welcome(Codec.DecodeServer(ReadHex("server_welcome")));
            Assert.AreEqual(Codec.ProtocolVersion, w.ProtocolVersion);
            Assert.AreEqual("alice", w.PlayerId);
            Assert.AreEqual(Role.Player, w.Role);
            Assert.AreEqual("7f3a9c0e5b2d4f6a8c1e3b5d7f9a0c2e", w.ResumeToken);
            Assert.AreEqual(30, w.SessionGraceSecs);
            // Protocol v9: each world carries its own tick rate.
            Assert.AreEqual(20f, w.Worlds[0].TickRateHz);
            var ev = Tree.D(Codec.DecodeServer(ReadHex("server_event_tick_rate")), "event");
            Assert.AreEqual("tick_rate", ev["type"]);
            Assert.AreEqual(30f, Tree.Fl(ev, "tick_rate_hz"));
            // Protocol v10: an order that ended short of its goal.
            var gave = Tree.D(Codec.DecodeServer(ReadHex("server_event_gave_up")), "event");
            Assert.AreEqual("gave_up", gave["type"]);
            Assert.AreEqual(9L, Tree.L(gave, "agent"));
            Assert.AreEqual(3.25f, Tree.Fl(gave, "distance"));
            var unr = Tree.D(Codec.DecodeServer(ReadHex("server_event_unreachable")), "event");
            Assert.AreEqual("unreachable", unr["type"]);
            Assert.AreEqual(10L, Tree.L(unr, "agent"));
            Assert.AreEqual(12.5f, Tree.Fl(unr, "distance"));
            // Protocol v11: the world moved to another server (a live handoff).
            var moved = Codec.DecodeServer(ReadHex("server_moved"));
            Assert.AreEqual("moved", moved["type"]);
            Assert.AreEqual("arena", moved["name"]);
            Assert.AreEqual("ws://10.0.0.7:8080/ws", moved["to"]);
            var s = Tree.Welcome(Codec.DecodeServer(ReadHex("server_welcome_spectator")));
            Assert.AreEqual("carol", s.PlayerId);
            Assert.AreEqual(Role.Spectator, s.Role);
            CollectionAssert.AreEqual(new[] { "admin", "player", "spectator" }, Codec.Roles);
            Assert.AreEqual((int)Role.Spectator, Array.IndexOf(Codec.Roles, "spectator"));
            Assert.AreEqual(12, Array.IndexOf(Codec.ErrorCodes, "quota_exceeded"));
        }

        static Frame JsonFrame(Dictionary<string, object> j)
        {
            var f = new Frame { World = (uint)(double)j["world"], Cell = (uint)(double)j["cell"], Tick = (long)(double)j["tick"] };
            if (j["checksum"] != null) f.Checksum = ulong.Parse((string)j["checksum"], NumberStyles.HexNumber);
            if ((string)j["type"] == "keyframe") { f.Agents = ((List<object>)j["agents"]).Select(AgentOf).ToList(); return f; }
            f.IsDelta = true;
            f.BaseTick = (long)(double)j["base_tick"];
            f.Left = ((List<object>)j["left"]).Select(x => (object)(long)(double)x).ToList();
            f.Changed = j["changed"];
            f.Agents = ((List<object>)j["entered"]).Select(AgentOf).ToList();
            return f;
        }

        static List<QAgent> Copy(List<QAgent> l) { return l.Select(a => a.Clone()).ToList(); }
        static void SameAgents(List<QAgent> a, List<QAgent> b, string what)
        {
            Assert.AreEqual(b.Count, a.Count, what + ": count");
            for (int i = 0; i < a.Count; i++) Assert.IsTrue(a[i].SameAs(b[i]), what + ": " + a[i] + " vs " + b[i]);
        }

        [Test]
        public void ChainReplaysWithEveryChecksum()
        {
            var chain = Chain();
            Assert.GreaterOrEqual(chain.Count, 2);
            int predictNum = (int)(double)((Dictionary<string, object>)ReadJson("server_welcome")["quantization"])["predict_num"];
            var entries = new CellMap();
            var packed = new CellMap();
            var viaJson = new CellMap();
            int checkedSums = 0;
            foreach (var name in chain)
            {
                var bytes = ReadHex(name);
                var json = ReadJson(name);
                var decoded = Tree.Frame(Codec.DecodeServer(bytes));
                var raw = Tree.Frame(Codec.DecodeServer(bytes, Codec.DefaultServerLimit, true));
                Assert.AreEqual((string)json["type"] == "delta", raw.IsDelta);
                if (!raw.IsDelta)
                {
                    Same(Plainify(Codec.DecodeServer(bytes)), json, "$");
                    entries.Keyframe(decoded);
                    packed.Keyframe(raw);
                    viaJson.Keyframe(JsonFrame(json));
                }
                else
                {
                    Assert.IsInstanceOf<ArraySegment<byte>>(raw.Changed);
                    // The binary entries name base indices; through the state at base_tick they are the JSON ids.
                    var ents = (List<object>)decoded.Changed;
                    var jents = (List<object>)json["changed"];
                    Assert.AreEqual(jents.Count, ents.Count);
                    for (int i = 0; i < ents.Count; i++)
                    {
                        var e = (Dictionary<string, object>)ents[i];
                        var je = (Dictionary<string, object>)jents[i];
                        var resolved = e.Where(kv => kv.Key != "index").ToDictionary(kv => kv.Key, kv => kv.Value);
                        resolved["id"] = (long)entries.Agents[(int)(long)e["index"]].Id;
                        Same(resolved, je, name + ".changed[" + i + "]");
                    }
                    Same(decoded.Left.ToList(), json["left"], name + ".left");
                    Same(decoded.Agents.Select(a => (object)AgentTree(a)).ToList(), json["entered"], name + ".entered");
                    // encode(json with indices) == hex
                    var asBinary = new Dictionary<string, object>(json);
                    asBinary["changed"] = jents.Select(x =>
                    {
                        var d = ((Dictionary<string, object>)x).Where(kv => kv.Key != "id").ToDictionary(kv => kv.Key, kv => kv.Value);
                        d["index"] = (long)entries.Agents.FindIndex(a => a.Id == (uint)(double)((Dictionary<string, object>)x)["id"]);
                        return (object)d;
                    }).ToList();
                    Assert.AreEqual(ToHex(bytes), ToHex(Codec.EncodeServer(Encodable(asBinary))), name + ": encode(json) == hex");
                    Assert.IsTrue(entries.Delta(decoded, predictNum), name + ": entries apply");
                    Assert.IsTrue(packed.Delta(raw, predictNum), name + ": packed applies");
                    Assert.IsTrue(viaJson.Delta(JsonFrame(json), predictNum), name + ": JSON form applies");
                }
                SameAgents(packed.Agents, entries.Agents, name + " packed");
                SameAgents(viaJson.Agents, entries.Agents, name + " json");
                if (json["checksum"] != null)
                {
                    Assert.AreEqual((string)json["checksum"], Codec.ChecksumHex(entries.Agents));
                    checkedSums++;
                }
            }
            Assert.GreaterOrEqual(checkedSums, chain.Count - 1);
        }

        [Test]
        public void ChainThroughAWorldView()
        {
            var chain = Chain();
            var w = Tree.Welcome(Codec.DecodeServer(ReadHex("server_welcome")));
            var first = Tree.Frame(Codec.DecodeServer(ReadHex(chain[0])));
            var info = new WorldInfo { Id = first.World, Name = "w", MinX = 0, MinY = 0, MaxX = 1e6f, MaxY = 1e6f, AoiCellSize = 1e6f, Cols = 1, Rows = 1, TickRateHz = 20 };
            var view = new WorldView(info, w.Quantization, info.TickRateHz, null) { InterpDelayMs = 0 };
            var reasons = new List<string>();
            view.OnResync = reasons.Add;
            foreach (var name in chain)
            {
                var f = Tree.Frame(Codec.DecodeServer(ReadHex(name), Codec.DefaultServerLimit, true));
                if (f.IsDelta) view.ApplyDelta(f, 0); else view.ApplyKeyframe(f, 0);
            }
            CollectionAssert.IsEmpty(reasons);
            Assert.AreEqual((string)ReadJson(chain[chain.Count - 1])["checksum"], Codec.ChecksumHex(view.Agents()));
            Assert.AreEqual(view.Count, view.Sample(0).Count);
        }

        [Test]
        public void WrongBaseIsAChainBreakAndABadChecksumKeepsTheState()
        {
            var chain = Chain();
            var key = Tree.Frame(Codec.DecodeServer(ReadHex(chain[0])));
            var d = Tree.Frame(Codec.DecodeServer(ReadHex(chain[1]), Codec.DefaultServerLimit, true));
            var cell = new CellMap { Tick = d.BaseTick + 1000 };
            Assert.IsFalse(cell.Delta(d, 32768));
            cell = new CellMap();
            cell.Keyframe(key);
            var before = Copy(cell.Agents);
            var held = cell.Agents;
            d.Checksum = 0;
            var e = Assert.Throws<ProtoException>(() => cell.Delta(d, 32768));
            Assert.AreEqual(ProtoErrorKind.Checksum, e.Kind);
            Assert.AreSame(held, cell.Agents);
            SameAgents(cell.Agents, before, "rolled back");
            Assert.AreEqual(key.Tick, cell.Tick);
            key.Checksum = 0;
            Assert.AreEqual(ProtoErrorKind.Checksum, Assert.Throws<ProtoException>(() => new CellMap().Keyframe(key)).Kind);
        }

        /// <summary>A cells JSON tree → the CellsMessage the JSON connection's form would give.</summary>
        static CellsMessage JsonCells(Dictionary<string, object> j)
        {
            var entries = ((List<object>)j["entries"]).Select(x =>
            {
                var e = (Dictionary<string, object>)x;
                object v;
                if (e.TryGetValue("keyframe", out v))
                {
                    var k = (Dictionary<string, object>)v;
                    return (object)new Dictionary<string, object> { { "keyframe", new Dictionary<string, object> { { "cell", k["cell"] }, { "tick", k["tick"] }, { "agents", ((List<object>)k["agents"]).Select(AgentOf).ToList() } } } };
                }
                var d = (Dictionary<string, object>)e["delta"];
                return new Dictionary<string, object> { { "delta", new Dictionary<string, object> {
                    { "cell", d["cell"] }, { "base_tick", d["base_tick"] }, { "left", ((List<object>)d["left"]).Select(i => (object)(long)(double)i).ToList() },
                    { "changed", d["changed"] }, { "entered", ((List<object>)d["entered"]).Select(AgentOf).ToList() } } } };
            }).ToList();
            var m = new Dictionary<string, object>(j);
            m["entries"] = entries;
            return Tree.Cells(m);
        }

        static WorldInfo CellsGrid(uint world)
        {
            var w = Tree.Welcome(Codec.DecodeServer(ReadHex("server_welcome")));
            foreach (var i in w.Worlds) if (i.Id == world) return i;
            return new WorldInfo { Id = world, Cols = 65536, Rows = 65536 };
        }

        [Test]
        public void CellsVectorsReplayInOrderWithEveryChecksum()
        {
            var chain = CellsChain();
            Assert.GreaterOrEqual(chain.Count, 2, "protocol 4 has cells vectors (server_cells_*)");
            int predictNum = (int)(double)((Dictionary<string, object>)ReadJson("server_welcome")["quantization"])["predict_num"];
            var grid = CellsGrid(Tree.Cells(Codec.DecodeServer(ReadHex(chain[0]))).World);
            var packed = new Dictionary<uint, CellMap>();
            var decoded = new Dictionary<uint, CellMap>();
            var viaJson = new Dictionary<uint, CellMap>();
            var txn = new CellsTxn();
            int sums = 0, keyframes = 0, deltas = 0;
            foreach (var name in chain)
            {
                var bytes = ReadHex(name);
                var json = ReadJson(name);
                var tree = Codec.DecodeServer(bytes);
                Func<long, List<QAgent>> held = c => { CellMap m; return decoded.TryGetValue((uint)c, out m) ? m.Agents : new List<QAgent>(); };
                // decode == JSON twin, with base indices resolved to ids through the state held before.
                var resolved = new Dictionary<string, object>(tree);
                resolved["entries"] = ((List<object>)tree["entries"]).Select(x =>
                {
                    var e = (Dictionary<string, object>)x;
                    if (e.ContainsKey("keyframe")) { keyframes++; return x; }
                    deltas++;
                    var d = new Dictionary<string, object>((Dictionary<string, object>)e["delta"]);
                    var baseList = held((long)d["cell"]);
                    d["changed"] = ((List<object>)d["changed"]).Select(ce =>
                    {
                        var r = ((Dictionary<string, object>)ce).Where(kv => kv.Key != "index").ToDictionary(kv => kv.Key, kv => kv.Value);
                        r["id"] = (long)baseList[(int)(long)((Dictionary<string, object>)ce)["index"]].Id;
                        return (object)r;
                    }).ToList();
                    return (object)new Dictionary<string, object> { { "delta", d } };
                }).ToList();
                Same(Plainify(resolved), json, name);
                // encode(JSON twin with ids mapped to base indices) == hex
                var asBinary = new Dictionary<string, object>(json);
                asBinary["entries"] = ((List<object>)json["entries"]).Select(x =>
                {
                    var e = (Dictionary<string, object>)x;
                    if (e.ContainsKey("keyframe"))
                    {
                        var k = new Dictionary<string, object>((Dictionary<string, object>)e["keyframe"]);
                        k["agents"] = ((List<object>)k["agents"]).Select(AgentOf).ToList();
                        return (object)new Dictionary<string, object> { { "keyframe", k } };
                    }
                    var d = new Dictionary<string, object>((Dictionary<string, object>)e["delta"]);
                    var baseList = held((long)(double)d["cell"]);
                    d["changed"] = ((List<object>)d["changed"]).Select(ce =>
                    {
                        var r = ((Dictionary<string, object>)ce).Where(kv => kv.Key != "id").ToDictionary(kv => kv.Key, kv => kv.Value);
                        r["index"] = (long)baseList.FindIndex(a => a.Id == (uint)(double)((Dictionary<string, object>)ce)["id"]);
                        return (object)r;
                    }).ToList();
                    d["entered"] = ((List<object>)d["entered"]).Select(AgentOf).ToList();
                    return (object)new Dictionary<string, object> { { "delta", d } };
                }).ToList();
                Assert.AreEqual(ToHex(bytes), ToHex(Codec.EncodeServer(asBinary)), name + ": encode(json) == hex");
                Assert.IsNull(CellMap.ApplyCells(packed, Tree.Cells(Codec.DecodeServer(bytes, Codec.DefaultServerLimit, true)), grid.Cols, grid.Rows, predictNum, null, txn), name + ": packed");
                Assert.IsNull(CellMap.ApplyCells(decoded, Tree.Cells(tree), grid.Cols, grid.Rows, predictNum, null, txn), name + ": decoded entries");
                Assert.IsNull(CellMap.ApplyCells(viaJson, JsonCells(json), grid.Cols, grid.Rows, predictNum, null, txn), name + ": JSON form");
                CollectionAssert.AreEquivalent(decoded.Keys, packed.Keys);
                CollectionAssert.AreEquivalent(decoded.Keys, viaJson.Keys);
                foreach (var kv in decoded)
                {
                    SameAgents(packed[kv.Key].Agents, kv.Value.Agents, name + " packed cell " + kv.Key);
                    SameAgents(viaJson[kv.Key].Agents, kv.Value.Agents, name + " json cell " + kv.Key);
                }
                if (json["checksum"] != null) sums++;
            }
            Assert.Greater(keyframes, 0, "keyframe entries");
            Assert.Greater(deltas, 0, "delta entries");
            Assert.Greater(sums, 0, "message checksums verified");
        }

        [Test]
        public void ACellsVectorWithAWrongChecksumChangesNothing()
        {
            var chain = CellsChain();
            int predictNum = (int)(double)((Dictionary<string, object>)ReadJson("server_welcome")["quantization"])["predict_num"];
            var msgs = chain.Select(n => Tree.Cells(Codec.DecodeServer(ReadHex(n), Codec.DefaultServerLimit, true))).ToList();
            var grid = CellsGrid(msgs[0].World);
            int at = msgs.FindIndex(m => m.Checksum.HasValue && msgs.IndexOf(m) > 0);
            Assert.Greater(at, 0, "a later cells vector with a checksum");
            var maps = new Dictionary<uint, CellMap>();
            var txn = new CellsTxn();
            for (int i = 0; i < at; i++) Assert.IsNull(CellMap.ApplyCells(maps, msgs[i], grid.Cols, grid.Rows, predictNum, null, txn));
            Func<string> snap = () => string.Join(";", maps.OrderBy(kv => kv.Key).Select(kv => kv.Key + "@" + kv.Value.Tick + ":" + string.Join(",", kv.Value.Agents.Select(a => a.ToString()))));
            var before = snap();
            msgs[at].Checksum ^= 1;
            StringAssert.Contains("checksum", CellMap.ApplyCells(maps, msgs[at], grid.Cols, grid.Rows, predictNum, null, txn));
            Assert.AreEqual(before, snap(), "every cell as before the bad message");
        }

        public static IEnumerable<object[]> Invalid()
        {
            var list = (List<object>)MiniJson.Parse(File.ReadAllText(Path.Combine(Dir, "invalid.json")));
            if (list.Count == 0) throw new Exception("invalid.json is empty");
            foreach (Dictionary<string, object> v in list)
                yield return new object[] { (string)v["name"], (string)v["direction"], (string)v["hex"], (string)v["error"] };
        }

        [Test, TestCaseSource("Invalid")]
        public void InvalidVector(string name, string direction, string hex, string error)
        {
            var bytes = hex.Length == 0 ? new byte[0] : Hex(hex);
            var e = Assert.Throws<ProtoException>(() =>
            {
                if (direction == "client") Codec.DecodeClient(bytes); else Codec.DecodeServer(bytes);
            });
            Assert.AreEqual(error, ProtoException.KindName(e.Kind), name + ": " + e.Message);
        }

        [Test]
        public void TooLarge()
        {
            Assert.AreEqual(ProtoErrorKind.TooLarge, Assert.Throws<ProtoException>(() => Codec.DecodeClient(new byte[65537])).Kind);
            Assert.AreEqual(ProtoErrorKind.TooLarge, Assert.Throws<ProtoException>(() => Codec.DecodeServer(new byte[100], 99)).Kind);
        }

        [Test]
        public void BatchedFrame()
        {
            var a = ReadHex("server_pong");
            var b = ReadHex("server_event_spawned");
            var both = a.Concat(b).ToArray();
            var msgs = Codec.DecodeServerBatch(both, 0, both.Length, Codec.DefaultServerLimit, false);
            Assert.AreEqual(2, msgs.Count);
            Same(Plainify(msgs[0]), ReadJson("server_pong"), "$0");
            Same(Plainify(msgs[1]), ReadJson("server_event_spawned"), "$1");
            Assert.AreEqual(ProtoErrorKind.UnexpectedEnd, Assert.Throws<ProtoException>(() => Codec.DecodeServerBatch(both, 0, both.Length - 1, Codec.DefaultServerLimit, false)).Kind);
        }
    }
}
