// The client side of one (world, cell): the sorted agent list at a state tick, keyframes and the
// delta chain (PROTOCOL.md §6.3, §6.4), checksum verification (§6.5).

using System;
using System.Collections.Generic;
using System.Globalization;

namespace Steerd.Client
{
    /// <summary>
    /// One (world, cell): the agents at Tick, sorted by id. Delta() returns true when applied, false
    /// on a chain break (the caller resubscribes); both throw ProtoException on a malformed frame or
    /// a checksum mismatch, leaving the held state as it was. The records are the map's own and are
    /// updated in place by deltas (no allocation per agent and tick): clone one to keep it.
    /// </summary>
    public sealed class CellMap
    {
        /// <summary>State tick of Agents; -1 before the first keyframe.</summary>
        public long Tick = -1;
        public List<QAgent> Agents = new List<QAgent>();

        // Scratch shared by every map (the client applies frames on one thread).
        [ThreadStatic] static int[] scratch;
        [ThreadStatic] static int[] saved;

        public void Keyframe(Frame k)
        {
            var list = k.Agents;
            for (int i = 1; i < list.Count; i++)
                if (list[i].Id <= list[i - 1].Id) throw ProtoException.Malformed("keyframe agents not sorted by id");
            if (k.Checksum.HasValue && Codec.Checksum64(list) != k.Checksum.Value)
                throw new ProtoException(ProtoErrorKind.Checksum, "keyframe checksum mismatch in cell " + k.Cell);
            Tick = k.Tick;
            Agents = list;
        }

        /// <summary>`touched`, when given, receives the changed and entered records.</summary>
        public bool Delta(Frame d, int predictNum, List<QAgent> touched = null)
        {
            if (Tick != d.BaseTick || !(d.Tick > d.BaseTick)) return false;
            int mark = touched != null ? touched.Count : 0;
            List<QAgent> next;
            int n;
            try
            {
                next = Plan(Agents, d, predictNum, touched, out n);
            }
            catch
            {
                if (touched != null) touched.RemoveRange(mark, touched.Count - mark);
                throw;
            }
            Commit(Agents, n);
            if (d.Checksum.HasValue && Codec.Checksum64(next) != d.Checksum.Value)
            {
                Rollback(Agents, n);
                if (touched != null) touched.RemoveRange(mark, touched.Count - mark);
                throw new ProtoException(ProtoErrorKind.Checksum, "delta checksum mismatch in cell " + d.Cell + " at tick " + d.Tick);
            }
            Tick = d.Tick;
            Agents = next;
            return true;
        }

        /// <summary>Feeds change records from packed bytes or from entries (by index or, JSON form, by id).</summary>
        struct Source
        {
            ArraySegment<byte> seg;
            int p, end;
            List<object> entries;
            int k;
            List<QAgent> baseList;
            public Packed.Change C;

            public Source(object changed, List<QAgent> b)
            {
                baseList = b;
                C = new Packed.Change { Index = -1 };
                k = 0;
                if (changed is ArraySegment<byte>)
                {
                    seg = (ArraySegment<byte>)changed;
                    p = seg.Offset;
                    end = seg.Offset + seg.Count;
                    entries = null;
                }
                else
                {
                    seg = default(ArraySegment<byte>);
                    p = end = 0;
                    entries = (List<object>)changed;
                }
            }

            public bool Next()
            {
                if (entries == null)
                {
                    if (p >= end) return false;
                    Packed.ReadChange(seg.Array, ref p, end, C.Index, ref C);
                    return true;
                }
                if (k >= entries.Count) return false;
                var e = (Dictionary<string, object>)entries[k++];
                long index;
                object v;
                if (e.TryGetValue("index", out v)) index = Convert.ToInt64(v, CultureInfo.InvariantCulture);
                else if (e.TryGetValue("id", out v)) index = IndexOf(baseList, Convert.ToInt64(v, CultureInfo.InvariantCulture));
                else throw ProtoException.Malformed("a changed entry needs `index` or `id`");
                if (index < 0) throw ProtoException.Malformed("changed agent " + v + " not held");
                if (index <= C.Index) throw ProtoException.Malformed("changed entries not in increasing order");
                C.Index = index;
                bool hp = e.ContainsKey("dpos"), hv = e.ContainsKey("dvel");
                if (hp != hv) throw ProtoException.Malformed("dpos and dvel must be both present or both absent");
                if (hp)
                {
                    var dp = (List<object>)e["dpos"];
                    var dv = (List<object>)e["dvel"];
                    C.M = 2;
                    C.Dpx = Convert.ToInt32(dp[0]); C.Dpy = Convert.ToInt32(dp[1]);
                    C.Dvx = Convert.ToInt32(dv[0]); C.Dvy = Convert.ToInt32(dv[1]);
                }
                else C.M = 0;
                bool face = e.ContainsKey("face") && (bool)e["face"];
                bool turn = e.ContainsKey("dorient");
                if (face && turn) throw ProtoException.Malformed("at most one of face / dorient");
                C.O = face ? 1 : turn ? 2 : 0;
                C.D = turn ? Convert.ToInt32(e["dorient"]) : 0;
                return true;
            }
        }

        static long IndexOf(List<QAgent> list, long id)
        {
            int lo = 0, hi = list.Count - 1;
            while (lo <= hi)
            {
                int mid = (lo + hi) >> 1;
                long v = list[mid].Id;
                if (v == id) return mid;
                if (v < id) lo = mid + 1; else hi = mid - 1;
            }
            return -1;
        }

        /// <summary>Checks a delta against `b` (§6.4) and computes the result without touching any record.</summary>
        static List<QAgent> Plan(List<QAgent> b, Frame d, int predictNum, List<QAgent> touched, out int n)
        {
            var left = d.Left;
            var entered = d.Agents;
            var src = new Source(d.Changed, b);
            bool have = src.Next();
            var o = new List<QAgent>(b.Count + entered.Count);
            int li = 0, ei = 0;
            long prevEntered = -1;
            n = 0;
            if (scratch == null) scratch = new int[6 * 256];
            int len = b.Count;
            for (int i = 0; i < len; i++)
            {
                var a = b[i];
                long id = a.Id;
                if (li < left.Count)
                {
                    long l = Convert.ToInt64(left[li], CultureInfo.InvariantCulture);
                    if (l <= id)
                    {
                        if (l < id) throw ProtoException.Malformed("left agent " + l + " not in the cell");
                        li++;
                        if (have && src.C.Index == i) throw ProtoException.Malformed("changed agent " + id + " is also in left");
                        continue;
                    }
                }
                if (have && src.C.Index == i)
                {
                    var c = src.C;
                    int vx = a.VelX, vy = a.VelY, px = a.PosX, py = a.PosY;
                    if (c.M != 0)
                    {
                        vx = unchecked(vx + c.Dvx);
                        vy = unchecked(vy + c.Dvy);
                        px = unchecked(px + Codec.Predict(vx, predictNum) + c.Dpx);
                        py = unchecked(py + Codec.Predict(vy, predictNum) + c.Dpy);
                    }
                    int orient = a.Orient;
                    if (c.O == 1) orient = Codec.Heading(vx, vy);
                    else if (c.O == 2) orient = ((orient + c.D) % 65536 + 65536) % 65536;
                    if (6 * (n + 1) > scratch.Length) Array.Resize(ref scratch, scratch.Length * 2);
                    int k = 6 * n++;
                    scratch[k] = i; scratch[k + 1] = px; scratch[k + 2] = py; scratch[k + 3] = vx; scratch[k + 4] = vy; scratch[k + 5] = orient;
                    if (touched != null) touched.Add(a);
                    have = src.Next();
                }
                while (ei < entered.Count && entered[ei].Id < id)
                {
                    var e = entered[ei++];
                    if (e.Id <= prevEntered) throw ProtoException.Malformed("entered records not sorted by id");
                    prevEntered = e.Id;
                    o.Add(e);
                    if (touched != null) touched.Add(e);
                }
                if (ei < entered.Count && entered[ei].Id == id) throw ProtoException.Malformed("entered agent " + id + " already in the cell");
                o.Add(a);
            }
            if (li < left.Count) throw ProtoException.Malformed("left agent " + left[li] + " not in the cell");
            if (have) throw ProtoException.Malformed("changed base index " + src.C.Index + " out of range (" + len + " agents held)");
            while (ei < entered.Count)
            {
                var e = entered[ei++];
                if (e.Id <= prevEntered) throw ProtoException.Malformed("entered records not sorted by id");
                prevEntered = e.Id;
                o.Add(e);
                if (touched != null) touched.Add(e);
            }
            return o;
        }

        static void Commit(List<QAgent> b, int n)
        {
            if (saved == null || saved.Length < 5 * n) saved = new int[Math.Max(5 * n, 5 * 256)];
            for (int k = 0; k < n; k++)
            {
                int o = 6 * k, s = 5 * k;
                var a = b[scratch[o]];
                saved[s] = a.PosX; saved[s + 1] = a.PosY; saved[s + 2] = a.VelX; saved[s + 3] = a.VelY; saved[s + 4] = a.Orient;
                a.PosX = scratch[o + 1]; a.PosY = scratch[o + 2]; a.VelX = scratch[o + 3]; a.VelY = scratch[o + 4]; a.Orient = (ushort)scratch[o + 5];
            }
        }

        static void Rollback(List<QAgent> b, int n)
        {
            for (int k = 0; k < n; k++)
            {
                int s = 5 * k;
                var a = b[scratch[6 * k]];
                a.PosX = saved[s]; a.PosY = saved[s + 1]; a.VelX = saved[s + 2]; a.VelY = saved[s + 3]; a.Orient = (ushort)saved[s + 4];
            }
        }
    }
}
