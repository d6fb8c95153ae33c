// No ghost commands or subscriptions, against a real steerd behind a proxy that cuts the
// network (NetCut): a command that times out while queued is never sent; one sent but unanswered
// is outcome_unknown; a refused subscription leaves no view and is never replayed; a world gone
// after a reconnect loses its view with a ViewRemoved event.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    [TestFixture]
    public class GhostTests : ProxiedServerFixture
    {
        ConnectOptions Options(string player, int timeoutMs = 10000)
        {
            return new ConnectOptions { Token = srv.MintToken(player), CommandTimeoutMs = timeoutMs, ReconnectMinDelayMs = 100, ReconnectMaxDelayMs = 200 };
        }

        static T Wait<T>(Task<T> t) { return E2eTests.Wait(t); }
        static CommandException Fails(Task t) { return E2eTests.Fails(t); }

        long Tick(string world) { return (long)(double)((Dictionary<string, object>)srv.Rest("GET", "/worlds/" + world))["tick"]; }

        void WaitTicks(string world, int n)
        {
            long t0 = Tick(world);
            E2eTests.Until(n + " ticks of " + world, () => Tick(world) >= t0 + n);
        }

        string Positions(string world, IList<uint> ids)
        {
            var snap = (Dictionary<string, object>)srv.Rest("GET", "/worlds/" + world + "/snapshot");
            var q = ((List<object>)snap["quantized"]).Cast<Dictionary<string, object>>();
            return string.Join(" ", ids.Select(id =>
            {
                var a = q.FirstOrDefault(d => (uint)(double)d["id"] == id);
                return a == null ? "-" : string.Join(",", ((List<object>)a["pos"]).Select(p => p.ToString()));
            }));
        }

        [Test]
        public void ACommandThatTimesOutQueuedDuringACutIsNeverSent()
        {
            const string world = "ghost-cmd-cs";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(net.Base, Options("ghost-cmd-cs", 1000)));
            int reconnects = 0;
            bool resumed = false;
            client.Reconnected += (w, r) => { resumed = r; Interlocked.Increment(ref reconnects); };
            try
            {
                var agents = Wait(client.Spawn(world, "g", 2, Shapes.Points((20f, 20f), (30f, 20f)))).Agents;
                WaitTicks(world, 5);
                var before = Positions(world, agents);
                var cut = Stopwatch.StartNew();
                net.Cut();
                E2eTests.Until("the client to see the cut", () => client.State == "reconnecting");
                var e = Fails(client.MoveTo(world, agents, 80, 80));
                Assert.IsNotNull(e, "the queued command must fail");
                Assert.AreEqual("timeout", e.Code, e.Message);
                StringAssert.Contains("dropped unsent", e.Message);
                Assert.AreNotEqual("open", client.State, "still cut when the command timed out");
                Thread.Sleep((int)Math.Max(0, 2500 - cut.ElapsedMilliseconds));
                net.Heal();
                E2eTests.Until("the reconnect", () => reconnects == 1);
                Assert.IsTrue(resumed, "the session was resumed");
                WaitTicks(world, 40);
                Assert.AreEqual(before, Positions(world, agents), "the agents never acted on the timed-out command");
                // The session works: a command sent now is answered and acted on.
                Assert.AreEqual("ok", Wait(client.MoveTo(world, agents, 25, 40)).Type);
                E2eTests.Until("the agents to move", () => Positions(world, agents) != before, 10000);
            }
            finally
            {
                net.Heal();
                client.Close();
            }
        }

        [Test]
        public void ACommandSentButUnansweredIsOutcomeUnknown()
        {
            const string world = "ghost-unknown-cs";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(net.Base, Options("ghost-unknown-cs", 1000)));
            try
            {
                var agents = Wait(client.Spawn(world, "g", 1, Shapes.Points((20f, 20f)))).Agents;
                WaitTicks(world, 5);
                var before = Positions(world, agents);
                net.Hold();
                var e = Fails(client.MoveTo(world, agents, 60, 20));
                Assert.IsNotNull(e);
                Assert.AreEqual("outcome_unknown", e.Code, e.Message);
                Assert.AreEqual("open", client.State);
                net.Release();
                // Here it did run: the held command reaches the server after its timeout.
                E2eTests.Until("the held command to take effect", () => Positions(world, agents) != before, 10000);
            }
            finally
            {
                net.Release();
                client.Close();
            }
        }

        [Test]
        public void ARefusedSubscriptionLeavesNoViewAndIsNeverReplayed()
        {
            const string world = "ghost-sub-cs";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(net.Base, Options("ghost-sub-cs")));
            int reconnects = 0;
            client.Reconnected += (w, r) => Interlocked.Increment(ref reconnects);
            try
            {
                var wander = new List<BehaviorEntry> { Behavior.Wander().Entry() };
                Wait(client.Spawn(world, "w", 20, Shapes.Circle(50, 50, 10), null, wander));
                var e = Fails(client.Subscribe(world, null, 999));
                Assert.IsNotNull(e);
                Assert.AreEqual("invalid_field", e.Code);
                Assert.AreEqual("every_n_ticks", e.Field);
                Assert.IsNull(client.View(world), "no view for a refused subscription");
                client.DropSocket();
                E2eTests.Until("the reconnect", () => reconnects == 1);
                WaitTicks(world, 20);
                Assert.IsNull(client.View(world), "the refused subscription was not replayed");

                // Accepted at every 2 ticks; a refused change to 999 leaves the view and its rate.
                Wait(client.Subscribe(world, null, 2));
                var view = client.View(world);
                Assert.IsNotNull(view);
                var f = Fails(client.Subscribe(world, Shapes.View(0, 0, 10, 10), 999));
                Assert.AreEqual("invalid_field", f.Code);
                Assert.AreSame(view, client.View(world));
                lock (client.SyncRoot)
                {
                    Assert.AreEqual(2, view.EveryNTicks);
                    Assert.IsNull(view.Area, "the accepted area (the whole world)");
                }
                client.DropSocket();
                E2eTests.Until("the second reconnect", () => reconnects == 2);
                int n;
                lock (client.SyncRoot) n = view.CellsMessages;
                E2eTests.Until("cells messages after the reconnect", () => { lock (client.SyncRoot) return view.CellsMessages > n + 3; });
                lock (client.SyncRoot)
                {
                    Assert.AreEqual(2, view.Span, "the reconnect replayed the accepted rate");
                    Assert.AreEqual(20, view.Count, "the accepted area (the whole world)");
                }
            }
            finally
            {
                client.Close();
            }
        }

        [Test]
        public void AWorldGoneAfterAReconnectLosesItsView()
        {
            const string world = "ghost-gone-cs";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = Wait(SteerClient.ConnectAsync(net.Base, Options("ghost-gone-cs")));
            var removed = new List<string>();
            client.ViewRemoved += (w, why) => { lock (removed) removed.Add(w + ": " + why); };
            int reconnects = 0;
            client.Reconnected += (w, r) => Interlocked.Increment(ref reconnects);
            try
            {
                Wait(client.Subscribe(world));
                var view = client.View(world);
                var agents = Wait(client.Spawn(world, "g", 3, Shapes.Circle(50, 50, 5))).Agents;
                E2eTests.Until("agents in the view", () => { lock (client.SyncRoot) return agents.All(id => view.Agent(id) != null); });
                net.Cut();
                srv.Rest("DELETE", "/worlds/" + world);
                net.Heal();
                E2eTests.Until("the reconnect", () => reconnects == 1);
                lock (removed)
                {
                    Assert.AreEqual(1, removed.Count);
                    StringAssert.StartsWith(world + ": ", removed[0]);
                    StringAssert.Contains("gone", removed[0]);
                }
                Assert.IsNull(client.View(world));
                lock (client.SyncRoot)
                {
                    Assert.AreEqual(0, view.Count);
                    Assert.AreEqual(0, view.Sample(SteerClient.NowMs).Count);
                }
            }
            finally
            {
                net.Heal();
                client.Close();
            }
        }
    }
}
