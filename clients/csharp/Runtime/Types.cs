// Typed views of the server messages the client acts on, built from decoded trees (Codec.cs).

using System;
using System.Collections.Generic;
using System.Globalization;

namespace Steerd.Client
{
    public sealed class Quantization
    {
        public float PosStep, VelStep, OrientSnap;
        public int PredictNum;
        public bool SameAs(Quantization o) { return o != null && PosStep == o.PosStep && VelStep == o.VelStep && OrientSnap == o.OrientSnap && PredictNum == o.PredictNum; }
    }

    public sealed class WorldInfo
    {
        public uint Id;
        public string Name;
        public float MinX, MinY, MaxX, MaxY, AoiCellSize;
        public int Cols, Rows;
        /// <summary>The world's ticks per second (protocol v9; the tick_rate event announces a change).</summary>
        public float TickRateHz;
        public bool SameGrid(WorldInfo o)
        {
            return o != null && MinX == o.MinX && MinY == o.MinY && MaxX == o.MaxX && MaxY == o.MaxY && AoiCellSize == o.AoiCellSize && Cols == o.Cols && Rows == o.Rows;
        }
    }

    /// <summary>What a connection may do (Welcome.role, protocol v3); the value is the wire index.</summary>
    public enum Role { Admin = 0, Player = 1, Spectator = 2 }

    public sealed class Welcome
    {
        public int ProtocolVersion;
        public Quantization Quantization;
        public List<WorldInfo> Worlds = new List<WorldInfo>();
        public long MaxMessageBytes;
        /// <summary>The player this connection acts as (token sub, "anon-…" in dev mode, "admin").</summary>
        public string PlayerId;
        public Role Role;
        /// <summary>Send back in Hello.resume after a drop to resume this session.</summary>
        public string ResumeToken;
        /// <summary>How long after a drop the session can be resumed, seconds.</summary>
        public long SessionGraceSecs;

        public WorldInfo World(string name)
        {
            foreach (var w in Worlds) if (w.Name == name) return w;
            return null;
        }
    }

    /// <summary>A keyframe or delta of one (world, cell) (§5.2, §6).</summary>
    public sealed class Frame
    {
        public bool IsDelta;
        public uint World, Cell;
        public long Tick, BaseTick;
        /// <summary>FNV-1a 64 of the cell after the frame, when present.</summary>
        public ulong? Checksum;
        /// <summary>Keyframe agents, or delta entered records.</summary>
        public List<QAgent> Agents;
        public List<object> Left;
        /// <summary>ArraySegment&lt;byte&gt; (packed, binary) or a list of entries (index or id).</summary>
        public object Changed;
    }

    /// <summary>
    /// A tick's state of many cells of one world in one message (protocol v4, §6.8; binary
    /// connections receive these instead of per-cell keyframes and deltas). Each entry is a Frame
    /// without a checksum: a keyframe (Tick = the cell's state tick) or a delta (Tick = the
    /// message tick, BaseTick its base).
    /// </summary>
    public sealed class CellsMessage
    {
        public uint World;
        public long Tick;
        /// <summary>The subscription's every_n_ticks.</summary>
        public long Span;
        /// <summary>FNV-1a 64 folded over the cells' checksums after each entry, when present.</summary>
        public ulong? Checksum;
        public List<Frame> Entries = new List<Frame>();
    }

    /// <summary>A world event (§5.2 EventKind).</summary>
    public sealed class WorldEvent
    {
        /// <summary>destination_reached, gave_up, unreachable, path_completed, spawned, despawned, target_lost, tick_rate or groups.</summary>
        public string Type;
        public string World;
        public long Tick;
        /// <summary>The agent (destination_reached, gave_up, unreachable, path_completed, target_lost), else 0.</summary>
        public uint Agent;
        /// <summary>target_lost (protocol v8): the agent the behaviours of <see cref="Agent"/> aimed at,
        /// which left its owner's vision (those behaviours were removed); else 0.</summary>
        public uint Target;
        /// <summary>gave_up and unreachable (protocol v10): how far short of its goal the MoveTo agent
        /// stopped — from its stop point (gave_up), from the target asked for (unreachable); else 0.</summary>
        public float Distance;
        /// <summary>tick_rate (protocol v9): the world's new ticks per second, else 0.</summary>
        public float TickRateHz;
        /// <summary>The agents (spawned, despawned), else empty.</summary>
        public List<uint> Agents = new List<uint>();
        public string Group;
    }

    /// <summary>A command's successful outcome (ok, subscribed, spawned).</summary>
    public sealed class CommandResult
    {
        public string Type;
        public uint World;
        public List<uint> Cells = new List<uint>();
        public List<uint> Agents = new List<uint>();
    }

    /// <summary>A command answered with an error outcome, or not answered at all.</summary>
    public class CommandException : Exception
    {
        /// <summary>
        /// An ErrorCode wire name, or: timeout (no connection in time: the command left the queue
        /// and was never sent), outcome_unknown (sent, no result: it may or may not have run),
        /// not_connected (refused without sending), unsupported.
        /// </summary>
        public readonly string Code;
        public readonly string Field;
        public readonly long RequestId;
        public CommandException(string code, string message, string field = null, long requestId = 0)
            : base(code + ": " + message + (field != null ? " (field " + field + ")" : ""))
        {
            Code = code; Field = field; RequestId = requestId;
        }
    }

    /// <summary>
    /// ConnectAsync failed. Code: the server's refusal at Hello (unauthorized, unsupported_version,
    /// forbidden, ... with Field), unreachable (no Welcome: the connection failed or closed first;
    /// CloseCode / CloseReason from the socket, 1006 without a close frame) or closed (Close()
    /// first). Url: the WebSocket URL tried.
    /// </summary>
    public sealed class ConnectException : CommandException
    {
        public readonly string Url;
        public readonly int CloseCode;
        public readonly string CloseReason;
        public ConnectException(string code, string url, string message, string field = null, int closeCode = 0, string closeReason = "")
            : base(code, url + ": " + message, field)
        {
            Url = url; CloseCode = closeCode; CloseReason = closeReason ?? "";
        }
    }

    /// <summary>Why a connection ended: the client (Close, DropSocket, no Pong in time), the server (a close frame, with its code) or the network (no close frame: 1006).</summary>
    public enum DisconnectCause { Client, Server, Network }

    /// <summary>A connection ended (SteerClient.Disconnected).</summary>
    public sealed class DisconnectInfo
    {
        public DisconnectCause Cause;
        /// <summary>The close code (the server's for Server, 1006 for Network).</summary>
        public int Code;
        public string Reason;
        /// <summary>Whether the client tries again.</summary>
        public bool WillReconnect;
        public override string ToString() { return Cause + " " + Code + (string.IsNullOrEmpty(Reason) ? "" : " " + Reason) + (WillReconnect ? ", reconnecting" : ""); }
    }

    /// <summary>Helpers between decoded trees and the typed messages (public for tests and tools).</summary>
    public static class Tree
    {
        public static long L(Dictionary<string, object> d, string k) { return Convert.ToInt64(d[k], CultureInfo.InvariantCulture); }
        public static float Fl(Dictionary<string, object> d, string k) { return Convert.ToSingle(d[k], CultureInfo.InvariantCulture); }
        public static string S(Dictionary<string, object> d, string k) { object v; return d.TryGetValue(k, out v) ? v as string : null; }
        public static Dictionary<string, object> D(Dictionary<string, object> d, string k) { return (Dictionary<string, object>)d[k]; }
        public static List<uint> U32s(object list)
        {
            var o = new List<uint>();
            foreach (var x in (List<object>)list) o.Add((uint)Convert.ToInt64(x, CultureInfo.InvariantCulture));
            return o;
        }
        public static List<object> Objs(IEnumerable<uint> list)
        {
            var o = new List<object>();
            foreach (var x in list) o.Add((long)x);
            return o;
        }

        static Role ParseRole(string name)
        {
            int i = Array.IndexOf(Codec.Roles, name);
            if (i < 0) throw new ProtoException(ProtoErrorKind.Malformed, "unknown role `" + name + "`");
            return (Role)i;
        }

        public static Welcome Welcome(Dictionary<string, object> m)
        {
            var q = D(m, "quantization");
            var w = new Welcome
            {
                ProtocolVersion = (int)L(m, "protocol_version"),
                Quantization = new Quantization { PosStep = Fl(q, "pos_step"), VelStep = Fl(q, "vel_step"), PredictNum = (int)L(q, "predict_num"), OrientSnap = Fl(q, "orient_snap") },
                MaxMessageBytes = L(m, "max_message_bytes"),
                PlayerId = S(m, "player_id"),
                Role = ParseRole(S(m, "role")),
                ResumeToken = S(m, "resume_token"),
                SessionGraceSecs = L(m, "session_grace_secs"),
            };
            foreach (Dictionary<string, object> wi in (List<object>)m["worlds"])
            {
                var b = D(wi, "bounds");
                w.Worlds.Add(new WorldInfo
                {
                    Id = (uint)L(wi, "id"), Name = S(wi, "name"),
                    MinX = Fl(b, "min_x"), MinY = Fl(b, "min_y"), MaxX = Fl(b, "max_x"), MaxY = Fl(b, "max_y"),
                    AoiCellSize = Fl(wi, "aoi_cell_size"), Cols = (int)L(wi, "cols"), Rows = (int)L(wi, "rows"), TickRateHz = Fl(wi, "tick_rate_hz"),
                });
            }
            return w;
        }

        public static Frame Frame(Dictionary<string, object> m)
        {
            var f = new Frame { World = (uint)L(m, "world"), Cell = (uint)L(m, "cell"), Tick = L(m, "tick") };
            var ck = m["checksum"] as string;
            if (ck != null) f.Checksum = ulong.Parse(ck, NumberStyles.HexNumber, CultureInfo.InvariantCulture);
            if ((string)m["type"] == "keyframe")
            {
                f.Agents = (List<QAgent>)m["agents"];
                return f;
            }
            f.IsDelta = true;
            f.BaseTick = L(m, "base_tick");
            f.Left = (List<object>)m["left"];
            f.Changed = m["changed"];
            f.Agents = (List<QAgent>)m["entered"];
            return f;
        }

        /// <summary>A decoded cells message (Codec.DecodeServer, or the JSON form) as a CellsMessage.</summary>
        public static CellsMessage Cells(Dictionary<string, object> m)
        {
            uint world = (uint)L(m, "world");
            var c = new CellsMessage { World = world, Tick = L(m, "tick"), Span = L(m, "span") };
            var ck = m["checksum"] as string;
            if (ck != null) c.Checksum = ulong.Parse(ck, NumberStyles.HexNumber, CultureInfo.InvariantCulture);
            foreach (Dictionary<string, object> e in (List<object>)m["entries"])
            {
                object v;
                if (e.TryGetValue("keyframe", out v))
                {
                    var k = (Dictionary<string, object>)v;
                    c.Entries.Add(new Frame { World = world, Cell = (uint)L(k, "cell"), Tick = L(k, "tick"), Agents = (List<QAgent>)k["agents"] });
                }
                else
                {
                    var d = (Dictionary<string, object>)e["delta"];
                    c.Entries.Add(new Frame
                    {
                        IsDelta = true, World = world, Cell = (uint)L(d, "cell"), Tick = c.Tick, BaseTick = L(d, "base_tick"),
                        Left = (List<object>)d["left"], Changed = d["changed"], Agents = (List<QAgent>)d["entered"],
                    });
                }
            }
            return c;
        }
    }
}
