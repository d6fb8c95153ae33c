// Benchmark (not a gate): decode + apply one tick of a 10,000-agent whole-world stream through
// WorldView, and WorldView.Sample() of 10,000 agents, under mono. The stream is the TypeScript
// benchmark's synthetic one (bench.sh writes it with `node bench/bench.mjs --write-stream` and
// `--write-cells-stream`): per-cell keyframes and deltas, or protocol v4's one cells message per
// tick (a file whose first frame is a cells message). Usage: Bench.exe STREAM [STREAM…]
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
            WorldView view = null;
            foreach (var path in args) { view = Run(path); if (view == null) return 1; }
            if (view == null) { Console.Error.WriteLine("usage: Bench.exe STREAM [STREAM…]"); return 2; }
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

        static void Apply(WorldView view, byte[] frame, double nowMs)
        {
            var m = Codec.DecodeServer(frame, Codec.DefaultServerLimit, true);
            switch ((string)m["type"])
            {
                case "cells": view.ApplyCells(Tree.Cells(m), nowMs); break;
                case "keyframe": view.ApplyKeyframe(Tree.Frame(m), nowMs); break;
                default: view.ApplyDelta(Tree.Frame(m), nowMs); break;
            }
        }

        static WorldView Run(string path)
        {
            var data = File.ReadAllBytes(path);
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
            bool cells = (string)Codec.DecodeServer(keys[0], Codec.DefaultServerLimit, true)["type"] == "cells";
            for (int run = 0; run < 8; run++)
            {
                view = new WorldView(info, quant, 20, null);
                int resyncs = 0;
                view.OnResync = r => resyncs++;
                foreach (var k in keys) Apply(view, k, 0);
                for (int t = 0; t < ticks.Count; t++)
                {
                    var sw = Stopwatch.StartNew();
                    foreach (var f in ticks[t]) Apply(view, f, t * 50);
                    if (run >= 3) times.Add(sw.Elapsed.TotalMilliseconds);
                }
                if (resyncs != 0 || view.Count != 10000) { Console.Error.WriteLine("bench stream broken: " + resyncs + " resyncs, " + view.Count + " agents"); return null; }
                if (cells && view.CellsMessages != ticks.Count + 1) { Console.Error.WriteLine("cells messages not all applied"); return null; }
            }
            int bytes = ticks[0].Sum(f => f.Length);
            Console.WriteLine("decode+apply one tick, {0} agents in {1} cells, {2} ({3} bytes/tick): median {4:F3} ms over {5} ticks",
                view.Count, view.Cells.Count, cells ? "one cells message" : perTick + " per-cell deltas", bytes, Median(times), times.Count);
            return view;
        }
    }
}
