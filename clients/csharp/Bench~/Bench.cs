// Benchmark (not a gate): decode + apply one tick of a 10,000-agent whole-world stream through
// WorldView, and WorldView.Sample() of 10,000 agents, under mono. The stream is the TypeScript
// benchmark's synthetic one (bench.sh writes it with `node bench/bench.mjs --write-stream`).
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;

namespace Steerd.Client.Bench
{
    public static class Program
    {
        static double Median(List<double> a) { a.Sort(); return a[a.Count / 2]; }

        public static int Main(string[] args)
        {
            var data = File.ReadAllBytes(args[0]);
            int p = 0;
            Func<int> u32 = () => { int v = BitConverter.ToInt32(data, p); p += 4; return v; };
            int nKey = u32(), perTick = u32();
            var frames = new List<byte[]>();
            while (p < data.Length) { int n = u32(); var f = new byte[n]; Buffer.BlockCopy(data, p, f, 0, n); p += n; frames.Add(f); }
            var keys = frames.Take(nKey).ToList();
            var ticks = new List<List<byte[]>>();
            for (int i = nKey; i + perTick <= frames.Count; i += perTick) ticks.Add(frames.Skip(i).Take(perTick).ToList());
            var info = new WorldInfo { Id = 1, Name = "bench", MinX = 0, MinY = 0, MaxX = 200, MaxY = 200, AoiCellSize = 20, Cols = 10, Rows = 10 };
            var quant = new Quantization { PosStep = 0.01f, VelStep = 0.1f, PredictNum = 32768, OrientSnap = 0.035f };
            var times = new List<double>();
            WorldView view = null;
            for (int run = 0; run < 8; run++)
            {
                view = new WorldView(info, quant, 20, null);
                int resyncs = 0;
                view.OnResync = r => resyncs++;
                foreach (var k in keys) view.ApplyKeyframe(Tree.Frame(Codec.DecodeServer(k, Codec.DefaultServerLimit, true)), 0);
                for (int t = 0; t < ticks.Count; t++)
                {
                    var sw = Stopwatch.StartNew();
                    foreach (var f in ticks[t]) view.ApplyDelta(Tree.Frame(Codec.DecodeServer(f, Codec.DefaultServerLimit, true)), t * 50);
                    if (run >= 3) times.Add(sw.Elapsed.TotalMilliseconds);
                }
                if (resyncs != 0 || view.Count != 10000) { Console.Error.WriteLine("bench stream broken: " + resyncs + " resyncs, " + view.Count + " agents"); return 1; }
            }
            int bytes = ticks[0].Sum(f => f.Length);
            Console.WriteLine("decode+apply one tick, {0} agents in {1} cells ({2} bytes/tick): median {3:F3} ms over {4} ticks", view.Count, perTick, bytes, Median(times), times.Count);
            view.Clock.AddSample(0, 0, view.LatestTick);
            var st = new List<double>();
            for (int i = 0; i < 2000; i++)
            {
                var sw = Stopwatch.StartNew();
                var s = view.Sample(25 + i % 50);
                if (i >= 200) st.Add(sw.Elapsed.TotalMilliseconds);
                if (s.Count != 10000) { Console.Error.WriteLine("sample returned " + s.Count); return 1; }
            }
            Console.WriteLine("Sample() of 10000 agents: median {0:F3} ms over {1} calls", Median(st), st.Count);
            return 0;
        }
    }
}
