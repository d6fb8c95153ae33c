// End to end against a real steerd (STEERD_BIN) over ClientWebSocket: connect, spawn, MoveTo,
// destination_reached, drop the socket, reconnect (resubscribe; resume once the server speaks
// protocol v3), continue, and the view's agent table equals REST /snapshot at the end.
//
// Protocol v2 has no session resume: agents belong to the connection that spawned them, so the
// scenario connects with the admin token (with v3 it runs as a player and resumes); the last test
// pins the v2 behaviour down (a plain client loses its agents with the connection).
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
    sealed class Server : IDisposable
    {
        public readonly string Base;
        readonly Process proc;
        readonly string scratch;
        readonly string adminToken;
        readonly StringBuilder log = new StringBuilder();
        static readonly HttpClient http = new HttpClient();

        public Server(string adminToken)
        {
            this.adminToken = adminToken;
            var bin = Environment.GetEnvironmentVariable("STEERD_BIN");
            var root = Path.GetFullPath(Path.Combine(AppDomain.CurrentDomain.BaseDirectory, "../../.."));
            if (string.IsNullOrEmpty(bin)) bin = Path.Combine(root, "target/release/steerd");
            if (!File.Exists(bin)) throw new Exception("steerd binary not found at " + bin + " (set STEERD_BIN)");
            scratch = Path.Combine(Path.GetTempPath(), "steerd-cs-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(scratch);
            var l = new TcpListener(IPAddress.Loopback, 0);
            l.Start();
            int port = ((IPEndPoint)l.LocalEndpoint).Port;
            l.Stop();
            Base = "http://127.0.0.1:" + port;
            var args = "--listen 127.0.0.1:" + port + " --data-dir " + Path.Combine(scratch, "data") + " --scenarios-dir " + Path.Combine(root, "scenarios");
            if (adminToken != null) args += " --admin-token " + adminToken;
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

        public void Dispose()
        {
            try { if (!proc.HasExited) { proc.Kill(); proc.WaitForExit(5000); } } catch (Exception) { }
            try { Directory.Delete(scratch, true); } catch (Exception) { }
        }
    }

    [TestFixture]
    public class E2eTests
    {
        const string Admin = "sdk-e2e-admin-token";
        Server srv;

        [TestFixtureSetUp]
        public void Start() { srv = new Server(Admin); }

        [TestFixtureTearDown]
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

        static T Wait<T>(Task<T> t, int ms = 15000)
        {
            if (!t.Wait(ms)) throw new TimeoutException("task did not complete");
            return t.Result;
        }

        static CommandException Fails(Task t)
        {
            try { t.Wait(15000); }
            catch (AggregateException e) { return e.InnerException as CommandException; }
            return null;
        }

        [Test]
        public void ConnectSpawnMoveDropReconnectContinueSnapshot()
        {
            const string world = "sdk-cs";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = Admin }));
            var errors = new List<string>();
            var resyncs = new List<string>();
            var reached = new HashSet<uint>();
            int reconnects = 0;
            client.Error += e => { lock (errors) errors.Add(e); };
            client.Resynced += (w, r) => { lock (resyncs) resyncs.Add(w + ": " + r); };
            client.DestinationReached += (a, w, t) => { if (w == world) lock (reached) reached.Add(a); };
            client.Reconnected += w => Interlocked.Increment(ref reconnects);
            try
            {
                Assert.AreEqual(2, client.Welcome.ProtocolVersion);
                var sub = Wait(client.Subscribe(world));
                Assert.AreEqual("subscribed", sub.Type);
                Assert.Greater(sub.Cells.Count, 0);
                var view = client.View(world);
                Assert.AreEqual("unsupported", Fails(client.Subscribe(world, null, 2)).Code);

                var spawned = Wait(client.Spawn(world, "units", 3, Shapes.Circle(30, 30, 4)));
                Assert.AreEqual("spawned", spawned.Type);
                var ids = spawned.Agents;
                Assert.AreEqual(3, ids.Count);
                Until("the spawned agents in the view", () => { lock (client.SyncRoot) return ids.All(id => view.Agent(id) != null); });

                Assert.AreEqual("ok", Wait(client.MoveTo(world, ids, 70, 50, 1)).Type);
                Until("destination_reached for every agent", () => { lock (reached) return ids.All(reached.Contains); }, 30000);
                Assert.AreEqual("unknown_world", Fails(client.MoveTo("no-such-world", ids, 1, 1)).Code);

                // Drop the socket: the view keeps its table, the client reconnects and resubscribes.
                client.DropSocket();
                Until("the client to notice the drop", () => client.State != "open" || reconnects > 0);
                lock (client.SyncRoot) Assert.AreEqual(3, view.Count, "state kept across the drop");
                Until("the reconnect", () => reconnects == 1);
                Until("keyframes after the reconnect", () => { lock (client.SyncRoot) return view.Keyframes > 1 && ids.All(id => view.Agent(id) != null); });

                // Continue after the reconnect.
                lock (reached) reached.Clear();
                Wait(client.MoveTo(world, ids, 40, 90, 1));
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
                lock (errors) CollectionAssert.IsEmpty(errors);
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
        public void AWrongTokenIsRefusedAtHello()
        {
            var t = SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = "wrong" });
            var e = Fails(t);
            Assert.IsNotNull(e, "connect must fail");
            Assert.AreEqual("forbidden", e.Code);
        }

        [Test]
        public void CommandsSentWhileReconnectingAreQueuedAndAnswered()
        {
            const string world = "sdk-cs-queue";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(srv.Base, new ConnectOptions { Token = Admin }));
            try
            {
                Wait(client.Subscribe(world));
                var view = client.View(world);
                int reconnects = 0;
                client.Reconnected += w => Interlocked.Increment(ref reconnects);
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
        public void ProtocolV2WithoutResumeAReconnectedPlainClientNoLongerOwnsItsAgents()
        {
            using (var open = new Server(null))
            {
                const string world = "sdk-cs-owner";
                open.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
                var client = Wait(SteerClient.ConnectAsync(open.Base));
                try
                {
                    Wait(client.Subscribe(world));
                    var agents = Wait(client.Spawn(world, "mine", 1, Shapes.Circle(50, 50, 1))).Agents;
                    Assert.AreEqual("ok", Wait(client.MoveTo(world, agents, 60, 60)).Type);
                    int reconnects = 0;
                    client.Reconnected += w => Interlocked.Increment(ref reconnects);
                    client.DropSocket();
                    Until("the reconnect", () => reconnects == 1);
                    // v3 (resume) turns this into "ok": the resumed session keeps its agents.
                    Assert.AreEqual("forbidden", Fails(client.MoveTo(world, agents, 70, 70)).Code);
                }
                finally
                {
                    client.Close();
                }
            }
        }
    }
}
