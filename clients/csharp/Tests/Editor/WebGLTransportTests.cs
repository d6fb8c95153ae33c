// WebGLTransport's C# side (the polling over SteerdWebSocket.jslib's functions) end to end against
// a real steerd: the jslib's functions are played by FakeBrowser (a ClientWebSocket per id whose
// binary messages a background loop queues, as the jslib's onmessage does). The jslib itself runs
// in headless Chromium: tests/browser/webgl-transport.test.mjs.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net.WebSockets;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    /// <summary>The jslib's contract over ClientWebSocket: ids, a bounded queue of binary messages, close code and reason.</summary>
    sealed class FakeBrowser : IBrowserSocketApi
    {
        sealed class Sock
        {
            public ClientWebSocket Ws = new ClientWebSocket();
            public readonly ConcurrentQueue<byte[]> Queue = new ConcurrentQueue<byte[]>();
            public volatile bool Opened, Closed;
            public int Code;
            public string Reason = "";
        }

        readonly ConcurrentDictionary<int, Sock> sockets = new ConcurrentDictionary<int, Sock>();
        int next;
        public int Opens;

        public int Open(string url, int maxQueuedBytes)
        {
            int id = Interlocked.Increment(ref next);
            var s = new Sock();
            sockets[id] = s;
            Interlocked.Increment(ref Opens);
            Task.Run(async () =>
            {
                try
                {
                    await s.Ws.ConnectAsync(new Uri(url), CancellationToken.None);
                    s.Opened = true;
                    var buf = new byte[64 * 1024];
                    var acc = new MemoryStream();
                    for (;;)
                    {
                        var r = await s.Ws.ReceiveAsync(new ArraySegment<byte>(buf), CancellationToken.None);
                        if (r.MessageType == WebSocketMessageType.Close) break;
                        acc.Write(buf, 0, r.Count);
                        if (!r.EndOfMessage) continue;
                        if (r.MessageType == WebSocketMessageType.Binary) s.Queue.Enqueue(acc.ToArray());
                        acc.SetLength(0);
                    }
                    var st = s.Ws.CloseStatus;
                    s.Code = st.HasValue && (int)st.Value != 1005 && (int)st.Value != 1006 ? (int)st.Value : 0;
                    s.Reason = s.Ws.CloseStatusDescription ?? "";
                }
                catch (Exception) { }
                s.Closed = true;
            });
            return id;
        }

        public int State(int id)
        {
            Sock s;
            if (!sockets.TryGetValue(id, out s)) return -1;
            return s.Closed ? 3 : s.Opened ? 1 : 0;
        }

        public int Send(int id, byte[] data)
        {
            Sock s;
            if (!sockets.TryGetValue(id, out s) || State(id) != 1) return -1;
            lock (s) s.Ws.SendAsync(new ArraySegment<byte>(data), WebSocketMessageType.Binary, true, CancellationToken.None).Wait();
            return 0;
        }

        public int NextLength(int id)
        {
            Sock s;
            byte[] m;
            return sockets.TryGetValue(id, out s) && s.Queue.TryPeek(out m) ? m.Length : -1;
        }

        public int Receive(int id, byte[] buffer)
        {
            Sock s;
            byte[] m;
            if (!sockets.TryGetValue(id, out s) || !s.Queue.TryPeek(out m) || m.Length > buffer.Length) return -1;
            s.Queue.TryDequeue(out m);
            Buffer.BlockCopy(m, 0, buffer, 0, m.Length);
            return m.Length;
        }

        public int CloseCode(int id) { Sock s; return sockets.TryGetValue(id, out s) && s.Closed ? s.Code : 0; }
        public string CloseReason(int id) { Sock s; return sockets.TryGetValue(id, out s) ? s.Reason : ""; }

        public void Abort(int id)
        {
            Sock s;
            if (!sockets.TryGetValue(id, out s)) return;
            s.Closed = true;
            s.Code = 0;
            byte[] m;
            while (s.Queue.TryDequeue(out m)) { }
            try { s.Ws.Abort(); } catch (Exception) { }
        }

        public void Free(int id)
        {
            Sock s;
            if (sockets.TryRemove(id, out s)) try { s.Ws.Dispose(); } catch (Exception) { }
        }
    }

    [TestFixture]
    public class WebGLTransportTests : NoContextFixture
    {
        Server srv;

        [OneTimeSetUp]
        public void Start() { srv = new Server("sdk-webgl-admin-token", "sdk-webgl-player-jwt-secret-0123456789abcdef"); }

        [OneTimeTearDown]
        public void Stop() { if (srv != null) srv.Dispose(); }

        [Test]
        public void FrameDelayWaitsItsTimeWithoutATimerAndIsCancelled()
        {
            var sw = System.Diagnostics.Stopwatch.StartNew();
            Assert.IsTrue(Timing.FrameDelay(120, CancellationToken.None).Wait(5000));
            Assert.GreaterOrEqual(sw.Elapsed.TotalMilliseconds, 119.0);
            var cts = new CancellationTokenSource();
            var t = Timing.FrameDelay(60000, cts.Token);
            cts.Cancel();
            try { t.Wait(5000); Assert.Fail("not cancelled"); }
            catch (AggregateException e) { Assert.IsInstanceOf<OperationCanceledException>(e.InnerException); }
        }

        [Test]
        public void AClientOverTheBrowserSocketContractSpawnsStreamsResumesAndSeesTheServersCloseCode()
        {
            const string world = "cs-webgl";
            srv.Rest("POST", "/worlds", "{\"name\":\"" + world + "\"}");
            var browser = new FakeBrowser();
            var opts = new ConnectOptions
            {
                Token = srv.MintToken("webgl"),
                Transport = () => new WebGLTransport(browser, () => Task.Delay(1)),
                // As in a WebGL player: no timers, the clock polled (command timeouts, pings, back-off).
                Delay = Timing.FrameDelay,
                CommandTimeoutMs = 3000,
                ReconnectMinDelayMs = 50,
                ReconnectMaxDelayMs = 100,
            };
            var client = E2eTests.Wait(SteerClient.ConnectAsync(srv.Base, opts));
            var drops = new List<DisconnectInfo>();
            client.Disconnected += d => { lock (drops) drops.Add(d); };
            try
            {
                Assert.AreEqual("webgl", client.PlayerId);
                E2eTests.Wait(client.Subscribe(world));
                var view = client.View(world);
                var ids = E2eTests.Wait(client.Spawn(world, "g", 4, Shapes.Circle(40, 40, 3))).Agents;
                E2eTests.Until("the agents drawn, mine", () => { lock (client.SyncRoot) return view.Sample(SteerClient.NowMs).Count(s => s.Mine) == 4; });
                // The ping loop runs on the polled delay: its Pongs (the subscribed world's tick) reach the clock.
                Assert.Greater(E2eTests.Wait(client.Ping()), 0L);
                lock (client.SyncRoot) view.Clock.Reset();
                E2eTests.Until("the clock synced again by the ping loop alone", () => { lock (client.SyncRoot) return view.Clock.Synced; });
                // Abort (DropSocket) is a network failure: the client resumes through a new socket.
                bool? resumed = null;
                client.Reconnected += (w, r) => resumed = r;
                client.DropSocket();
                E2eTests.Until("the resume", () => resumed.HasValue);
                Assert.IsTrue(resumed.Value);
                Assert.AreEqual(2, browser.Opens);
                Assert.AreEqual("ok", E2eTests.Wait(client.MoveTo(world, ids, 60, 60)).Type);
                // The server's close frame reaches the client with its code: a kicked player (4003).
                srv.Rest("DELETE", "/worlds/" + world + "/players/webgl");
                E2eTests.Until("the server's close", () => { lock (drops) return drops.Any(d => d.Cause == DisconnectCause.Server); });
                lock (drops)
                {
                    var d = drops.First(x => x.Cause == DisconnectCause.Server);
                    Assert.AreEqual(4003, d.Code, d.Reason);
                    Assert.AreEqual(DisconnectCause.Client, drops[0].Cause);
                }
            }
            finally
            {
                client.Close();
            }
        }
    }
}
