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

        /// <summary>`txn`: a cells entry (the message's CellsTxn can undo it).</summary>
        public void Keyframe(Frame k, CellsTxn txn = null)
        {
            var list = k.Agents;
            CheckSorted(list);
            if (k.Checksum.HasValue && Codec.Checksum64(list) != k.Checksum.Value)
                throw new ProtoException(ProtoErrorKind.Checksum, "keyframe checksum mismatch in cell " + k.Cell);
            if (txn != null) txn.Keyframe(this);
            Tick = k.Tick;
            Agents = list;
        }

        internal static void CheckSorted(List<QAgent> list)
        {
            for (int i = 1; i < list.Count; i++)
                if (list[i].Id <= list[i - 1].Id) throw ProtoException.Malformed("keyframe agents not sorted by id");
        }

        /// <summary>
        /// `touched`, when given, receives the changed and entered records. `txn`: a cells entry (no
        /// checksum of its own; the message's CellsTxn can undo it).
        /// </summary>
        public bool Delta(Frame d, int predictNum, List<QAgent> touched = null, CellsTxn txn = null)
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
            if (txn != null)
            {
                txn.Delta(this, n);
                Tick = d.Tick;
                Agents = next;
                return true;
            }
            if (saved == null || saved.Length < 6 * n) saved = new int[Math.Max(6 * n, 6 * 256)];
            Commit(Agents, n, saved, 0);
            if (d.Checksum.HasValue && Codec.Checksum64(next) != d.Checksum.Value)
            {
                Rollback(Agents, n, saved, 0);
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

        /// <summary>Writes the planned values into the changed records, keeping the old ones in dst from off (6 per change).</summary>
        internal static void Commit(List<QAgent> b, int n, int[] dst, int off)
        {
            for (int k = 0; k < n; k++)
            {
                int o = 6 * k, s = off + o;
                int i = scratch[o];
                var a = b[i];
                dst[s] = i; dst[s + 1] = a.PosX; dst[s + 2] = a.PosY; dst[s + 3] = a.VelX; dst[s + 4] = a.VelY; dst[s + 5] = a.Orient;
                a.PosX = scratch[o + 1]; a.PosY = scratch[o + 2]; a.VelX = scratch[o + 3]; a.VelY = scratch[o + 4]; a.Orient = (ushort)scratch[o + 5];
            }
        }

        internal static void Rollback(List<QAgent> b, int n, int[] src, int off)
        {
            for (int k = 0; k < n; k++)
            {
                int s = off + 6 * k;
                var a = b[src[s]];
                a.PosX = src[s + 1]; a.PosY = src[s + 2]; a.VelX = src[s + 3]; a.VelY = src[s + 4]; a.Orient = (ushort)src[s + 5];
            }
        }

        [ThreadStatic] static List<List<QAgent>> cellsStates;
        [ThreadStatic] static List<uint> cellsCreated;

        /// <summary>
        /// Applies a cells message (§6.8) to the per-cell maps of its world (created for keyframe
        /// entries as needed): every entry in order, then the message checksum (when present) over
        /// the cells' states. Returns null when applied, or the reason it was not — a chain break, a
        /// malformed entry (a cell outside the cols × rows grid, a rule of §6.4) or a checksum
        /// mismatch — in which case every map is back to what it held before the message (`txn`
        /// undoes the applied entries; maps it created are removed) and the caller resyncs.
        /// `subscribed` (the last Subscribed cells, or null): keyframe entries of other cells are not
        /// kept but still checked; delta entries of cells not held are skipped (their keyframe comes
        /// first), and a message with one cannot be checked against its checksum: it is applied unchecked.
        /// </summary>
        public static string ApplyCells(Dictionary<uint, CellMap> cells, CellsMessage m, int cols, int rows, int predictNum, HashSet<uint> subscribed, CellsTxn txn)
        {
            long ncells = (long)cols * rows;
            if (cellsStates == null) { cellsStates = new List<List<QAgent>>(); cellsCreated = new List<uint>(); }
            var states = m.Checksum.HasValue ? cellsStates : null;
            var created = cellsCreated;
            cellsStates.Clear();
            created.Clear();
            bool verifiable = true;
            txn.Begin();
            try
            {
                foreach (var e in m.Entries)
                {
                    if (e.Cell >= ncells) throw ProtoException.Malformed((e.IsDelta ? "delta" : "keyframe") + " entry of cell " + e.Cell + " outside the world's " + ncells + " cells");
                    CellMap cell;
                    if (!e.IsDelta)
                    {
                        if (subscribed != null && !subscribed.Contains(e.Cell))
                        {
                            CheckSorted(e.Agents);
                            if (states != null) states.Add(e.Agents);
                            continue;
                        }
                        if (!cells.TryGetValue(e.Cell, out cell)) { cell = new CellMap(); cells[e.Cell] = cell; created.Add(e.Cell); }
                        cell.Keyframe(e, txn);
                    }
                    else
                    {
                        if (!cells.TryGetValue(e.Cell, out cell)) { verifiable = false; continue; }
                        if (!cell.Delta(e, predictNum, null, txn))
                        {
                            Undo(cells, txn, created);
                            return "cell " + e.Cell + ": delta entry " + e.BaseTick + "→" + e.Tick + " on a cell held at " + cell.Tick;
                        }
                    }
                    if (states != null) states.Add(cell.Agents);
                }
                if (states != null && verifiable && Codec.CellsChecksum(states) != m.Checksum.Value)
                    throw new ProtoException(ProtoErrorKind.Checksum, "cells checksum mismatch at tick " + m.Tick);
            }
            catch (ProtoException ex)
            {
                Undo(cells, txn, created);
                return "cells at tick " + m.Tick + ": " + ex.Message;
            }
            finally
            {
                cellsStates.Clear();
                created.Clear();
            }
            txn.Begin();
            return null;
        }

        static void Undo(Dictionary<uint, CellMap> cells, CellsTxn txn, List<uint> created)
        {
            txn.Rollback();
            foreach (var c in created) cells.Remove(c);
        }
    }

    /// <summary>
    /// Undo log of one cells message (§6.8): its entries are applied one after the other (records
    /// updated in place), and when a later entry breaks a rule or the message checksum does not
    /// match, Rollback() puts every map back to what it held before the message. Reused.
    /// </summary>
    public sealed class CellsTxn
    {
        sealed class Step { public CellMap Map; public long Tick; public List<QAgent> Agents; public int Off, N; }
        int[] vals = new int[6 * 1024];
        int nv;
        readonly List<Step> steps = new List<Step>();
        int nsteps;

        /// <summary>Starts a message: forgets the previous one (it was kept).</summary>
        public void Begin() { nv = 0; nsteps = 0; }

        /// <summary>Entries applied since Begin.</summary>
        public int Count { get { return nsteps; } }

        Step Add(CellMap map, int n)
        {
            if (nsteps == steps.Count) steps.Add(new Step());
            var st = steps[nsteps++];
            st.Map = map; st.Tick = map.Tick; st.Agents = map.Agents; st.Off = nv; st.N = n;
            return st;
        }

        internal void Keyframe(CellMap map) { Add(map, 0); }

        internal void Delta(CellMap map, int n)
        {
            var st = Add(map, n);
            if (vals.Length < nv + 6 * n) Array.Resize(ref vals, Math.Max(nv + 6 * n, vals.Length * 2));
            CellMap.Commit(map.Agents, n, vals, st.Off);
            nv += 6 * n;
        }

        /// <summary>Puts every map touched since Begin back to its state before the message.</summary>
        public void Rollback()
        {
            for (int i = nsteps - 1; i >= 0; i--)
            {
                var st = steps[i];
                CellMap.Rollback(st.Agents, st.N, vals, st.Off);
                st.Map.Agents = st.Agents;
                st.Map.Tick = st.Tick;
                st.Agents = null;
            }
            nsteps = 0;
            nv = 0;
        }
    }
}
