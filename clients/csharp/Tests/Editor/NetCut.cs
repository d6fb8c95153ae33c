// A loopback TCP proxy in front of a test server that can cut the network: Cut() closes every
// connection through it (reset) and refuses new ones until Heal(); Hold() keeps connections up but
// holds back what clients send (the server hears nothing) until Release() delivers it.
using System;
using System.Collections.Generic;
using System.Net;
using System.Net.Sockets;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    /// <summary>A fixture's real steerd (admin token + player secret) behind a NetCut proxy.</summary>
    public abstract class ProxiedServerFixture : NoContextFixture
    {
        protected Server srv;
        protected NetCut net;

        [OneTimeSetUp]
        public void StartServerAndProxy()
        {
            var name = GetType().Name.ToLowerInvariant();
            srv = new Server("sdk-" + name + "-admin-token", "sdk-" + name + "-player-jwt-secret-0123456789abcdef");
            net = new NetCut(srv.Base);
        }

        [OneTimeTearDown]
        public void StopServerAndProxy()
        {
            if (net != null) net.Dispose();
            if (srv != null) srv.Dispose();
        }
    }

    public sealed class NetCut : IDisposable
    {
        public readonly string Base;
        readonly TcpListener listener;
        readonly int targetPort;
        readonly object gate = new object();
        readonly List<Pair> pairs = new List<Pair>();
        string mode = "pass";
        bool stopped;

        sealed class Pair
        {
            public TcpClient C;
            public TcpClient U;
            public readonly List<byte[]> Held = new List<byte[]>();
            public void Close()
            {
                try { C.Client.LingerState = new LingerOption(true, 0); } catch (Exception) { }
                try { C.Close(); } catch (Exception) { }
                try { U.Close(); } catch (Exception) { }
            }
        }

        public NetCut(string targetBase)
        {
            targetPort = new Uri(targetBase).Port;
            listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            Base = "http://127.0.0.1:" + ((IPEndPoint)listener.LocalEndpoint).Port;
            Task.Run(AcceptLoop);
        }

        async Task AcceptLoop()
        {
            while (true)
            {
                TcpClient c;
                try { c = await listener.AcceptTcpClientAsync().ConfigureAwait(false); }
                catch (Exception) { return; }
                lock (gate)
                {
                    if (stopped || mode == "cut") { c.Client.LingerState = new LingerOption(true, 0); c.Close(); continue; }
                }
                var u = new TcpClient();
                try { await u.ConnectAsync(IPAddress.Loopback, targetPort).ConfigureAwait(false); }
                catch (Exception) { c.Close(); continue; }
                var pair = new Pair { C = c, U = u };
                lock (gate) pairs.Add(pair);
                var up = Pump(pair, true);
                var down = Pump(pair, false);
                GC.KeepAlive(up);
                GC.KeepAlive(down);
            }
        }

        async Task Pump(Pair p, bool upstream)
        {
            var buf = new byte[16384];
            try
            {
                var from = (upstream ? p.C : p.U).GetStream();
                var to = (upstream ? p.U : p.C).GetStream();
                while (true)
                {
                    int n = await from.ReadAsync(buf, 0, buf.Length).ConfigureAwait(false);
                    if (n <= 0) break;
                    var chunk = new byte[n];
                    Array.Copy(buf, chunk, n);
                    lock (gate)
                    {
                        if (upstream && mode == "hold") { p.Held.Add(chunk); continue; }
                    }
                    await to.WriteAsync(chunk, 0, n).ConfigureAwait(false);
                }
            }
            catch (Exception) { }
            lock (gate) pairs.Remove(p);
            p.Close();
        }

        public void Cut()
        {
            List<Pair> all;
            lock (gate) { mode = "cut"; all = new List<Pair>(pairs); pairs.Clear(); }
            foreach (var p in all) p.Close();
        }

        public void Heal() { lock (gate) mode = "pass"; }

        public void Hold() { lock (gate) mode = "hold"; }

        public void Release()
        {
            lock (gate)
            {
                mode = "pass";
                foreach (var p in pairs)
                {
                    foreach (var d in p.Held) { try { p.U.GetStream().Write(d, 0, d.Length); } catch (Exception) { } }
                    p.Held.Clear();
                }
            }
        }

        public void Dispose()
        {
            List<Pair> all;
            lock (gate) { stopped = true; all = new List<Pair>(pairs); pairs.Clear(); }
            listener.Stop();
            foreach (var p in all) p.Close();
        }
    }
}
