// Connection life cycle against a real steerd (through NetCut): connect errors carry a code and
// the URL, RetryFirstConnect waits for a server that is not up yet, and Disconnected tells a
// client close, a server close (with its code) and a network loss apart.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    [TestFixture]
    public class ConnectionTests : ProxiedServerFixture
    {
        static ConnectException ConnectFails(Task t)
        {
            try { t.Wait(20000); }
            catch (AggregateException e) { return e.InnerException as ConnectException; }
            return null;
        }

        static int DeadPort()
        {
            var l = new TcpListener(IPAddress.Loopback, 0);
            l.Start();
            int port = ((IPEndPoint)l.LocalEndpoint).Port;
            l.Stop();
            return port;
        }

        [Test]
        public void ADeadPortIsUnreachableWithTheUrl()
        {
            int port = DeadPort();
            var e = ConnectFails(SteerClient.ConnectAsync("http://127.0.0.1:" + port));
            Assert.IsNotNull(e, "connect must fail with a ConnectException");
            Assert.AreEqual("unreachable", e.Code);
            Assert.AreEqual("ws://127.0.0.1:" + port + "/ws", e.Url);
            StringAssert.Contains("ws://127.0.0.1:" + port + "/ws", e.Message);
            var r = ConnectFails(SteerClient.ConnectAsync("http://127.0.0.1:" + port, new ConnectOptions { RetryFirstConnect = true, ReconnectMinDelayMs = 50, ReconnectMaxDelayMs = 100, ReconnectMaxAttempts = 2 }));
            Assert.IsNotNull(r);
            Assert.AreEqual("unreachable", r.Code);
            StringAssert.Contains("after 3 attempts", r.Message);
        }

        [Test]
        public void ARefusalAtHelloCarriesTheServerCodeAndTheUrl()
        {
            var e = ConnectFails(SteerClient.ConnectAsync(net.Base, new ConnectOptions { Token = "wrong" }));
            Assert.IsNotNull(e);
            Assert.AreEqual("unauthorized", e.Code);
            Assert.AreEqual("token", e.Field);
            StringAssert.EndsWith("/ws", e.Url);
        }

        [Test]
        public void RetryFirstConnectWaitsForTheServer()
        {
            net.Cut();
            try
            {
                var t = SteerClient.ConnectAsync(net.Base, new ConnectOptions { Token = srv.MintToken("late-cs"), RetryFirstConnect = true, ReconnectMinDelayMs = 50, ReconnectMaxDelayMs = 100 });
                Thread.Sleep(500);
                Assert.IsFalse(t.IsCompleted, "still trying while the network is cut");
                net.Heal();
                Assert.IsTrue(t.Wait(15000));
                var client = t.Result;
                var seen = new List<DisconnectInfo>();
                client.Disconnected += d => { lock (seen) seen.Add(d); };
                Assert.AreEqual("late-cs", client.PlayerId);
                client.Close();
                lock (seen)
                {
                    Assert.AreEqual(1, seen.Count);
                    Assert.AreEqual(DisconnectCause.Client, seen[0].Cause);
                    Assert.IsFalse(seen[0].WillReconnect);
                }
            }
            finally
            {
                net.Heal();
            }
        }

        [Test]
        public void DisconnectCausesClientNetworkServer()
        {
            const string world = "conn-causes-cs";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var client = SteerClient.ConnectAsync(net.Base, new ConnectOptions { Token = srv.MintToken("dave-cs"), ReconnectMinDelayMs = 50, ReconnectMaxDelayMs = 100 }).Result;
            var seen = new List<DisconnectInfo>();
            client.Disconnected += d => { lock (seen) seen.Add(d); };
            int reconnects = 0;
            client.Reconnected += (w, r) => Interlocked.Increment(ref reconnects);
            try
            {
                client.DropSocket();
                E2eTests.Until("the reconnect", () => reconnects == 1);
                lock (seen) { Assert.AreEqual(DisconnectCause.Client, seen[0].Cause); Assert.IsTrue(seen[0].WillReconnect); }

                net.Cut();
                E2eTests.Until("the cut noticed", () => { lock (seen) return seen.Count >= 2; });
                net.Heal();
                E2eTests.Until("the second reconnect", () => reconnects == 2);
                lock (seen) Assert.IsTrue(seen.Skip(1).All(d => d.Cause == DisconnectCause.Network && d.Code == 1006), string.Join("; ", seen));

                client.Subscribe(world).Wait(15000);
                client.Spawn(world, "dave", 1, Shapes.Circle(50, 50, 1)).Wait(15000);
                int n;
                lock (seen) n = seen.Count;
                srv.Rest("DELETE", "/worlds/" + world + "/players/dave-cs");
                E2eTests.Until("the third reconnect", () => reconnects == 3);
                lock (seen)
                {
                    var kicked = seen[n];
                    Assert.AreEqual(DisconnectCause.Server, kicked.Cause, kicked.ToString());
                    Assert.IsTrue(kicked.Code >= 1000 && kicked.Code != 1005 && kicked.Code != 1006, "the server's close code: " + kicked.Code);
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
