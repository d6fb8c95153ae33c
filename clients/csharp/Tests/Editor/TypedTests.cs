// The typed payloads (Runtime/Typed.cs: areas, limits, behaviours) against steer-proto's
// client-proto/schema.json: described by reflection over their [Wire] attributes into the
// schema's grammar, they must equal the schema's spawn area, subscription area, limits, behaviour
// entry (every behaviour variant, field, type and order) and behaviour kinds — a field added in
// Rust fails here until the class has it. And every typed value encodes (binary) and decodes back
// to the same tree.
using System;
using System.Collections;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using NUnit.Framework;
using Steerd.Client.Behaviors;

namespace Steerd.Client.Tests
{
    [TestFixture]
    public class TypedTests
    {
        static Dictionary<string, object> Variant(string side, string name)
        {
            var schema = (Dictionary<string, object>)MiniJson.Parse(System.IO.File.ReadAllText(System.IO.Path.Combine(Repo.Root, "client-proto/schema.json")));
            var tagged = (List<object>)((Dictionary<string, object>)schema[side])["tagged"];
            var v = tagged.Cast<List<object>>().First(x => (string)x[0] == name);
            return ((List<object>)v[1]).Cast<List<object>>().ToDictionary(f => (string)f[0], f => f[1]);
        }

        /// <summary>The schema grammar of a C# type, from its [Wire] attributes (as steer-proto writes it).</summary>
        static object Describe(Type t, bool optional)
        {
            object d = DescribeInner(t);
            return optional ? new Dictionary<string, object> { { "opt", d } } : d;
        }

        static object DescribeInner(Type t)
        {
            var u = Nullable.GetUnderlyingType(t);
            if (u != null) t = u;
            if (t == typeof(float)) return "f32";
            if (t == typeof(uint)) return "u32";
            if (t == typeof(byte)) return "u8";
            if (t == typeof(string)) return "string";
            if (t.IsEnum)
            {
                var names = t.GetFields(BindingFlags.Public | BindingFlags.Static).OrderBy(f => (int)f.GetValue(null))
                    .Select(f => (object)f.GetCustomAttribute<WireAttribute>().Name).ToList();
                return new Dictionary<string, object> { { "names", names } };
            }
            if (t.IsGenericType && t.GetGenericTypeDefinition() == typeof(List<>))
                return new Dictionary<string, object> { { "vec", DescribeInner(t.GetGenericArguments()[0]) } };
            if (t.IsAbstract)
            {
                // A tagged union: its [Wire] subclasses in wire order.
                var variants = t.Assembly.GetTypes().Where(x => x.IsSubclassOf(t) && x.GetCustomAttribute<WireAttribute>() != null)
                    .OrderBy(x => x.GetCustomAttribute<WireAttribute>().Order)
                    .Select(x => (object)new List<object> { x.GetCustomAttribute<WireAttribute>().Name, Fields(x) }).ToList();
                return new Dictionary<string, object> { { "tagged", variants } };
            }
            return new Dictionary<string, object> { { "struct", Fields(t) } };
        }

        static List<object> Fields(Type t)
        {
            return Wire.Fields(t).Select(kv => (object)new List<object> { kv.Value.Name, Describe(kv.Key.FieldType, kv.Value.Optional) }).ToList();
        }

        static string Canon(object o)
        {
            var l = o as List<object>;
            if (l != null) return "[" + string.Join(",", l.Select(Canon)) + "]";
            var d = o as Dictionary<string, object>;
            if (d != null) return "{" + string.Join(",", d.OrderBy(kv => kv.Key, StringComparer.Ordinal).Select(kv => kv.Key + ":" + Canon(kv.Value))) + "}";
            return Convert.ToString(o, System.Globalization.CultureInfo.InvariantCulture);
        }

        /// <summary>Per variant, where the typed description differs (readable failures).</summary>
        static List<string> VariantDiff(object mine, object theirs)
        {
            var o = new List<string>();
            var a = ((List<object>)((Dictionary<string, object>)mine)["tagged"]).Cast<List<object>>().ToList();
            var b = ((List<object>)((Dictionary<string, object>)theirs)["tagged"]).Cast<List<object>>().ToList();
            var an = string.Join(", ", a.Select(x => x[0]));
            var bn = string.Join(", ", b.Select(x => x[0]));
            if (an != bn) o.Add("variants: " + an + " vs the schema's " + bn);
            for (int i = 0; i < Math.Min(a.Count, b.Count); i++)
                if (Canon(a[i]) != Canon(b[i])) o.Add(a[i][0] + ": " + Canon(a[i][1]) + " vs the schema's " + Canon(b[i][1]));
            return o;
        }

        [Test]
        public void AreasAndLimitsEqualTheSchema()
        {
            var spawn = Variant("client", "spawn");
            Assert.AreEqual(Canon(spawn["area"]), Canon(DescribeInner(typeof(SpawnArea))));
            Assert.AreEqual(Canon(spawn["limits"]), Canon(DescribeInner(typeof(Limits))));
            Assert.AreEqual(Canon(Variant("client", "subscribe")["area"]), Canon(DescribeInner(typeof(ViewArea))));
            Assert.AreEqual(Canon(Variant("client", "move_to")["target"]), Canon(DescribeInner(typeof(Vec2))));
        }

        [Test]
        public void BehavioursEqualTheSchema()
        {
            var entry = (Dictionary<string, object>)((Dictionary<string, object>)Variant("client", "add_behavior")["entry"]);
            var fields = ((List<object>)entry["struct"]).Cast<List<object>>().ToDictionary(f => (string)f[0], f => f[1]);
            CollectionAssert.IsEmpty(VariantDiff(DescribeInner(typeof(Behavior)), fields["behavior"]));
            Assert.AreEqual(Canon(entry), Canon(DescribeInner(typeof(BehaviorEntry))));
            Assert.AreEqual(Canon(Variant("client", "remove_behavior")["kind"]), Canon(DescribeInner(typeof(BehaviorKind))));
            Assert.AreEqual(Canon(Variant("client", "spawn")["behaviors"]), Canon(new Dictionary<string, object> { { "vec", DescribeInner(typeof(BehaviorEntry)) } }));
        }

        [Test]
        public void TheCheckFailsOnAFieldAddedInRust()
        {
            var entry = (Dictionary<string, object>)Variant("client", "add_behavior")["entry"];
            var behavior = ((List<object>)entry["struct"]).Cast<List<object>>().First(f => (string)f[0] == "behavior")[1];
            var seek = ((List<object>)((Dictionary<string, object>)behavior)["tagged"]).Cast<List<object>>().First(v => (string)v[0] == "seek");
            ((List<object>)seek[1]).Add(new List<object> { "added_in_rust", "f32" });
            var d = VariantDiff(DescribeInner(typeof(Behavior)), behavior);
            Assert.AreEqual(1, d.Count, string.Join("; ", d));
            StringAssert.StartsWith("seek:", d[0]);
        }

        /// <summary>One value of every behaviour kind, each field set (so the encoder sees all of them).</summary>
        static IEnumerable<Behavior> EveryBehaviour()
        {
            var align = new AlignParams { TargetRadius = 0.2f, SlowRadius = 1, TimeToTarget = 0.3f };
            yield return new Seek { Target = Target.ToPoint(1, 2) };
            yield return new Flee { Target = Target.ToAgent(7), PanicDistance = 4 };
            yield return new Arrive { Target = Target.ToPoint(3, 4), TargetRadius = 1, SlowRadius = 6, TimeToTarget = 0.5f };
            yield return new Pursue { TargetAgent = 9, MaxPrediction = 2 };
            yield return new Evade { TargetAgent = 9, PanicDistance = 5, MaxPrediction = 1 };
            yield return new Align { Target = AlignTarget.ToOrientation(1.5f), Params = align };
            yield return new Face { Target = Target.ToAgent(3), Params = align };
            yield return new LookWhereYouAreGoing { Params = align };
            yield return new VelocityMatch { TargetAgent = 2, TimeToTarget = 0.2f };
            yield return new Wander { Variant = WanderVariant.Circle, WanderOffset = 2, WanderRadius = 1, WanderRate = 0.25f };
            yield return new RandomTarget { Radius = 5, IntervalMin = 1, IntervalMax = 3, Center = new Vec2(10, 10) };
            yield return new ObstacleAvoidance { MinBoxLength = 2, BrakingWeight = 0.5f, LateralBase = 1 };
            yield return new AheadAvoidance { AheadLen = 3, MaxAvoidForce = 0.5f, Margin = 0.1f };
            yield return new WallAvoidance { LookAhead = 4, AvoidDistance = 2 };
            yield return new AgentAvoidance { LookAhead = 4, AvoidRadius = 2 };
            yield return new Separation { NeighborRadius = 3 };
            yield return new Cohesion { NeighborRadius = 3 };
            yield return new Alignment { NeighborRadius = 3, TimeToTarget = 0.2f };
            yield return new PathFollowing { Waypoints = { new Vec2(0, 0), new Vec2(5, 5) }, PathRadius = 1, Mode = PathMode.PingPong };
            yield return new LeaderFollowing { Leader = 1, BehindDistance = 2, LeaderSightRadius = 3, SeparationRadius = 1, SeparationWeight = 2 };
            yield return new ReciprocalAvoidance { TimeHorizon = 1, ObstacleTimeHorizon = 1, NeighborDist = 8, MaxNeighbors = 6 };
        }

        [Test]
        public void EveryBehaviourEncodesAndDecodesToItsTree()
        {
            var all = EveryBehaviour().ToList();
            CollectionAssert.AreEquivalent(Enum.GetValues(typeof(BehaviorKind)).Cast<BehaviorKind>().Select(k => Wire.Name(k)).ToList(),
                all.Select(b => b.GetType().GetCustomAttribute<WireAttribute>().Name).ToList(), "one of every kind");
            var entries = all.Select((b, i) => b.Entry(1 + i, (byte)i)).ToList();
            var msg = new Dictionary<string, object>
            {
                { "type", "spawn" }, { "request_id", 5L }, { "world", "w" }, { "group", "g" }, { "count", 2L },
                { "area", Wire.Tree(Shapes.Points((1f, 2f), (3f, 4f))) },
                { "limits", Wire.Tree(new Limits { MaxSpeed = 3, Mass = 2 }) },
                { "behaviors", entries.Select(e => Wire.Tree(e)).ToList() },
            };
            var back = Codec.DecodeClient(Codec.EncodeClient(msg));
            var bs = (List<object>)back["behaviors"];
            Assert.AreEqual(all.Count, bs.Count);
            for (int i = 0; i < all.Count; i++)
            {
                // Every field was set: the decoded tree (defaults filled in) equals the typed one.
                Assert.AreEqual(Canon(Wire.Tree(entries[i])), Canon(bs[i]), all[i].GetType().Name);
            }
            var limits = (Dictionary<string, object>)back["limits"];
            Assert.AreEqual(3.0, Convert.ToDouble(limits["max_speed"]));
            Assert.IsNull(limits["max_accel"], "an unset Option is none");
            Assert.AreEqual(Canon(Wire.Tree(Shapes.Points((1f, 2f), (3f, 4f)))), Canon(back["area"]));
        }

        [Test]
        public void UnsetFieldsTakeTheDefaults()
        {
            var msg = new Dictionary<string, object>
            {
                { "type", "add_behavior" }, { "request_id", 1L }, { "world", "w" }, { "agents", new List<object> { 1L } },
                { "entry", Wire.Tree(new Wander().Entry()) },
            };
            var back = (Dictionary<string, object>)((Dictionary<string, object>)Codec.DecodeClient(Codec.EncodeClient(msg))["entry"])["behavior"];
            Assert.AreEqual("wander", back["type"]);
            Assert.AreEqual("millington", back["variant"]);
            Assert.AreEqual(1.5, Convert.ToDouble(back["wander_offset"]), 1e-6);
        }
    }
}
