// steerd wire protocol (client-proto/PROTOCOL.md) — encoder and decoder, C# 7.3 / .NET Standard 2.0.
//
// Messages are decoded to trees shaped like the protocol's JSON form (§4): a message or struct
// is a Dictionary<string, object> (enum variants carry "type"), lists are List<object>, integers
// are long, f32 are float, checksums are 16 lowercase hex digits, absent options are null. Packed
// sections become List<QAgent> (records), List<object> of long (ids, and the cells of
// `subscribed`, runs in binary) and, for a delta's `changed`, either entries {index, dpos, dvel,
// face | dorient} or — with rawChanges — the packed bytes as an ArraySegment<byte> that CellMap
// applies without intermediate objects.
//
// Errors are ProtoExceptions whose Kind is one of malformed, unexpected_end, trailing_bytes,
// too_large (the kinds of client-proto/tests/vectors/invalid.json) or checksum (CellMap).
//
// The handshake (Hello / Welcome) is defined once, in HelloFields / WelcomeFields and Hello().

using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Steerd.Client
{
    public enum ProtoErrorKind { Malformed, UnexpectedEnd, TrailingBytes, TooLarge, Checksum }

    public sealed class ProtoException : Exception
    {
        public readonly ProtoErrorKind Kind;
        public ProtoException(ProtoErrorKind kind, string message) : base(KindName(kind) + ": " + message) { Kind = kind; }

        /// <summary>The kind as invalid.json spells it.</summary>
        public static string KindName(ProtoErrorKind k)
        {
            switch (k)
            {
                case ProtoErrorKind.Malformed: return "malformed";
                case ProtoErrorKind.UnexpectedEnd: return "unexpected_end";
                case ProtoErrorKind.TrailingBytes: return "trailing_bytes";
                case ProtoErrorKind.TooLarge: return "too_large";
                default: return "checksum";
            }
        }

        internal static ProtoException Malformed(string m) { return new ProtoException(ProtoErrorKind.Malformed, m); }
        internal static ProtoException End(string m) { return new ProtoException(ProtoErrorKind.UnexpectedEnd, m); }
    }

    /// <summary>A quantized agent record (§6.1), integer units of the Welcome's quantization.</summary>
    public sealed class QAgent
    {
        public uint Id;
        public ushort Group;
        public int PosX, PosY, VelX, VelY;
        public ushort Orient;

        public QAgent() { }
        public QAgent(uint id, ushort group, int px, int py, int vx, int vy, ushort orient)
        {
            Id = id; Group = group; PosX = px; PosY = py; VelX = vx; VelY = vy; Orient = orient;
        }
        public QAgent Clone() { return new QAgent(Id, Group, PosX, PosY, VelX, VelY, Orient); }
        public override string ToString()
        {
            return string.Format(CultureInfo.InvariantCulture, "{{id {0} group {1} pos ({2},{3}) vel ({4},{5}) orient {6}}}", Id, Group, PosX, PosY, VelX, VelY, Orient);
        }
        public bool SameAs(QAgent o)
        {
            return o != null && Id == o.Id && Group == o.Group && PosX == o.PosX && PosY == o.PosY && VelX == o.VelX && VelY == o.VelY && Orient == o.Orient;
        }
    }

    /// <summary>Schema types (§5).</summary>
    internal abstract class T { }
    internal sealed class Prim : T { public readonly string Name; public Prim(string n) { Name = n; } }
    internal sealed class Field
    {
        public readonly string Name; public readonly T Type; public readonly bool HasDefault; public readonly Func<object> Default;
        public Field(string name, T type) { Name = name; Type = type; }
        public Field(string name, T type, Func<object> def) { Name = name; Type = type; HasDefault = true; Default = def; }
    }
    internal sealed class StructT : T { public readonly Field[] Fields; public StructT(Field[] f) { Fields = f; } }
    internal sealed class OptT : T { public readonly T Inner; public OptT(T t) { Inner = t; } }
    internal sealed class VecT : T { public readonly T Inner; public VecT(T t) { Inner = t; } }
    internal sealed class Variant { public readonly string Name; public readonly Field[] Fields; public Variant(string n, Field[] f) { Name = n; Fields = f; } }
    internal sealed class TaggedT : T { public readonly Variant[] Variants; public TaggedT(Variant[] v) { Variants = v; } }
    internal sealed class NamesT : T { public readonly string[] Names; public NamesT(string[] n) { Names = n; } }
    internal sealed class PackedT : T { public readonly string Kind; public PackedT(string k) { Kind = k; } }

    public static class Codec
    {
        public const int ProtocolVersion = 11;
        /// <summary>Largest server frame a client should accept (§1).</summary>
        public const int DefaultServerLimit = 8 * 1024 * 1024;
        /// <summary>Default largest client frame (§1, Welcome.max_message_bytes).</summary>
        public const int DefaultClientLimit = 65536;

        // ---- schema

        static readonly T U8 = new Prim("u8"), U16 = new Prim("u16"), U32 = new Prim("u32"), U64 = new Prim("u64"),
            I32 = new Prim("i32"), F32 = new Prim("f32"), Str = new Prim("string"), Checksum = new Prim("checksum");
        static Field F(string n, T t) { return new Field(n, t); }
        static Field F(string n, T t, object def) { return new Field(n, t, () => def); }
        static Field Fd(string n, T t, Func<object> def) { return new Field(n, t, def); }
        static Variant V(string n, params Field[] f) { return new Variant(n, f); }
        static StructT S(params Field[] f) { return new StructT(f); }

        static readonly T Point = S(F("x", F32), F("y", F32));
        static readonly Field[] RectFields = { F("min_x", F32), F("min_y", F32), F("max_x", F32), F("max_y", F32) };
        static readonly T Area = new TaggedT(new[] { V("rect", RectFields), V("whole_world") });
        static readonly Field[] CircleFields = { F("x", F32), F("y", F32), F("radius", F32) };
        static readonly T SpawnArea = new TaggedT(new[] { V("rect", RectFields), V("circle", CircleFields), V("ring", CircleFields), V("points", F("points", new VecT(Point))) });
        static readonly T Limits = S(F("max_speed", new OptT(F32), null), F("max_accel", new OptT(F32), null), F("max_rotation", new OptT(F32), null),
            F("max_angular_accel", new OptT(F32), null), F("radius", new OptT(F32), null), F("mass", new OptT(F32), null));
        static readonly T Target = new TaggedT(new[] { V("point", F("x", F32), F("y", F32)), V("agent", F("agent", U32)) });
        static readonly T AlignTarget = new TaggedT(new[] { V("orientation", F("radians", F32)), V("agent", F("agent", U32)) });
        static readonly T AlignParams = S(F("target_radius", F32, 0.1f), F("slow_radius", F32, 0.5f), F("time_to_target", F32, 0.1f));
        static object AlignDefault() { return new Dictionary<string, object> { { "target_radius", 0.1f }, { "slow_radius", 0.5f }, { "time_to_target", 0.1f } }; }

        static readonly Variant[] Behaviors =
        {
            V("seek", F("target", Target)),
            V("flee", F("target", Target), F("panic_distance", F32, 10f)),
            V("arrive", F("target", Target), F("target_radius", F32, 1f), F("slow_radius", F32, 5f), F("time_to_target", F32, 0.25f)),
            V("pursue", F("target_agent", U32), F("max_prediction", F32, 5f)),
            V("evade", F("target_agent", U32), F("panic_distance", F32, 10f), F("max_prediction", F32, 5f)),
            V("align", F("target", AlignTarget), Fd("align", AlignParams, AlignDefault)),
            V("face", F("target", Target), Fd("align", AlignParams, AlignDefault)),
            V("look_where_you_are_going", Fd("align", AlignParams, AlignDefault)),
            V("velocity_match", F("target_agent", U32), F("time_to_target", F32, 0.1f)),
            V("wander", F("variant", new NamesT(new[] { "millington", "circle" }), "millington"), F("wander_offset", F32, 1.5f), F("wander_radius", F32, 1f), F("wander_rate", F32, 0.5f)),
            V("random_target", F("radius", F32, 10f), F("interval_min", F32, 1f), F("interval_max", F32, 2f), F("center", new OptT(Point), null)),
            V("obstacle_avoidance", F("min_box_length", new OptT(F32), null), F("braking_weight", F32, 0.6f), F("lateral_base", F32, 1f)),
            V("ahead_avoidance", F("ahead_len", F32, 4f), F("max_avoid_force", F32, 0.4f), F("margin", F32, 0f)),
            V("wall_avoidance", F("look_ahead", F32, 5f), F("avoid_distance", F32, 3f)),
            V("agent_avoidance", F("look_ahead", F32, 3f), F("avoid_radius", F32, 2f)),
            V("separation", F("neighbor_radius", F32, 3f)),
            V("cohesion", F("neighbor_radius", F32, 3f)),
            V("alignment", F("neighbor_radius", F32, 3f), F("time_to_target", F32, 0.1f)),
            V("path_following", F("waypoints", new VecT(Point)), F("path_radius", F32, 1f), F("mode", new NamesT(new[] { "once", "loop", "ping_pong" }), "once")),
            V("leader_following", F("leader", U32), F("behind_distance", F32, 2f), F("leader_sight_radius", F32, 3f), F("separation_radius", F32, 1.5f), F("separation_weight", F32, 1f)),
            V("reciprocal_avoidance", F("time_horizon", F32, 1f), F("obstacle_time_horizon", F32, 1f), F("neighbor_dist", F32, 10f), F("max_neighbors", U32, 10L)),
        };
        static readonly T Behavior = new TaggedT(Behaviors);
        static readonly T BehaviorKind = new NamesT(Array.ConvertAll(Behaviors, b => b.Name));
        static readonly T BehaviorEntry = S(F("behavior", Behavior), F("weight", F32, 1f), F("priority", U8, 0L));

        /// <summary>Wire names of ErrorCode (index = binary value); v3 appended "quota_exceeded" (12).</summary>
        public static readonly string[] ErrorCodes =
        {
            "bad_request", "invalid_field", "unknown_world", "unknown_agent", "forbidden", "unauthorized",
            "rate_limited", "too_large", "busy", "not_found", "unsupported_version", "internal", "quota_exceeded",
        };
        static readonly T Encoding_ = new NamesT(new[] { "binary", "json" });
        /// <summary>Wire names of Role (index = binary value = (int)Steerd.Client.Role), protocol v3.</summary>
        public static readonly string[] Roles = { "admin", "player", "spectator" };

        // ---- The handshake. Protocol v3 (players, sessions) appended "resume" to Hello and
        // player_id, role, resume_token, session_grace_secs to Welcome.
        static readonly Field[] HelloFields = { F("protocol_version", U16), F("token", new OptT(Str), null), F("encoding", Encoding_, "binary"), F("resume", new OptT(Str), null) };
        static readonly T Quantization = S(F("pos_step", F32), F("vel_step", F32), F("predict_num", I32), F("orient_snap", F32));
        static readonly T WorldInfo = S(F("id", U32), F("name", Str), F("bounds", S(RectFields)), F("aoi_cell_size", F32), F("cols", U32), F("rows", U32), F("tick_rate_hz", F32));
        static readonly Field[] WelcomeFields =
        {
            F("protocol_version", U16), F("quantization", Quantization), F("worlds", new VecT(WorldInfo)), F("max_message_bytes", U32),
            F("player_id", Str), F("role", new NamesT(Roles)), F("resume_token", Str), F("session_grace_secs", U32),
        };

        /// <summary>
        /// The Hello this client sends. `resume`: a previous Welcome's resume token, to take that
        /// session (player, agents, subscriptions) back within its grace period; null for a new one.
        /// </summary>
        public static Dictionary<string, object> Hello(string token, string resume)
        {
            return new Dictionary<string, object> { { "type", "hello" }, { "protocol_version", (long)ProtocolVersion }, { "token", token }, { "encoding", "binary" }, { "resume", resume } };
        }

        static readonly Field Rid = F("request_id", U32), World = F("world", Str), Agents = F("agents", new VecT(U32));
        static readonly TaggedT Client = new TaggedT(new[]
        {
            new Variant("hello", HelloFields),
            V("subscribe", Rid, World, F("area", Area), F("every_n_ticks", U32, 1L)),
            V("unsubscribe", Rid, World),
            V("move_to", Rid, World, Agents, F("target", Point), F("stopping_distance", F32, 0f)),
            V("set_behaviors", Rid, World, Agents, F("behaviors", new VecT(BehaviorEntry))),
            V("add_behavior", Rid, World, Agents, F("entry", BehaviorEntry)),
            V("remove_behavior", Rid, World, Agents, F("kind", BehaviorKind)),
            V("reset_behaviors", Rid, World, Agents),
            V("spawn", Rid, World, F("group", Str), F("count", U32), F("area", SpawnArea), Fd("limits", Limits, () => new Dictionary<string, object>()), Fd("behaviors", new VecT(BehaviorEntry), () => new List<object>())),
            V("despawn", Rid, World, Agents),
            V("ping", Rid),
        });

        static readonly Field[] ErrorFields = { F("code", new NamesT(ErrorCodes)), F("message", Str), F("field", new OptT(Str), null) };
        static readonly TaggedT Server = new TaggedT(new[]
        {
            new Variant("welcome", WelcomeFields),
            V("keyframe", F("world", U32), F("cell", U32), F("tick", U64), F("checksum", Checksum, null), F("agents", new PackedT("records"))),
            V("delta", F("world", U32), F("cell", U32), F("tick", U64), F("base_tick", U64), F("checksum", Checksum, null), F("left", new PackedT("ids")), F("changed", new PackedT("changes")), F("entered", new PackedT("records"))),
            V("event", F("world", U32), F("tick", U64), F("event", new TaggedT(new[] { V("destination_reached", F("agent", U32)), V("path_completed", F("agent", U32)), V("spawned", F("group", Str), Agents), V("despawned", Agents), V("target_lost", F("agent", U32), F("target", U32)), V("tick_rate", F("tick_rate_hz", F32)), V("groups", F("groups", new VecT(Str))), V("gave_up", F("agent", U32), F("distance", F32)), V("unreachable", F("agent", U32), F("distance", F32)) }))),
            V("command_result", Rid, F("result", new TaggedT(new[] { V("ok"), V("subscribed", F("world", U32), F("cells", new PackedT("runs")), F("groups", new VecT(Str))), V("spawned", Agents), new Variant("error", ErrorFields) }))),
            new Variant("error", ErrorFields),
            V("pong", Rid, F("server_tick", U64)),
            V("cells", F("world", U32), F("tick", U64), F("span", U32), F("checksum", Checksum, null), F("entries", new PackedT("entries"))),
            V("moved", F("world", U32), F("name", Str), F("to", Str)),
        });

        /// <summary>
        /// The codec's table of the client ("client") or server ("server") messages as a tree in the
        /// grammar of steer-proto's schema.json (lists, dictionaries, strings; defaults dropped, a
        /// checksum as an optional one). The test suite checks it against that file.
        /// </summary>
        public static object DescribeTables(string side)
        {
            if (side == "client") return Describe(Client);
            if (side == "server") return Describe(Server);
            throw new ArgumentException("side: client or server", "side");
        }

        static List<object> DescribeFields(Field[] fields)
        {
            var l = new List<object>();
            foreach (var f in fields) l.Add(new List<object> { f.Name, Describe(f.Type) });
            return l;
        }

        static object Describe(T t)
        {
            var p = t as Prim;
            if (p != null) return p.Name == "checksum" ? (object)new Dictionary<string, object> { { "opt", "checksum" } } : p.Name;
            var st = t as StructT;
            if (st != null) return new Dictionary<string, object> { { "struct", DescribeFields(st.Fields) } };
            var o = t as OptT;
            if (o != null) return new Dictionary<string, object> { { "opt", Describe(o.Inner) } };
            var v = t as VecT;
            if (v != null) return new Dictionary<string, object> { { "vec", Describe(v.Inner) } };
            var tg = t as TaggedT;
            if (tg != null)
            {
                var l = new List<object>();
                foreach (var x in tg.Variants) l.Add(new List<object> { x.Name, DescribeFields(x.Fields) });
                return new Dictionary<string, object> { { "tagged", l } };
            }
            var n = t as NamesT;
            if (n != null) return new Dictionary<string, object> { { "names", new List<object>(n.Names) } };
            var pk = t as PackedT;
            if (pk != null) return new Dictionary<string, object> { { "packed", pk.Kind } };
            throw new InvalidOperationException("unknown codec type " + t.GetType().Name);
        }

        // ---- decoding

        sealed class Reader
        {
            public readonly byte[] B; public int P; public readonly int End; public readonly bool Raw;
            public Reader(byte[] b, int off, int len, bool raw) { B = b; P = off; End = off + len; Raw = raw; }
            public void Need(int n, string what) { if (n > End - P) throw ProtoException.End(what + " runs past the end of the frame"); }
            public byte U8() { Need(1, "u8"); return B[P++]; }
            public ulong Varint(int maxBytes, string what)
            {
                byte first = U8();
                if (first < 251) return first;
                if (first == 251) { Need(2, what); ulong v = (ulong)(B[P] | B[P + 1] << 8); P += 2; return v; }
                if (first == 252)
                {
                    if (maxBytes < 4) throw ProtoException.Malformed(what + ": u32 marker for a u16");
                    Need(4, what); ulong v = BitConverterLE.U32(B, P); P += 4; return v;
                }
                if (first == 253)
                {
                    if (maxBytes < 8) throw ProtoException.Malformed(what + ": u64 marker for a " + (maxBytes * 8) + "-bit integer");
                    Need(8, what); ulong v = BitConverterLE.U32(B, P) | ((ulong)BitConverterLE.U32(B, P + 4) << 32); P += 8; return v;
                }
                throw ProtoException.Malformed(what + ": invalid varint marker " + first);
            }
            public long Len(string what)
            {
                ulong n = Varint(8, what);
                if (n > (ulong)(End - P)) throw ProtoException.End(what + " of " + n + " bytes runs past the end of the frame");
                return (long)n;
            }
        }

        /// <summary>`ctx`: the struct being read (a cells message's entries need its tick and span).</summary>
        static object Read(Reader r, T t, Dictionary<string, object> ctx = null)
        {
            var p = t as Prim;
            if (p != null)
            {
                switch (p.Name)
                {
                    case "u8": return (long)r.U8();
                    case "u16": return (long)r.Varint(2, "u16");
                    case "u32": return (long)r.Varint(4, "u32");
                    case "u64":
                        {
                            ulong v = r.Varint(8, "u64");
                            if (v > long.MaxValue) throw ProtoException.Malformed("u64 " + v + " beyond 2^63");
                            return (long)v;
                        }
                    case "i32": { ulong n = r.Varint(4, "i32"); return (long)(int)((uint)(n >> 1) ^ (uint)-(int)(n & 1)); }
                    case "f32": { r.Need(4, "f32"); float f = BitConverterLE.F32(r.B, r.P); r.P += 4; return f; }
                    case "string":
                        {
                            int n = (int)r.Len("string length");
                            string s;
                            try { s = StrictUtf8.GetString(r.B, r.P, n); }
                            catch (ArgumentException) { throw ProtoException.Malformed("invalid UTF-8 in a string"); }
                            r.P += n;
                            return s;
                        }
                    case "checksum":
                        {
                            if (!ReadBool(r)) return null;
                            r.Need(8, "checksum");
                            var sb = new StringBuilder(16);
                            for (int i = 7; i >= 0; i--) sb.Append(r.B[r.P + i].ToString("x2", CultureInfo.InvariantCulture));
                            r.P += 8;
                            return sb.ToString();
                        }
                }
                throw new InvalidOperationException("schema: " + p.Name);
            }
            var st = t as StructT;
            if (st != null) return ReadFields(r, st.Fields, new Dictionary<string, object>());
            var o = t as OptT;
            if (o != null) return ReadBool(r) ? Read(r, o.Inner) : null;
            var vt = t as VecT;
            if (vt != null)
            {
                ulong n = r.Varint(8, "vec length");
                if (n > (ulong)(r.End - r.P)) throw ProtoException.End("vec of " + n + " elements runs past the end of the frame");
                var list = new List<object>((int)n);
                for (ulong i = 0; i < n; i++) list.Add(Read(r, vt.Inner));
                return list;
            }
            var tg = t as TaggedT;
            if (tg != null)
            {
                ulong idx = r.Varint(4, "variant index");
                if (idx >= (ulong)tg.Variants.Length) throw ProtoException.Malformed("unknown variant index " + idx);
                var v = tg.Variants[idx];
                return ReadFields(r, v.Fields, new Dictionary<string, object> { { "type", v.Name } });
            }
            var nm = t as NamesT;
            if (nm != null)
            {
                ulong idx = r.Varint(4, "variant index");
                if (idx >= (ulong)nm.Names.Length) throw ProtoException.Malformed("unknown variant index " + idx);
                return nm.Names[idx];
            }
            var pk = (PackedT)t;
            int len = (int)r.Len("packed section");
            int at = r.P;
            r.P += len;
            if (pk.Kind == "records") return Packed.DecodeRecords(r.B, at, len);
            if (pk.Kind == "ids") return Packed.DecodeIds(r.B, at, len);
            if (pk.Kind == "runs") return Packed.DecodeRuns(r.B, at, len);
            if (pk.Kind == "entries") return Packed.DecodeEntries(r.B, at, len, (long)ctx["tick"], (long)ctx["span"], r.Raw);
            if (r.Raw) return new ArraySegment<byte>(r.B, at, len);
            return Packed.DecodeChanges(r.B, at, len);
        }

        static bool ReadBool(Reader r)
        {
            byte b = r.U8();
            if (b > 1) throw ProtoException.Malformed("bool byte " + b);
            return b == 1;
        }

        static Dictionary<string, object> ReadFields(Reader r, Field[] fields, Dictionary<string, object> d)
        {
            foreach (var f in fields) d[f.Name] = Read(r, f.Type, d);
            return d;
        }

        static readonly UTF8Encoding StrictUtf8 = new UTF8Encoding(false, true);

        static Dictionary<string, object> DecodeWith(TaggedT schema, byte[] data, int offset, int count, int limit, bool raw)
        {
            if (count > limit) throw new ProtoException(ProtoErrorKind.TooLarge, "frame of " + count + " bytes exceeds the limit " + limit);
            var r = new Reader(data, offset, count, raw);
            var msg = (Dictionary<string, object>)Read(r, schema);
            if (r.P != r.End) throw new ProtoException(ProtoErrorKind.TrailingBytes, (r.End - r.P) + " bytes after the message");
            return msg;
        }

        /// <summary>Decodes a binary server frame (ServerMsg).</summary>
        public static Dictionary<string, object> DecodeServer(byte[] data, int limit = DefaultServerLimit, bool rawChanges = false)
        {
            return DecodeWith(Server, data, 0, data.Length, limit, rawChanges);
        }

        public static Dictionary<string, object> DecodeServer(byte[] data, int offset, int count, int limit, bool rawChanges)
        {
            return DecodeWith(Server, data, offset, count, limit, rawChanges);
        }

        /// <summary>Decodes a batched server frame (/ws?batch=1): one or more messages back to back.</summary>
        public static List<Dictionary<string, object>> DecodeServerBatch(byte[] data, int offset, int count, int limit, bool rawChanges)
        {
            if (count > limit) throw new ProtoException(ProtoErrorKind.TooLarge, "frame of " + count + " bytes exceeds the limit " + limit);
            var r = new Reader(data, offset, count, rawChanges);
            var list = new List<Dictionary<string, object>>();
            do list.Add((Dictionary<string, object>)Read(r, Server)); while (r.P < r.End);
            return list;
        }

        /// <summary>Decodes a binary client frame (ClientMsg).</summary>
        public static Dictionary<string, object> DecodeClient(byte[] data, int limit = DefaultClientLimit)
        {
            return DecodeWith(Client, data, 0, data.Length, limit, false);
        }

        // ---- encoding

        sealed class Writer
        {
            public byte[] Buf = new byte[64]; public int N;
            public void Grow(int k)
            {
                if (N + k <= Buf.Length) return;
                int size = Buf.Length * 2;
                while (size < N + k) size *= 2;
                Array.Resize(ref Buf, size);
            }
            public void U8(byte v) { Grow(1); Buf[N++] = v; }
            public void Raw(byte[] b, int off, int len) { Grow(len); Buffer.BlockCopy(b, off, Buf, N, len); N += len; }
            public void Varint(ulong v)
            {
                if (v < 251) { U8((byte)v); return; }
                if (v <= 0xffff) { U8(251); Grow(2); Buf[N++] = (byte)v; Buf[N++] = (byte)(v >> 8); return; }
                if (v <= 0xffffffff) { U8(252); Grow(4); for (int i = 0; i < 4; i++) Buf[N++] = (byte)(v >> (8 * i)); return; }
                U8(253); Grow(8); for (int i = 0; i < 8; i++) Buf[N++] = (byte)(v >> (8 * i));
            }
        }

        static long Int(object v, string name)
        {
            if (v is long) return (long)v;
            if (v is int) return (int)v;
            if (v is uint) return (uint)v;
            if (v is ushort) return (ushort)v;
            if (v is byte) return (byte)v;
            if (v is ulong && (ulong)v <= long.MaxValue) return (long)(ulong)v;
            if (v is double && Math.Floor((double)v) == (double)v && Math.Abs((double)v) < 9.2e18) return (long)(double)v;
            if (v is float && Math.Floor((float)v) == (float)v) return (long)(float)v;
            throw ProtoException.Malformed(name + ": integer expected, got " + (v == null ? "null" : v.ToString()));
        }

        /// <summary>`ctx`: the struct being written (a cells message's entries need its tick and span).</summary>
        static void Write(Writer w, T t, object v, string name, Dictionary<string, object> ctx = null)
        {
            var p = t as Prim;
            if (p != null)
            {
                switch (p.Name)
                {
                    case "u8": { long x = Int(v, name); if (x < 0 || x > 255) throw ProtoException.Malformed(name + ": u8 " + x); w.U8((byte)x); return; }
                    case "u16": { long x = Int(v, name); if (x < 0 || x > 0xffff) throw ProtoException.Malformed(name + ": u16 " + x); w.Varint((ulong)x); return; }
                    case "u32": { long x = Int(v, name); if (x < 0 || x > 0xffffffffL) throw ProtoException.Malformed(name + ": u32 " + x); w.Varint((ulong)x); return; }
                    case "u64": { long x = Int(v, name); if (x < 0) throw ProtoException.Malformed(name + ": u64 " + x); w.Varint((ulong)x); return; }
                    case "i32": { long x = Int(v, name); if (x < int.MinValue || x > int.MaxValue) throw ProtoException.Malformed(name + ": i32 " + x); int i = (int)x; w.Varint((uint)((i << 1) ^ (i >> 31))); return; }
                    case "f32":
                        {
                            float f;
                            if (v is float) f = (float)v;
                            else if (v is double) f = (float)(double)v;
                            else f = Int(v, name);
                            w.Grow(4); BitConverterLE.PutF32(w.Buf, w.N, f); w.N += 4; return;
                        }
                    case "string":
                        {
                            var s = v as string;
                            if (s == null) throw ProtoException.Malformed(name + ": string expected");
                            var b = System.Text.Encoding.UTF8.GetBytes(s);
                            w.Varint((ulong)b.Length); w.Raw(b, 0, b.Length); return;
                        }
                    case "checksum":
                        {
                            if (v == null) { w.U8(0); return; }
                            var s = v as string;
                            if (s == null || s.Length != 16) throw ProtoException.Malformed(name + ": 16 hex digits expected");
                            w.U8(1);
                            ulong h = ulong.Parse(s, NumberStyles.HexNumber, CultureInfo.InvariantCulture);
                            for (int i = 0; i < 8; i++) w.U8((byte)(h >> (8 * i)));
                            return;
                        }
                }
            }
            var st = t as StructT;
            if (st != null) { WriteFields(w, st.Fields, (v as Dictionary<string, object>) ?? new Dictionary<string, object>()); return; }
            var o = t as OptT;
            if (o != null) { if (v == null) w.U8(0); else { w.U8(1); Write(w, o.Inner, v, name); } return; }
            var vt = t as VecT;
            if (vt != null)
            {
                var list = v as System.Collections.IList;
                if (list == null) throw ProtoException.Malformed(name + ": list expected");
                w.Varint((ulong)list.Count);
                foreach (var e in list) Write(w, vt.Inner, e, name);
                return;
            }
            var tg = t as TaggedT;
            if (tg != null)
            {
                var d = v as Dictionary<string, object>;
                object ty = null;
                if (d == null || !d.TryGetValue("type", out ty)) throw ProtoException.Malformed(name + ": `type` expected");
                for (int i = 0; i < tg.Variants.Length; i++)
                {
                    if (tg.Variants[i].Name != (string)ty) continue;
                    w.Varint((ulong)i);
                    WriteFields(w, tg.Variants[i].Fields, d);
                    return;
                }
                throw ProtoException.Malformed(name + ": unknown type `" + ty + "`");
            }
            var nm = t as NamesT;
            if (nm != null)
            {
                int idx = Array.IndexOf(nm.Names, v as string);
                if (idx < 0) throw ProtoException.Malformed(name + ": unknown variant `" + v + "`");
                w.Varint((ulong)idx);
                return;
            }
            var pk = (PackedT)t;
            byte[] bytes;
            if (pk.Kind == "records") bytes = Packed.EncodeRecords((IList<QAgent>)v);
            else if (pk.Kind == "ids") bytes = Packed.EncodeIds((System.Collections.IList)v);
            else if (pk.Kind == "runs") bytes = Packed.EncodeRuns((System.Collections.IList)v);
            else if (pk.Kind == "entries")
                bytes = Packed.EncodeEntries((System.Collections.IList)v, Convert.ToInt64(ctx["tick"], CultureInfo.InvariantCulture), Convert.ToInt64(ctx["span"], CultureInfo.InvariantCulture));
            else bytes = Packed.EncodeChanges((System.Collections.IList)v);
            w.Varint((ulong)bytes.Length);
            w.Raw(bytes, 0, bytes.Length);
        }

        static void WriteFields(Writer w, Field[] fields, Dictionary<string, object> d)
        {
            foreach (var f in fields)
            {
                object v;
                if (!d.TryGetValue(f.Name, out v))
                {
                    if (!f.HasDefault) throw ProtoException.Malformed("missing field `" + f.Name + "`");
                    v = f.Default();
                }
                Write(w, f.Type, v, f.Name, d);
            }
        }

        static byte[] EncodeWith(TaggedT schema, Dictionary<string, object> msg)
        {
            var w = new Writer();
            Write(w, schema, msg, "message");
            var o = new byte[w.N];
            Buffer.BlockCopy(w.Buf, 0, o, 0, w.N);
            return o;
        }

        /// <summary>Encodes a client message tree (fields with defaults may be omitted).</summary>
        public static byte[] EncodeClient(Dictionary<string, object> msg) { return EncodeWith(Client, msg); }

        /// <summary>Encodes a server message tree (a binary delta's changed entries need "index").</summary>
        public static byte[] EncodeServer(Dictionary<string, object> msg) { return EncodeWith(Server, msg); }

        // ---- checksum, prediction, heading, cells

        /// <summary>FNV-1a 64 of a sorted agent list (§6.5).</summary>
        public static ulong Checksum64(IList<QAgent> list)
        {
            ulong h = 0xcbf29ce484222325UL;
            const ulong prime = 0x100000001b3UL;
            for (int i = 0; i < list.Count; i++)
            {
                var a = list[i];
                uint id = a.Id;
                h = (h ^ (id & 0xff)) * prime; h = (h ^ ((id >> 8) & 0xff)) * prime; h = (h ^ ((id >> 16) & 0xff)) * prime; h = (h ^ (id >> 24)) * prime;
                h = (h ^ (uint)(a.Group & 0xff)) * prime; h = (h ^ (uint)(a.Group >> 8)) * prime;
                h = Mix32(h, (uint)a.PosX); h = Mix32(h, (uint)a.PosY); h = Mix32(h, (uint)a.VelX); h = Mix32(h, (uint)a.VelY);
                h = (h ^ (uint)(a.Orient & 0xff)) * prime; h = (h ^ (uint)(a.Orient >> 8)) * prime;
            }
            return h;
        }

        static ulong Mix32(ulong h, uint v)
        {
            const ulong prime = 0x100000001b3UL;
            h = (h ^ (v & 0xff)) * prime; h = (h ^ ((v >> 8) & 0xff)) * prime; h = (h ^ ((v >> 16) & 0xff)) * prime; return (h ^ (v >> 24)) * prime;
        }

        /// <summary>
        /// The checksum of a cells message (§6.8): FNV-1a 64 over, for each entry in order, the 8-byte
        /// little-endian checksum (§6.5) of that cell's state after the entry.
        /// </summary>
        public static ulong CellsChecksum(IList<List<QAgent>> states)
        {
            ulong h = 0xcbf29ce484222325UL;
            const ulong prime = 0x100000001b3UL;
            for (int i = 0; i < states.Count; i++)
            {
                ulong c = Checksum64(states[i]);
                for (int b = 0; b < 8; b++) h = (h ^ ((c >> (8 * b)) & 0xff)) * prime;
            }
            return h;
        }

        /// <summary>The checksum as the JSON form writes it: 16 lowercase hex digits.</summary>
        public static string ChecksumHex(IList<QAgent> list) { return Checksum64(list).ToString("x16", CultureInfo.InvariantCulture); }

        /// <summary>predict(v) of §6.4: floor((v·predict_num + 32768) / 65536), truncated to 32 bits.</summary>
        public static int Predict(int v, int predictNum) { return (int)(((long)v * predictNum + 32768) >> 16); }

        /// <summary>heading(vel) of §6.4: orientation units of the velocity's direction.</summary>
        public static ushort Heading(int vx, int vy)
        {
            if (vx == 0 && vy == 0) throw ProtoException.Malformed("heading of a zero velocity");
            double h = Math.Floor(Math.Atan2(vy, vx) * 32768.0 / Math.PI + 0.5);
            return (ushort)(((long)h % 65536 + 65536) % 65536);
        }

        /// <summary>Cell index of a point (§6.2).</summary>
        public static int CellOf(WorldInfo w, double x, double y)
        {
            int col = (int)Math.Min(Math.Max(Math.Floor((x - w.MinX) / w.AoiCellSize), 0), w.Cols - 1);
            int row = (int)Math.Min(Math.Max(Math.Floor((y - w.MinY) / w.AoiCellSize), 0), w.Rows - 1);
            return row * w.Cols + col;
        }
    }

    internal static class BitConverterLE
    {
        public static uint U32(byte[] b, int p) { return (uint)(b[p] | b[p + 1] << 8 | b[p + 2] << 16 | b[p + 3] << 24); }
        public static float F32(byte[] b, int p)
        {
            if (BitConverter.IsLittleEndian) return BitConverter.ToSingle(b, p);
            var t = new[] { b[p + 3], b[p + 2], b[p + 1], b[p] };
            return BitConverter.ToSingle(t, 0);
        }
        public static void PutF32(byte[] b, int p, float f)
        {
            var t = BitConverter.GetBytes(f);
            if (!BitConverter.IsLittleEndian) Array.Reverse(t);
            Buffer.BlockCopy(t, 0, b, p, 4);
        }
    }

    /// <summary>Packed sections (§6.7): LEB128 varints, zig-zag, absolute / change records, id lists, cell runs (§5.2).</summary>
    public static class Packed
    {
        /// <summary>Minimal LEB128 (at most 10 bytes) at b[p], bounded by end; advances p.</summary>
        public static ulong Leb(byte[] b, ref int p, int end)
        {
            if (p >= end) throw ProtoException.Malformed("packed record cut short");
            byte x = b[p++];
            if (x < 0x80) return x;
            ulong v = (ulong)(x & 0x7f);
            int shift = 7;
            for (int i = 1; i < 10; i++)
            {
                if (p >= end) throw ProtoException.Malformed("packed record cut short");
                x = b[p++];
                if (i == 9 && x > 1) throw ProtoException.Malformed("LEB128 varint beyond 64 bits");
                v |= (ulong)(x & 0x7f) << shift;
                if ((x & 0x80) == 0)
                {
                    if (x == 0) throw ProtoException.Malformed("non-minimal LEB128 varint");
                    return v;
                }
                shift += 7;
            }
            throw ProtoException.Malformed("LEB128 varint longer than 10 bytes");
        }

        public static int Zz32(byte[] b, ref int p, int end, string what)
        {
            ulong n = Leb(b, ref p, end);
            if (n > 0xffffffffUL) throw ProtoException.Malformed(what + " out of i32 range");
            uint u = (uint)n;
            return (int)(u >> 1) ^ -(int)(u & 1);
        }

        static int Unzz4(int n) { return (n >> 1) ^ -(n & 1); }

        /// <summary>
        /// Reads absolute records at b[p]: `count` of them, or (count &lt; 0) until `end`. With
        /// `chain` (the entries of a cells message, §6.8: {x, y}, one for the whole message, initially
        /// (0, 0)), each position is the difference (32-bit wrapping) from the position in `chain`,
        /// which then becomes the record's own: positions chain from record to record through the
        /// whole message, across entries. Id gaps and the S flag's group restart with each list.
        /// Null: positions as they are (§6.7).
        /// </summary>
        public static List<QAgent> ReadRecords(byte[] b, ref int p, int end, long count, int[] chain)
        {
            var list = new List<QAgent>(count >= 0 ? (int)Math.Min(count, (end - p) / 5 + 1) : 16);
            long prev = -1;
            ushort group = 0;
            bool chained = chain != null;
            int lx = chained ? chain[0] : 0, ly = chained ? chain[1] : 0;
            for (long k = 0; count < 0 ? p < end : k < count; k++)
            {
                ulong head = Leb(b, ref p, end);
                ulong gap = head >> 2;
                if (gap > 0xffffffffUL) throw ProtoException.Malformed("agent id beyond u32");
                long id = prev + (long)gap + 1;
                if (id > 0xffffffffL) throw ProtoException.Malformed("agent id " + id + " beyond u32");
                prev = id;
                if ((head & 2) == 0)
                {
                    ulong g = Leb(b, ref p, end);
                    if (g > 0xffff) throw ProtoException.Malformed("group " + g + " out of range");
                    group = (ushort)g;
                }
                int px = Zz32(b, ref p, end, "pos.x"), py = Zz32(b, ref p, end, "pos.y");
                if (chained) { px = unchecked(lx + px); py = unchecked(ly + py); lx = px; ly = py; }
                int vx = Zz32(b, ref p, end, "vel.x"), vy = Zz32(b, ref p, end, "vel.y");
                ushort orient;
                if ((head & 1) == 1) orient = Codec.Heading(vx, vy);
                else
                {
                    ulong o = Leb(b, ref p, end);
                    if (o > 0xffff) throw ProtoException.Malformed("orient " + o + " out of range");
                    orient = (ushort)o;
                }
                list.Add(new QAgent((uint)id, group, px, py, vx, vy, orient));
            }
            if (chained) { chain[0] = lx; chain[1] = ly; }
            return list;
        }

        public static List<QAgent> DecodeRecords(byte[] b, int off, int len)
        {
            int p = off;
            return ReadRecords(b, ref p, off + len, -1, null);
        }

        /// <summary>Reads gap-coded ids at b[p]: `count` of them, or (count &lt; 0) until `end`.</summary>
        public static List<object> ReadIds(byte[] b, ref int p, int end, long count)
        {
            var list = new List<object>();
            long prev = -1;
            for (long k = 0; count < 0 ? p < end : k < count; k++)
            {
                ulong gap = Leb(b, ref p, end);
                if (gap > 0xffffffffUL) throw ProtoException.Malformed("agent id beyond u32");
                long id = prev + (long)gap + 1;
                if (id > 0xffffffffL) throw ProtoException.Malformed("agent id " + id + " beyond u32");
                list.Add(id);
                prev = id;
            }
            return list;
        }

        public static List<object> DecodeIds(byte[] b, int off, int len)
        {
            int p = off;
            return ReadIds(b, ref p, off + len, -1);
        }

        /// <summary>Most cells a run list may expand to (§5.2 `subscribed`): a decoder refuses more instead of allocating them.</summary>
        public const long MaxRunCells = 1 << 20;

        /// <summary>
        /// Decodes the cells of a binary `subscribed` (§5.2): runs of consecutive cells, each a LEB128
        /// `start - next` then `length - 1`, where `next` is the cell after the previous run (initially
        /// 0). Returns the cells in ascending order as longs. Malformed: a run going past cell
        /// 2^32 - 1, or more than MaxRunCells cells in all (refused before they are allocated).
        /// </summary>
        public static List<object> DecodeRuns(byte[] b, int off, int len)
        {
            const ulong cells = 1UL << 32;
            var list = new List<object>();
            int p = off, end = off + len;
            ulong next = 0;
            while (p < end)
            {
                ulong gap = Leb(b, ref p, end);
                ulong more = Leb(b, ref p, end);
                if (next >= cells || gap > cells - 1 - next) throw ProtoException.Malformed("subscribed run starts past cell 2^32 - 1");
                ulong start = next + gap;
                if (more > cells - 1 - start) throw ProtoException.Malformed("subscribed run of cell " + start + " goes past cell 2^32 - 1");
                if ((ulong)list.Count + more + 1 > (ulong)MaxRunCells) throw ProtoException.Malformed("subscribed runs of more than " + MaxRunCells + " cells");
                next = start + more + 1;
                for (ulong c = start; c < next; c++) list.Add((long)c);
            }
            return list;
        }

        /// <summary>One change record (§6.7). M: 0 none, else dpos/dvel; O: 0 keep, 1 face, 2 turn by D.</summary>
        public struct Change
        {
            public long Index;
            public int M, Dpx, Dpy, Dvx, Dvy, O, D;
        }

        /// <summary>Reads the next change record at b[p]; `prev` is the previous base index (-1 first).</summary>
        public static void ReadChange(byte[] b, ref int p, int end, long prev, ref Change c)
        {
            ulong head = Leb(b, ref p, end);
            int m = (int)(head & 3);
            int o = (int)((head >> 2) & 3);
            ulong gap = head >> 4;
            if (gap > 0xffffffffUL) throw ProtoException.Malformed("base index beyond u32");
            long index = prev + (long)gap + 1;
            if (index > 0xffffffffL) throw ProtoException.Malformed("base index " + index + " beyond u32");
            c.Index = index;
            if (m == 1)
            {
                if (end - p < 2) throw ProtoException.Malformed("packed record cut short");
                int b0 = b[p++], b1 = b[p++];
                c.M = 1; c.Dpx = Unzz4(b0 & 15); c.Dpy = Unzz4(b0 >> 4); c.Dvx = Unzz4(b1 & 15); c.Dvy = Unzz4(b1 >> 4);
            }
            else if (m == 2)
            {
                c.M = 2;
                c.Dpx = Zz32(b, ref p, end, "dpos.x"); c.Dpy = Zz32(b, ref p, end, "dpos.y");
                c.Dvx = Zz32(b, ref p, end, "dvel.x"); c.Dvy = Zz32(b, ref p, end, "dvel.y");
            }
            else if (m == 3) throw ProtoException.Malformed("reserved motion mode 3");
            else c.M = 0;
            c.O = o;
            if (o == 2)
            {
                int d = Zz32(b, ref p, end, "dorient");
                if (d < -32768 || d > 32767) throw ProtoException.Malformed("dorient " + d + " does not fit i16");
                c.D = d;
            }
            else if (o == 3) throw ProtoException.Malformed("reserved orientation mode 3");
        }

        /// <summary>Reads change records at b[p] as entries {index, dpos?, dvel?, face? | dorient?}: `count`, or (count &lt; 0) until `end`.</summary>
        public static List<object> ReadChanges(byte[] b, ref int p, int end, long count)
        {
            var list = new List<object>();
            var c = new Change { Index = -1 };
            for (long k = 0; count < 0 ? p < end : k < count; k++)
            {
                ReadChange(b, ref p, end, c.Index, ref c);
                var e = new Dictionary<string, object> { { "index", c.Index } };
                if (c.M != 0)
                {
                    e["dpos"] = new List<object> { (long)c.Dpx, (long)c.Dpy };
                    e["dvel"] = new List<object> { (long)c.Dvx, (long)c.Dvy };
                }
                if (c.O == 1) e["face"] = true;
                else if (c.O == 2) e["dorient"] = (long)c.D;
                list.Add(e);
            }
            return list;
        }

        /// <summary>Change records as entries {index, dpos?, dvel?, face? | dorient?} (the JSON form with base indices).</summary>
        public static List<object> DecodeChanges(byte[] b, int off, int len)
        {
            int p = off;
            return ReadChanges(b, ref p, off + len, -1);
        }

        static void Fits(int p, int end, ulong count, int minBytes, string what)
        {
            if (count > (ulong)(end - p) / (ulong)minBytes) throw ProtoException.Malformed(what + " count " + count + " runs past the end of the entries");
        }

        /// <summary>
        /// Decodes the entries of a cells message (§6.8) of message tick `tick` and `span`: a list of
        /// {"keyframe": {cell, tick, agents}} and {"delta": {cell, base_tick, left, changed, entered}}
        /// (the JSON form; changed by base index, or with `raw` the validated packed change records as
        /// an ArraySegment&lt;byte&gt;). Positions of absolute records (keyframe agents, entered) chain
        /// through the whole message, from (0, 0). Malformed: a span of 0, an age of 0, a base or state
        /// tick below 0, a count past the end, any §6.7 rule. A cell outside the world is checked by
        /// the view.
        /// </summary>
        public static List<object> DecodeEntries(byte[] b, int off, int len, long tick, long span, bool raw)
        {
            if (span < 1) throw ProtoException.Malformed("cells span " + span + " (must be at least 1)");
            var list = new List<object>();
            int p = off, end = off + len;
            long prev = -1;
            // The position chain of §6.8, through every absolute record of the message.
            var chain = new int[2];
            var scratch = new Change();
            while (p < end)
            {
                ulong head = Leb(b, ref p, end);
                ulong gap = head >> 2;
                if (gap > 0xffffffffUL) throw ProtoException.Malformed("cell beyond u32");
                long cell = prev + (long)gap + 1;
                if (cell > 0xffffffffL) throw ProtoException.Malformed("cell " + cell + " beyond u32");
                prev = cell;
                ulong age = 0;
                if ((head & 1) == 1)
                {
                    age = Leb(b, ref p, end);
                    if (age == 0) throw ProtoException.Malformed("entry of cell " + cell + ": age 0");
                    if (age > (ulong)tick) throw ProtoException.Malformed("entry of cell " + cell + ": tick below 0");
                }
                if ((head & 2) != 0)
                {
                    ulong n = Leb(b, ref p, end);
                    Fits(p, end, n, 5, "record");
                    var agents = ReadRecords(b, ref p, end, (long)n, chain);
                    list.Add(new Dictionary<string, object> { { "keyframe", new Dictionary<string, object> { { "cell", cell }, { "tick", tick - (long)age }, { "agents", agents } } } });
                }
                else
                {
                    long baseTick = (head & 1) == 1 ? tick - (long)age : tick - span;
                    if (baseTick < 0) throw ProtoException.Malformed("delta entry of cell " + cell + ": base tick below 0");
                    ulong c = Leb(b, ref p, end);
                    ulong nc = c >> 2;
                    Fits(p, end, nc, 1, "change");
                    object changed;
                    if (raw)
                    {
                        int start = p;
                        scratch.Index = -1;
                        for (ulong k = 0; k < nc; k++) ReadChange(b, ref p, end, scratch.Index, ref scratch);
                        changed = new ArraySegment<byte>(b, start, p - start);
                    }
                    else changed = ReadChanges(b, ref p, end, (long)nc);
                    List<object> left;
                    if ((c & 2) != 0)
                    {
                        ulong nl = Leb(b, ref p, end);
                        Fits(p, end, nl, 1, "left");
                        left = ReadIds(b, ref p, end, (long)nl);
                    }
                    else left = new List<object>();
                    List<QAgent> entered;
                    if ((c & 1) != 0)
                    {
                        ulong ne = Leb(b, ref p, end);
                        Fits(p, end, ne, 5, "entered");
                        entered = ReadRecords(b, ref p, end, (long)ne, chain);
                    }
                    else entered = new List<QAgent>();
                    list.Add(new Dictionary<string, object> { { "delta", new Dictionary<string, object> {
                        { "cell", cell }, { "base_tick", baseTick }, { "left", left }, { "changed", changed }, { "entered", entered } } } });
                }
            }
            return list;
        }

        sealed class PW
        {
            public readonly List<byte> A = new List<byte>();
            public void Leb(ulong v) { do { byte x = (byte)(v & 0x7f); v >>= 7; if (v > 0) x |= 0x80; A.Add(x); } while (v > 0); }
            public void Zz(long v) { Leb((ulong)((v << 1) ^ (v >> 63))); }
        }

        /// <summary>
        /// heading(vel) when every correct atan2 agrees on it (at least 1e-4 units from a rounding
        /// tie), else -1: an encoder sets the face flag only then (as steer-proto does).
        /// </summary>
        public static int RobustHeading(int vx, int vy)
        {
            if (vx == 0 && vy == 0) return -1;
            double u = Math.Atan2(vy, vx) * 32768.0 / Math.PI + 65536;
            double frac = u - Math.Floor(u);
            if (Math.Abs(frac - 0.5) < 1e-4) return -1;
            return (int)((long)Math.Floor(u + 0.5) % 65536);
        }

        /// <summary>Writes absolute records; `chain` as in ReadRecords (null: positions as they are).</summary>
        static void WriteRecords(PW w, IList<QAgent> list, int[] chain)
        {
            long prev = -1;
            int group = 0;
            for (int k = 0; k < list.Count; k++)
            {
                var r = list[k];
                long gap = r.Id - prev - 1;
                if (gap < 0) throw ProtoException.Malformed("records must be sorted by id");
                int s = r.Group == group ? 1 : 0;
                int f = RobustHeading(r.VelX, r.VelY) == r.Orient ? 1 : 0;
                w.Leb((ulong)(gap * 4 + s * 2 + f));
                if (s == 0) w.Leb(r.Group);
                int px = r.PosX, py = r.PosY;
                if (chain != null)
                {
                    px = unchecked(px - chain[0]); py = unchecked(py - chain[1]);
                    chain[0] = r.PosX; chain[1] = r.PosY;
                }
                w.Zz(px); w.Zz(py); w.Zz(r.VelX); w.Zz(r.VelY);
                if (f == 0) w.Leb(r.Orient);
                prev = r.Id;
                group = r.Group;
            }
        }

        public static byte[] EncodeRecords(IList<QAgent> list)
        {
            var w = new PW();
            WriteRecords(w, list, null);
            return w.A.ToArray();
        }

        static void WriteIds(PW w, System.Collections.IList ids)
        {
            long prev = -1;
            foreach (var o in ids) { long id = Convert.ToInt64(o, CultureInfo.InvariantCulture); w.Leb((ulong)(id - prev - 1)); prev = id; }
        }

        public static byte[] EncodeIds(System.Collections.IList ids)
        {
            var w = new PW();
            WriteIds(w, ids);
            return w.A.ToArray();
        }

        /// <summary>Encodes strictly increasing cell numbers (u32) as runs of consecutive cells (see DecodeRuns).</summary>
        public static byte[] EncodeRuns(System.Collections.IList cells)
        {
            var w = new PW();
            long next = 0;
            for (int k = 0; k < cells.Count;)
            {
                long start = RunCell(cells[k]);
                if (start < next) throw ProtoException.Malformed("subscribed cells must be in increasing order (" + start + " after " + (next - 1) + ")");
                int n = 1;
                while (k + n < cells.Count && RunCell(cells[k + n]) == start + n) n++;
                w.Leb((ulong)(start - next));
                w.Leb((ulong)(n - 1));
                next = start + n;
                k += n;
            }
            return w.A.ToArray();
        }

        static long RunCell(object o)
        {
            long c = Convert.ToInt64(o, CultureInfo.InvariantCulture);
            if (c < 0 || c > 0xffffffffL) throw ProtoException.Malformed("cell " + c + " out of u32 range");
            return c;
        }

        static void WriteChanges(PW w, System.Collections.IList entries)
        {
            long prev = -1;
            foreach (Dictionary<string, object> c in entries)
            {
                object io;
                if (!c.TryGetValue("index", out io)) throw ProtoException.Malformed("binary change entries need `index`");
                long index = Convert.ToInt64(io, CultureInfo.InvariantCulture);
                long gap = index - prev - 1;
                if (gap < 0) throw ProtoException.Malformed("changes must be in increasing index order");
                prev = index;
                int o = c.ContainsKey("face") && (bool)c["face"] ? 1 : c.ContainsKey("dorient") ? 2 : 0;
                if (c.ContainsKey("dpos"))
                {
                    var dp = (System.Collections.IList)c["dpos"];
                    var dv = (System.Collections.IList)c["dvel"];
                    var vals = new long[] { Convert.ToInt64(dp[0]), Convert.ToInt64(dp[1]), Convert.ToInt64(dv[0]), Convert.ToInt64(dv[1]) };
                    bool nib = true;
                    foreach (var v in vals) if (v < -8 || v > 7) nib = false;
                    w.Leb((ulong)(gap * 16 + o * 4 + (nib ? 1 : 2)));
                    if (nib)
                    {
                        Func<long, int> z = v => (int)((v << 1) ^ (v >> 63));
                        w.A.Add((byte)(z(vals[0]) | z(vals[1]) << 4));
                        w.A.Add((byte)(z(vals[2]) | z(vals[3]) << 4));
                    }
                    else foreach (var v in vals) w.Zz(v);
                }
                else w.Leb((ulong)(gap * 16 + o * 4));
                if (o == 2) w.Zz(Convert.ToInt64(c["dorient"], CultureInfo.InvariantCulture));
            }
        }

        public static byte[] EncodeChanges(System.Collections.IList entries)
        {
            var w = new PW();
            WriteChanges(w, entries);
            return w.A.ToArray();
        }

        static long Long(Dictionary<string, object> d, string k) { return Convert.ToInt64(d[k], CultureInfo.InvariantCulture); }

        /// <summary>
        /// Encodes the entries of a cells message of `tick` and `span` (§6.8): {"keyframe": {cell,
        /// tick, agents}} with their state tick, {"delta": {cell, base_tick, left, changed, entered}}
        /// with changed entries by base "index". Entries in increasing cell order. Positions of absolute
        /// records chain through the whole message (from (0, 0), across entries).
        /// </summary>
        public static byte[] EncodeEntries(System.Collections.IList entries, long tick, long span)
        {
            if (span < 1) throw ProtoException.Malformed("cells span " + span + " (must be at least 1)");
            var w = new PW();
            long prev = -1;
            var chain = new int[2];
            foreach (Dictionary<string, object> e in entries)
            {
                object v;
                if (e.TryGetValue("keyframe", out v))
                {
                    var k = (Dictionary<string, object>)v;
                    long cell = Long(k, "cell");
                    long gap = cell - prev - 1;
                    if (gap < 0) throw ProtoException.Malformed("cells entries must be in increasing cell order");
                    prev = cell;
                    long age = tick - Long(k, "tick");
                    if (age < 0) throw ProtoException.Malformed("keyframe entry of cell " + cell + ": state tick after the message tick");
                    w.Leb((ulong)(gap * 4 + 2 + (age > 0 ? 1 : 0)));
                    if (age > 0) w.Leb((ulong)age);
                    var agents = (IList<QAgent>)k["agents"];
                    w.Leb((ulong)agents.Count);
                    WriteRecords(w, agents, chain);
                }
                else
                {
                    var d = (Dictionary<string, object>)e["delta"];
                    long cell = Long(d, "cell");
                    long gap = cell - prev - 1;
                    if (gap < 0) throw ProtoException.Malformed("cells entries must be in increasing cell order");
                    prev = cell;
                    long age = tick - Long(d, "base_tick");
                    if (age < 1) throw ProtoException.Malformed("delta entry of cell " + cell + ": base tick not before the message tick");
                    int bflag = age == span ? 0 : 1;
                    w.Leb((ulong)(gap * 4 + bflag));
                    if (bflag == 1) w.Leb((ulong)age);
                    var changed = d["changed"] as System.Collections.IList;
                    if (changed == null) throw ProtoException.Malformed("EncodeEntries needs decoded change entries, not packed bytes");
                    var left = (System.Collections.IList)d["left"];
                    var entered = (IList<QAgent>)d["entered"];
                    int hl = left.Count > 0 ? 1 : 0, he = entered.Count > 0 ? 1 : 0;
                    w.Leb((ulong)changed.Count * 4 + (ulong)(hl * 2 + he));
                    WriteChanges(w, changed);
                    if (hl == 1) { w.Leb((ulong)left.Count); WriteIds(w, left); }
                    if (he == 1) { w.Leb((ulong)entered.Count); WriteRecords(w, entered, chain); }
                }
            }
            return w.A.ToArray();
        }
    }
}
