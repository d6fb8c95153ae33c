// End to end against a real steerd (STEERD_BIN) over ClientWebSocket: connect as a player (a JWT
// minted by `steerd token`), spawn, MoveTo, destination_reached, drop the socket, reconnect
// resuming the session (protocol v3: same player, so MoveTo on the same agents succeeds),
// continue, and the view's agent table equals REST /snapshot at the end. Then: dev mode
// (anonymous players resume too; another player is forbidden), queued commands, bad tokens.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    public sealed class Server : IDisposable
    {
        public readonly string Base;
        readonly Process proc;
        readonly string scratch;
        readonly string adminToken;
        readonly string playerSecret;
        readonly string bin;
        readonly StringBuilder log = new StringBuilder();
        static readonly HttpClient http = new HttpClient();

        /// <summary>
        /// adminToken: --admin-token (REST calls send it). playerSecret: --player-jwt-secret
        /// (player tokens required, see MintToken); without it the server runs in dev mode.
        /// </summary>
        public Server(string adminToken, string playerSecret = null, string extraArgs = null)
        {
            this.adminToken = adminToken;
            this.playerSecret = playerSecret;
            var bin = Environment.GetEnvironmentVariable("STEERD_BIN");
            var root = ConformanceTests.Root;
            if (string.IsNullOrEmpty(bin)) bin = Path.Combine(root, "target/release/steerd");
            if (!File.Exists(bin)) throw new Exception("steerd binary not found at " + bin + " (set STEERD_BIN)");
            this.bin = bin;
            scratch = Path.Combine(Path.GetTempPath(), "steerd-cs-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(scratch);
            var l = new TcpListener(IPAddress.Loopback, 0);
            l.Start();
            int port = ((IPEndPoint)l.LocalEndpoint).Port;
            l.Stop();
            Base = "http://127.0.0.1:" + port;
            var args = "--listen 127.0.0.1:" + port + " --data-dir " + Path.Combine(scratch, "data") + " --scenarios-dir " + Path.Combine(root, "scenarios");
            if (adminToken != null) args += " --admin-token " + adminToken;
            if (playerSecret != null) args += " --player-jwt-secret " + playerSecret;
            if (extraArgs != null) args += " " + extraArgs;
            var psi = new ProcessStartInfo(bin, args) { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
            psi.EnvironmentVariables["RUST_LOG"] = "warn";
            proc = Process.Start(psi);
            proc.OutputDataReceived += (s, e) => { lock (log) log.AppendLine(e.Data); };
            proc.ErrorDataReceived += (s, e) => { lock (log) log.AppendLine(e.Data); };
            proc.BeginOutputReadLine();
            proc.BeginErrorReadLine();
            E2eTests.Until("steerd to answer /health", () =>
            {
                if (proc.HasExited) throw new Exception("steerd exited: " + log);
                try { return http.GetAsync(Base + "/health").Result.IsSuccessStatusCode; } catch (Exception) { return false; }
            }, 15000);
        }

        public object Rest(string method, string path, string body = null)
        {
            var req = new HttpRequestMessage(new HttpMethod(method), Base + path);
            if (body != null) req.Content = new StringContent(body, Encoding.UTF8, "application/json");
            if (adminToken != null) req.Headers.Add("Authorization", "Bearer " + adminToken);
            var r = http.SendAsync(req).Result;
            var text = r.Content.ReadAsStringAsync().Result;
            if (!r.IsSuccessStatusCode) throw new Exception(method + " " + path + ": " + (int)r.StatusCode + " " + text);
            return text.Length > 0 ? MiniJson.Parse(text) : null;
        }

        /// <summary>A player JWT as the game's backend would issue it, minted by `steerd token`.</summary>
        public string MintToken(string sub, string role = "player")
        {
            if (playerSecret == null) throw new InvalidOperationException("MintToken needs a server started with a player secret");
            var psi = new ProcessStartInfo(bin, "token --sub " + sub + " --role " + role + " --ttl 1h --secret " + playerSecret) { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
            using (var p = Process.Start(psi))
            {
                var token = p.StandardOutput.ReadToEnd().Trim();
                var err = p.StandardError.ReadToEnd();
                p.WaitForExit();
                if (p.ExitCode != 0 || token.Length == 0) throw new Exception("steerd token failed: " + err);
                return token;
            }
        }

        public void Dispose()
        {
            try { if (!proc.HasExited) { proc.Kill(); proc.WaitForExit(5000); } } catch (Exception) { }
            try { Directory.Delete(scratch, true); } catch (Exception) { }
        }
    }

    [TestFixture]
    public class E2eTests : NoContextFixture
    {
        const string Admin = "sdk-e2e-admin-token";
        const string Secret = "sdk-e2e-player-jwt-secret-0123456789abcdef";
        Server srv;

        [OneTimeSetUp]
        public void Start() { srv = new Server(Admin, Secret); }

        [OneTimeTearDown]
        public void Stop() { if (srv != null) srv.Dispose(); }

        public static void Until(string what, Func<bool> f, int timeoutMs = 15000)
        {
            var sw = Stopwatch.StartNew();
            while (!f())
            {
                if (sw.ElapsedMilliseconds > timeoutMs) throw new TimeoutException("timed out after " + timeoutMs + " ms waiting for " + what);
                Thread.Sleep(50);
            }
        }

        internal static T Wait<T>(Task<T> t, int ms = 15000)
        {
            if (!t.Wait(ms)) throw new TimeoutException("task did not complete");
            return t.Result;
        }

        internal static CommandException Fails(Task t)
        {
            try { t.Wait(15000); }
            catch (AggregateException e) { return e.InnerException as CommandException; }
            return null;
        }

        /// <summary>
        /// Live handoff between two real servers: the client follows <c>moved</c> by itself
        /// (reconnect, resume, resubscribe), keeps its player and agents, and commands them on
        /// the new server; the game code only sees the Moved event.
        /// </summary>
        [Test]
        public void AClientFollowsItsWorldToAnotherServerAndKeepsItsAgents()
        {
            const string cluster = "--persistence --cluster-secret sdk-cs-handoff-secret-0123";
            using (var a = new Server(null, null, cluster))
            using (var b = new Server(null, null, cluster))
            {
                a.Rest("POST", "/worlds", "{\"name\":\"moving\"}");
                var client = Wait(SteerClient.ConnectAsync(a.Base));
                var moved = new List<string>();
                bool resumed = false;
                int reconnects = 0;
                client.Moved += (w, to) => { lock (moved) moved.Add(w + " " + to); };
                client.Reconnected += (w, r) => { resumed = r; Interlocked.Increment(ref reconnects); };
                try
                {
                    var player = client.PlayerId;
                    Wait(client.Subscribe("moving"));
                    var view = client.View("moving");
                    var ids = Wait(client.Spawn("moving", "mine", 3, Shapes.Circle(40, 40, 5))).Agents;
                    Until("the agents in the view", () => { lock (client.SyncRoot) return ids.All(id => view.Agent(id) != null); });
                    var r = (Dictionary<string, object>)a.Rest("POST", "/worlds/moving/handoff", "{\"to\":\"" + b.Base + "\"}");
                    var to = (string)r["client_url"];
                    Assert.AreEqual("ws://" + b.Base.Substring("http://".Length) + "/ws", to);
                    Until("the client resumed on B", () => Volatile.Read(ref reconnects) > 0);
                    lock (moved) CollectionAssert.AreEqual(new[] { "moving " + to }, moved);
                    Assert.IsTrue(resumed, "the session resumed (same player)");
                    Assert.AreEqual(player, client.PlayerId);
                    CollectionAssert.AreEquivalent(ids, client.Mine("moving"));
                    Until("the agents in B's view", () => { lock (client.SyncRoot) { var v = client.View("moving"); return v != null && ids.All(id => v.Agent(id) != null); } });
                    Assert.AreEqual("ok", Wait(client.MoveTo("moving", ids, 60, 60)).Type);
                    var onB = (Dictionary<string, object>)b.Rest("GET", "/worlds/moving");
                    Assert.GreaterOrEqual(Convert.ToInt64(onB["agents"]), 3L);
                }
                finally { client.Close(); }
            }
        }

        [Test]
        public void ConnectAsPlayerSpawnMoveDropResumeContinueSnapshot()
        {
            const string world = "sdk-cs";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            const string player = "alice-cs";
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken(player) }));
            var errors = new List<string>();
            var resyncs = new List<string>();
            var reached = new HashSet<uint>();
            int reconnects = 0;
            client.Error += e => { lock (errors) errors.Add(e); };
            client.Resynced += (w, r) => { lock (resyncs) resyncs.Add(w + ": " + r); };
            client.DestinationReached += (a, w, t) => { if (w == world) lock (reached) reached.Add(a); };
            bool resumed = false;
            client.Reconnected += (w, r) => { resumed = r; Interlocked.Increment(ref reconnects); };
            try
            {
                Assert.AreEqual(11, client.Welcome.ProtocolVersion);
                Assert.AreEqual(player, client.PlayerId);
                Assert.AreEqual(Role.Player, client.Role);
                StringAssert.IsMatch("^[0-9a-f]{32}$", client.ResumeToken);
                Assert.Greater(client.Welcome.SessionGraceSecs, 0);
                var firstResume = client.ResumeToken;
                var sub = Wait(client.Subscribe(world));
                Assert.AreEqual("subscribed", sub.Type);
                Assert.Greater(sub.Cells.Count, 0);
                var view = client.View(world);
                // every_n_ticks 0 is refused by the server, naming the field.
                var bad = Fails(client.Subscribe(world, null, 0));
                Assert.AreEqual("invalid_field", bad.Code);
                StringAssert.Contains("every_n_ticks", bad.Field ?? "");

                var spawned = Wait(client.Spawn(world, "units", 3, Shapes.Circle(30, 30, 4)));
                Assert.AreEqual("spawned", spawned.Type);
                var ids = spawned.Agents;
                Assert.AreEqual(3, ids.Count);
                Until("the spawned agents in the view", () => { lock (client.SyncRoot) return ids.All(id => view.Agent(id) != null); });

                // Walks of ~16 units: long enough to be a walk, short enough not to idle the suite.
                Assert.AreEqual("ok", Wait(client.MoveTo(world, ids, 45, 36, 1)).Type);
                Until("destination_reached for every agent", () => { lock (reached) return ids.All(reached.Contains); }, 30000);
                Assert.AreEqual("unknown_world", Fails(client.MoveTo("no-such-world", ids, 1, 1)).Code);

                // Drop the socket: the view keeps its table, the client reconnects with
                // Hello{resume} and the server hands it the same session.
                client.DropSocket();
                Until("the client to notice the drop", () => client.State != "open" || reconnects > 0);
                lock (client.SyncRoot) Assert.AreEqual(3, view.Count, "state kept across the drop");
                Until("the reconnect", () => reconnects == 1);
                Assert.IsTrue(resumed, "the session was resumed");
                Assert.AreEqual(1, client.Resumes);
                Assert.AreEqual(player, client.PlayerId);
                Assert.AreNotEqual(firstResume, client.ResumeToken, "each Welcome brings a new resume token");
                Until("keyframes after the reconnect", () => { lock (client.SyncRoot) return view.Keyframes > 1 && ids.All(id => view.Agent(id) != null); });

                // Continue: the resumed player still owns its agents, so MoveTo on them succeeds.
                lock (reached) reached.Clear();
                Assert.AreEqual("ok", Wait(client.MoveTo(world, ids, 36, 48, 1)).Type);
                Until("destination_reached after the reconnect", () => { lock (reached) return ids.All(reached.Contains); }, 30000);

                // Clock synced from Ping/Pong; Sample() renders every agent near its state.
                Until("a clock sample", () => { lock (client.SyncRoot) return view.Clock.Synced; });
                // (Frames stop when nothing moves, so the server's tick is read over REST to compare.)
                double t0 = SteerClient.NowMs;
                var worldInfo = (Dictionary<string, object>)srv.Rest("GET", "/worlds/" + world);
                double t1 = SteerClient.NowMs;
                lock (client.SyncRoot)
                {
                    double st = view.ServerTick((t0 + t1) / 2);
                    double slack = 20 + (t1 - t0) * view.TickRate / 1000;
                    Assert.Less(Math.Abs(st - (double)worldInfo["tick"]), slack, "server tick estimate " + st + " vs REST tick " + worldInfo["tick"]);
                    var sampled = view.Sample(SteerClient.NowMs);
                    Assert.AreEqual(3, sampled.Count);
                    foreach (var s in sampled)
                    {
                        var a = view.Agent(s.Id);
                        Assert.IsFalse(float.IsNaN(s.X) || float.IsNaN(s.Y) || float.IsNaN(s.Heading));
                        Assert.Less(Math.Sqrt(Math.Pow(s.X - a.PosX * view.Quant.PosStep, 2) + Math.Pow(s.Y - a.PosY * view.Quant.PosStep, 2)), 5);
                    }
                }

                // Pause: the agent table equals the server's quantized snapshot.
                srv.Rest("PATCH", "/worlds/" + world, "{\"paused\":true}");
                string last = "";
                try
                {
                    Until("the view to equal /snapshot", () =>
                {
                    var snap = (Dictionary<string, object>)srv.Rest("GET", "/worlds/" + world + "/snapshot");
                    var want = ((List<object>)snap["quantized"]).Select(Describe).OrderBy(s => s, StringComparer.Ordinal).ToList();
                    List<string> have;
                    lock (client.SyncRoot) have = view.Agents().Select(a => a.ToString()).OrderBy(s => s, StringComparer.Ordinal).ToList();
                    last = "want " + string.Join(" ", want) + "\nhave " + string.Join(" ", have);
                    return want.Count == 3 && want.SequenceEqual(have);
                    }, 10000);
                }
                catch (TimeoutException) { Assert.Fail("the view never equalled /snapshot:\n" + last); }
                // Protocol v4: a binary connection receives cells messages.
                lock (client.SyncRoot) Assert.Greater(view.CellsMessages, 0, "cells messages");
                lock (errors) CollectionAssert.IsEmpty(errors);
                lock (resyncs) CollectionAssert.IsEmpty(resyncs);
            }
            finally
            {
                client.Close();
            }
        }

        [Test]
        public void EveryFourTicksOnlyMultiplesOfFourAndTheTableEqualsTheSnapshot()
        {
            const string world = "sdk-cs-every4";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("every4-cs") }));
            var resyncs = new List<string>();
            client.Resynced += (w, r) => { lock (resyncs) resyncs.Add(w + ": " + r); };
            try
            {
                var wander = new List<BehaviorEntry> { Behavior.Wander().Entry() };
                var ids = Wait(client.Spawn(world, "wanderers", 10, Shapes.Circle(50, 50, 10), null, wander)).Agents;
                Wait(client.Subscribe(world, null, 4));
                var view = client.View(world);
                lock (client.SyncRoot) Assert.AreEqual(4, view.EveryNTicks);
                // The ticks of the cells messages applied after the first (the subscription's
                // keyframes; the TypeScript test checks that one too), sampled while waiting.
                var ticks = new List<long>();
                Until("20 cells messages", () =>
                {
                    lock (client.SyncRoot)
                    {
                        if (view.CellsMessages >= 2 && (ticks.Count == 0 || ticks[ticks.Count - 1] != view.CellsTick)) ticks.Add(view.CellsTick);
                        return view.CellsMessages >= 20;
                    }
                }, 20000);
                lock (client.SyncRoot)
                {
                    Assert.AreEqual(4, view.Span);
                    Assert.Greater(ticks.Count, 3);
                    Assert.IsTrue(ticks.All(t => t % 4 == 0), "ticks: " + string.Join(" ", ticks));
                }
                srv.Rest("PATCH", "/worlds/" + world, "{\"paused\":true}");
                var info = (Dictionary<string, object>)srv.Rest("GET", "/worlds/" + world);
                long tick = (long)(double)info["tick"];
                if (tick % 4 != 0) srv.Rest("POST", "/worlds/" + world + "/step", "{\"ticks\":" + (4 - tick % 4) + "}");
                string last = "";
                try
                {
                    Until("the view to equal /snapshot", () =>
                    {
                        var snap = (Dictionary<string, object>)srv.Rest("GET", "/worlds/" + world + "/snapshot");
                        var want = ((List<object>)snap["quantized"]).Select(Describe).OrderBy(x => x, StringComparer.Ordinal).ToList();
                        List<string> have;
                        lock (client.SyncRoot) have = view.Agents().Select(a => a.ToString()).OrderBy(x => x, StringComparer.Ordinal).ToList();
                        last = "snapshot tick " + snap["tick"] + "\nwant " + string.Join(" ", want) + "\nhave " + string.Join(" ", have);
                        return want.Count == ids.Count && want.SequenceEqual(have) && (long)(double)snap["tick"] % 4 == 0;
                    }, 10000);
                }
                catch (TimeoutException) { Assert.Fail("the view never equalled /snapshot:\n" + last); }
                lock (client.SyncRoot) Assert.AreEqual(0, view.CellsTick % 4);
                lock (resyncs) CollectionAssert.IsEmpty(resyncs);
            }
            finally
            {
                client.Close();
            }
        }

        static string Describe(object o)
        {
            var d = (Dictionary<string, object>)o;
            var pos = (List<object>)d["pos"];
            var vel = (List<object>)d["vel"];
            return new QAgent((uint)(double)d["id"], (ushort)(double)d["group"], (int)(double)pos[0], (int)(double)pos[1], (int)(double)vel[0], (int)(double)vel[1], (ushort)(double)d["orient"]).ToString();
        }

        [Test]
        public void PerWorldTickRatesAreAnnouncedAndTheViewClockFollows()
        {
            srv.Rest("POST", "/worlds", "{\"name\":\"sdk-cs-rate-a\"}");
            srv.Rest("POST", "/worlds", "{\"name\":\"sdk-cs-rate-b\"}");
            srv.Rest("PATCH", "/worlds/sdk-cs-rate-b", "{\"tick_rate\":30}");
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("rates-cs") }));
            var announced = new List<string>();
            client.TickRateChanged += (hz, w, t) => { lock (announced) announced.Add(w + " " + hz); };
            try
            {
                Assert.AreEqual(20f, client.Welcome.World("sdk-cs-rate-a").TickRateHz);
                Assert.AreEqual(30f, client.Welcome.World("sdk-cs-rate-b").TickRateHz);
                Wait(client.Subscribe("sdk-cs-rate-a"));
                Wait(client.Subscribe("sdk-cs-rate-b"));
                var a = client.View("sdk-cs-rate-a");
                var b = client.View("sdk-cs-rate-b");
                lock (client.SyncRoot)
                {
                    Assert.AreEqual(20, a.TickRate);
                    Assert.AreEqual(30, b.TickRate, "each view ticks at its world's rate");
                }
                srv.Rest("PATCH", "/worlds/sdk-cs-rate-a", "{\"tick_rate\":10}");
                Until("the rate change announced", () => { lock (announced) return announced.Contains("sdk-cs-rate-a 10"); });
                lock (announced) Assert.IsTrue(announced.All(x => x == "sdk-cs-rate-a 10" || x == "sdk-cs-rate-b 30"), string.Join(", ", announced));
                lock (client.SyncRoot)
                {
                    Assert.AreEqual(10, a.TickRate, "the view's clock follows");
                    Assert.AreEqual(30, b.TickRate);
                }
                using (var other = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("rates-cs2") })))
                    Assert.AreEqual(10f, other.Welcome.World("sdk-cs-rate-a").TickRateHz, "a later Welcome carries the new rate");
            }
            finally
            {
                client.Close();
            }
        }

        [Test]
        public void AWalledOffTargetEndsInUnreachableWithTheDistance()
        {
            const string world = "sdk-cs-unreachable";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            // A closed box of walls round (80, 80).
            foreach (var w in new[] { "70,70,90,70", "90,70,90,90", "90,90,70,90", "70,90,70,70" })
            {
                var c = w.Split(',');
                srv.Rest("POST", "/worlds/" + world + "/walls", "{\"a\":{\"x\":" + c[0] + ",\"y\":" + c[1] + "},\"b\":{\"x\":" + c[2] + ",\"y\":" + c[3] + "}}");
            }
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("unreachable-cs") }));
            var ended = new Dictionary<uint, float>();
            var reached = new List<uint>();
            client.Unreachable += (a, d, w, t) => { if (w == world) lock (ended) ended[a] = d; };
            client.DestinationReached += (a, w, t) => { if (w == world) lock (reached) reached.Add(a); };
            try
            {
                var ids = Wait(client.Spawn(world, "units", 2, Shapes.Circle(40, 40, 2))).Agents;
                Assert.AreEqual("ok", Wait(client.MoveTo(world, ids, 80, 80, 1)).Type);
                Until("unreachable for both agents", () => { lock (ended) return ids.All(ended.ContainsKey); }, 30000);
                lock (ended)
                    foreach (var id in ids)
                        Assert.IsTrue(ended[id] > 10 && ended[id] < 16, "agent " + id + " stopped " + ended[id] + " from the target (outside the box, near its wall)");
                lock (reached) Assert.AreEqual(0, reached.Count, "an unreachable order is not an arrival");
            }
            finally
            {
                client.Close();
            }
        }

        [Test]
        public void SampleNamesEachAgentsGroup()
        {
            const string world = "sdk-cs-groups";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("groups-cs") }));
            try
            {
                var red = Wait(client.Spawn(world, "red", 2, Shapes.Circle(30, 30, 3))).Agents;
                // (The table a Subscribed answer carries is the one last published: let a few ticks pass.)
                Func<long> tick = () => (long)(double)((Dictionary<string, object>)srv.Rest("GET", "/worlds/" + world))["tick"];
                long t0 = tick();
                Until("a few ticks", () => tick() > t0 + 2);
                Wait(client.Subscribe(world));
                var view = client.View(world);
                lock (client.SyncRoot) CollectionAssert.Contains(view.Groups, "red");
                Until("the red agents", () => { lock (client.SyncRoot) return red.All(id => view.Agent(id) != null); });
                // A group the world did not have yet: the groups event brings the new table.
                var blue = Wait(client.Spawn(world, "blue", 1, Shapes.Circle(60, 60, 1))).Agents;
                Until("the blue agent and its group name", () => { lock (client.SyncRoot) return view.Agent(blue[0]) != null && view.Groups.Contains("blue"); });
                // (Sample draws an agent once the render time, InterpDelayMs behind, reaches it.)
                Until("every agent drawn", () => { lock (client.SyncRoot) return view.Sample(SteerClient.NowMs).Count == 3; });
                lock (client.SyncRoot)
                {
                    var names = view.Sample(SteerClient.NowMs).ToDictionary(s => s.Id, s => s.GroupName);
                    foreach (var id in red) Assert.AreEqual("red", names[id]);
                    Assert.AreEqual("blue", names[blue[0]]);
                }
            }
            finally
            {
                client.Close();
            }
        }

        [Test]
        public void SampleTellsThisClientsAgentsApartAcrossAResumeUntilDespawned()
        {
            const string world = "cs-mine";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var a = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("cs-mine-a") }));
            var b = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("cs-mine-b") }));
            try
            {
                Wait(a.Subscribe(world));
                Wait(b.Subscribe(world));
                var va = a.View(world);
                var vb = b.View(world);
                var ours = Wait(a.Spawn(world, "a", 3, Shapes.Circle(30, 30, 3))).Agents;
                var theirs = Wait(b.Spawn(world, "b", 2, Shapes.Circle(60, 60, 2))).Agents;
                Func<SteerClient, WorldView, Dictionary<uint, bool>> mine = (c, v) => { lock (c.SyncRoot) return v.Sample(SteerClient.NowMs).ToDictionary(s => s.Id, s => s.Mine); };
                Until("every agent drawn in both views", () => mine(a, va).Count == 5 && mine(b, vb).Count == 5);
                foreach (var id in ours) { Assert.IsTrue(mine(a, va)[id]); Assert.IsFalse(mine(b, vb)[id]); }
                foreach (var id in theirs) { Assert.IsFalse(mine(a, va)[id]); Assert.IsTrue(mine(b, vb)[id]); }
                // A resume is the same player: still ours.
                bool? resumed = null;
                a.Reconnected += (w, r) => resumed = r;
                a.DropSocket();
                Until("the resume", () => resumed.HasValue);
                Assert.IsTrue(resumed.Value);
                Until("ours drawn again", () => { var m = mine(a, va); return ours.All(id => m.ContainsKey(id) && m[id]); });
                // Despawned: no longer ours.
                Wait(a.Despawn(world, new[] { ours[0] }));
                CollectionAssert.AreEquivalent(ours.Skip(1).ToList(), a.Mine(world));
                Wait(b.Despawn(world, theirs));
                Assert.AreEqual(0, b.Mine(world).Count);
                Until("theirs gone from our view", () => !theirs.Any(id => mine(a, va).ContainsKey(id)));
                Assert.AreEqual(2, mine(a, va).Values.Count(x => x));
            }
            finally
            {
                a.Close();
                b.Close();
            }
        }

        [Test]
        public void BadPlayerTokensAreRefusedAtHello()
        {
            var e = Fails(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = "wrong" }));
            Assert.IsNotNull(e, "connect must fail");
            Assert.AreEqual("unauthorized", e.Code);
            Assert.AreEqual("token", e.Field);
            using (var other = new Server(null, "another-secret-of-enough-length-0123456789"))
            {
                var f = Fails(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = other.MintToken("mallory") }));
                Assert.IsNotNull(f, "a token signed with another secret must fail");
                Assert.AreEqual("unauthorized", f.Code);
            }
        }

        [Test]
        public void CommandsSentWhileReconnectingAreQueuedAndAnswered()
        {
            const string world = "sdk-cs-queue";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("queue-cs") }));
            try
            {
                Wait(client.Subscribe(world));
                var view = client.View(world);
                int reconnects = 0;
                client.Reconnected += (w, resumed) => Interlocked.Increment(ref reconnects);
                client.DropSocket();
                Until("reconnecting", () => client.State == "reconnecting");
                var p = client.Spawn(world, "late", 2, Shapes.Rect(10, 10, 20, 20));
                var r = Wait(p);
                Assert.AreEqual(1, reconnects);
                Assert.AreEqual(2, r.Agents.Count);
                Until("the queued spawn in the view", () => { lock (client.SyncRoot) return r.Agents.All(id => view.Agent(id) != null); });
            }
            finally
            {
                client.Close();
            }
        }

        [Test]
        public void AKickedPlayerCannotResumeAndStartsANewSession()
        {
            const string world = "sdk-cs-kick";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = srv.MintToken("carol-cs") }));
            var lost = new List<string>();
            client.SessionLost += why => { lock (lost) lost.Add(why); };
            int reconnects = 0;
            bool resumed = true;
            client.Reconnected += (w, r) => { resumed = r; Interlocked.Increment(ref reconnects); };
            try
            {
                Wait(client.Subscribe(world));
                var agents = Wait(client.Spawn(world, "carol", 1, Shapes.Circle(50, 50, 1))).Agents;
                srv.Rest("DELETE", "/worlds/" + world + "/players/carol-cs");
                Until("the reconnect", () => reconnects == 1);
                Assert.IsFalse(resumed, "the resume was refused, a fresh session started");
                lock (lost) Assert.AreEqual(1, lost.Count);
                Assert.AreEqual("carol-cs", client.PlayerId);
                // The orphan policy (despawn by default) applied at the kick: the agent is gone.
                var code = Fails(client.MoveTo(world, agents, 60, 60)).Code;
                Assert.IsTrue(code == "unknown_agent" || code == "forbidden", code);
            }
            finally
            {
                client.Close();
            }
        }

        [Test]
        public void DevModeAnAnonymousPlayerResumesAndKeepsItsAgents()
        {
            // No player secret: every client without a token is an anonymous player with a fresh id.
            using (var dev = new Server(null))
            {
                const string world = "sdk-cs-owner";
                dev.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
                var client = Wait(SteerClient.ConnectAsync(dev.Base));
                var other = Wait(SteerClient.ConnectAsync(dev.Base));
                try
                {
                    Assert.AreEqual(Role.Player, client.Role);
                    Assert.IsFalse(string.IsNullOrEmpty(client.PlayerId));
                    Assert.AreNotEqual(client.PlayerId, other.PlayerId, "a fresh id per anonymous player");
                    var id = client.PlayerId;
                    Wait(client.Subscribe(world));
                    var agents = Wait(client.Spawn(world, "mine", 1, Shapes.Circle(50, 50, 1))).Agents;
                    Assert.AreEqual("ok", Wait(client.MoveTo(world, agents, 60, 60)).Type);
                    int reconnects = 0;
                    bool resumed = false;
                    client.Reconnected += (w, r) => { resumed = r; Interlocked.Increment(ref reconnects); };
                    client.DropSocket();
                    Until("the reconnect", () => reconnects == 1);
                    Assert.IsTrue(resumed);
                    Assert.AreEqual(id, client.PlayerId, "the same anonymous player after the resume");
                    Assert.AreEqual("ok", Wait(client.MoveTo(world, agents, 70, 70)).Type);
                    Assert.AreEqual("forbidden", Fails(other.MoveTo(world, agents, 10, 10)).Code);
                }
                finally
                {
                    client.Close();
                    other.Close();
                }
            }
        }
    }
}
