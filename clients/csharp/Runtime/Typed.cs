// Typed commands' payloads: spawn and subscription areas, agent limits, steering behaviours
// (PROTOCOL.md §5.1) as classes and enums. Each wire name is on a [Wire] attribute; Wire.Tree
// turns an object into the codec's message tree, and SchemaTests checks these classes against
// steer-proto's client-proto/schema.json (every variant, field, type and order), so a field added
// in Rust fails the C# suite until it is added here. A null field is left out: the server (and the
// binary codec) take its default.

using System;
using System.Collections;
using System.Collections.Generic;
using System.Reflection;

namespace Steerd.Client
{
    /// <summary>
    /// The wire name of a class (a variant of a tagged union, in `Order`), of a field (in `Order`;
    /// `Optional`: an Option on the wire, null = none), or of an enum member.
    /// </summary>
    [AttributeUsage(AttributeTargets.Class | AttributeTargets.Field, AllowMultiple = false)]
    public sealed class WireAttribute : Attribute
    {
        public readonly string Name;
        public readonly int Order;
        public bool Optional;
        public WireAttribute(string name, int order = 0) { Name = name; Order = order; }
    }

    /// <summary>A point (world units).</summary>
    public sealed class Vec2
    {
        [Wire("x", 0)] public float X;
        [Wire("y", 1)] public float Y;
        public Vec2() { }
        public Vec2(float x, float y) { X = x; Y = y; }
    }

    // ---- areas

    /// <summary>Where Spawn places agents (Shapes makes them).</summary>
    public abstract class SpawnArea { }

    [Wire("rect", 0)]
    public sealed class RectArea : SpawnArea
    {
        [Wire("min_x", 0)] public float MinX;
        [Wire("min_y", 1)] public float MinY;
        [Wire("max_x", 2)] public float MaxX;
        [Wire("max_y", 3)] public float MaxY;
    }

    /// <summary>Uniformly inside a circle.</summary>
    [Wire("circle", 1)]
    public sealed class CircleArea : SpawnArea
    {
        [Wire("x", 0)] public float X;
        [Wire("y", 1)] public float Y;
        [Wire("radius", 2)] public float Radius;
    }

    /// <summary>Evenly spaced on a circle, facing its centre.</summary>
    [Wire("ring", 2)]
    public sealed class RingArea : SpawnArea
    {
        [Wire("x", 0)] public float X;
        [Wire("y", 1)] public float Y;
        [Wire("radius", 2)] public float Radius;
    }

    /// <summary>One agent at each point, in order (the count must equal their number).</summary>
    [Wire("points", 3)]
    public sealed class PointsArea : SpawnArea
    {
        [Wire("points", 0)] public List<Vec2> Points = new List<Vec2>();
    }

    /// <summary>What a subscription covers: a rectangle (RectView) or the whole world.</summary>
    public abstract class ViewArea { }

    [Wire("rect", 0)]
    public sealed class RectView : ViewArea
    {
        [Wire("min_x", 0)] public float MinX;
        [Wire("min_y", 1)] public float MinY;
        [Wire("max_x", 2)] public float MaxX;
        [Wire("max_y", 3)] public float MaxY;
    }

    [Wire("whole_world", 1)]
    public sealed class WholeWorld : ViewArea { }

    /// <summary>Spawn and subscription areas.</summary>
    public static class Shapes
    {
        public static CircleArea Circle(float x, float y, float radius) { return new CircleArea { X = x, Y = y, Radius = radius }; }
        /// <summary>Evenly spaced on a circle, facing its centre (spawn only).</summary>
        public static RingArea Ring(float x, float y, float radius) { return new RingArea { X = x, Y = y, Radius = radius }; }
        /// <summary>One agent at each of the given (x, y) points, in order (spawn only; count must equal their number).</summary>
        public static PointsArea Points(params (float x, float y)[] points)
        {
            var a = new PointsArea();
            foreach (var p in points) a.Points.Add(new Vec2(p.Item1, p.Item2));
            return a;
        }
        public static RectArea Rect(float minX, float minY, float maxX, float maxY) { return new RectArea { MinX = minX, MinY = minY, MaxX = maxX, MaxY = maxY }; }
        /// <summary>A subscription's rectangle.</summary>
        public static RectView View(float minX, float minY, float maxX, float maxY) { return new RectView { MinX = minX, MinY = minY, MaxX = maxX, MaxY = maxY }; }
        public static WholeWorld Whole() { return new WholeWorld(); }
    }

    /// <summary>An agent's limits at spawn; a null field takes the world's default.</summary>
    public sealed class Limits
    {
        [Wire("max_speed", 0, Optional = true)] public float? MaxSpeed;
        [Wire("max_accel", 1, Optional = true)] public float? MaxAccel;
        [Wire("max_rotation", 2, Optional = true)] public float? MaxRotation;
        [Wire("max_angular_accel", 3, Optional = true)] public float? MaxAngularAccel;
        [Wire("radius", 4, Optional = true)] public float? Radius;
        [Wire("mass", 5, Optional = true)] public float? Mass;
    }

    // ---- behaviours

    /// <summary>What seek, flee, arrive and face aim at: a point or an agent.</summary>
    public abstract class Target
    {
        public static PointTarget ToPoint(float x, float y) { return new PointTarget { X = x, Y = y }; }
        public static AgentTarget ToAgent(uint agent) { return new AgentTarget { Agent = agent }; }
    }

    [Wire("point", 0)]
    public sealed class PointTarget : Target
    {
        [Wire("x", 0)] public float X;
        [Wire("y", 1)] public float Y;
    }

    [Wire("agent", 1)]
    public sealed class AgentTarget : Target
    {
        [Wire("agent", 0)] public uint Agent;
    }

    /// <summary>What align matches: an orientation or an agent's.</summary>
    public abstract class AlignTarget
    {
        public static OrientationTarget ToOrientation(float radians) { return new OrientationTarget { Radians = radians }; }
        public static AgentOrientation ToAgent(uint agent) { return new AgentOrientation { Agent = agent }; }
    }

    [Wire("orientation", 0)]
    public sealed class OrientationTarget : AlignTarget
    {
        [Wire("radians", 0)] public float Radians;
    }

    [Wire("agent", 1)]
    public sealed class AgentOrientation : AlignTarget
    {
        [Wire("agent", 0)] public uint Agent;
    }

    /// <summary>How align, face and look_where_you_are_going turn.</summary>
    public sealed class AlignParams
    {
        [Wire("target_radius", 0)] public float? TargetRadius;
        [Wire("slow_radius", 1)] public float? SlowRadius;
        [Wire("time_to_target", 2)] public float? TimeToTarget;
    }

    public enum WanderVariant
    {
        [Wire("millington")] Millington,
        [Wire("circle")] Circle,
    }

    public enum PathMode
    {
        [Wire("once")] Once,
        [Wire("loop")] Loop,
        [Wire("ping_pong")] PingPong,
    }

    /// <summary>A behaviour's kind (RemoveBehavior), in the wire's order.</summary>
    public enum BehaviorKind
    {
        [Wire("seek")] Seek,
        [Wire("flee")] Flee,
        [Wire("arrive")] Arrive,
        [Wire("pursue")] Pursue,
        [Wire("evade")] Evade,
        [Wire("align")] Align,
        [Wire("face")] Face,
        [Wire("look_where_you_are_going")] LookWhereYouAreGoing,
        [Wire("velocity_match")] VelocityMatch,
        [Wire("wander")] Wander,
        [Wire("random_target")] RandomTarget,
        [Wire("obstacle_avoidance")] ObstacleAvoidance,
        [Wire("ahead_avoidance")] AheadAvoidance,
        [Wire("wall_avoidance")] WallAvoidance,
        [Wire("agent_avoidance")] AgentAvoidance,
        [Wire("separation")] Separation,
        [Wire("cohesion")] Cohesion,
        [Wire("alignment")] Alignment,
        [Wire("path_following")] PathFollowing,
        [Wire("leader_following")] LeaderFollowing,
        [Wire("reciprocal_avoidance")] ReciprocalAvoidance,
    }

    /// <summary>
    /// A steering behaviour (PROTOCOL.md §5.1): one class per kind in Steerd.Client.Behaviors, a null
    /// field taking its default; the static methods here make the common ones.
    /// </summary>
    public abstract class Behavior
    {
        /// <summary>This behaviour with a weight and a priority (0–255), for Spawn, SetBehaviors, AddBehavior.</summary>
        public BehaviorEntry Entry(float weight = 1, byte priority = 0) { return new BehaviorEntry { Behavior = this, Weight = weight, Priority = priority }; }

        public static Behaviors.Seek Seek(float x, float y) { return new Behaviors.Seek { Target = Target.ToPoint(x, y) }; }
        public static Behaviors.Arrive Arrive(float x, float y) { return new Behaviors.Arrive { Target = Target.ToPoint(x, y) }; }
        public static Behaviors.Flee Flee(float x, float y) { return new Behaviors.Flee { Target = Target.ToPoint(x, y) }; }
        public static Behaviors.Pursue Pursue(uint agent) { return new Behaviors.Pursue { TargetAgent = agent }; }
        public static Behaviors.Wander Wander() { return new Behaviors.Wander(); }
        public static Behaviors.Separation Separation(float neighborRadius = 3) { return new Behaviors.Separation { NeighborRadius = neighborRadius }; }
        public static Behaviors.LookWhereYouAreGoing LookWhereYouAreGoing() { return new Behaviors.LookWhereYouAreGoing(); }
    }

    /// <summary>A behaviour with its weight and priority.</summary>
    public sealed class BehaviorEntry
    {
        [Wire("behavior", 0)] public Behavior Behavior;
        [Wire("weight", 1)] public float? Weight;
        [Wire("priority", 2)] public byte? Priority;
    }

    /// <summary>Object → the codec's message tree, by the [Wire] attributes.</summary>
    public static class Wire
    {
        /// <summary>The wire name of a [Wire] enum member.</summary>
        public static string Name(Enum value)
        {
            var f = value.GetType().GetField(value.ToString());
            var a = f != null ? f.GetCustomAttribute<WireAttribute>() : null;
            if (a == null) throw new ArgumentException("no wire name for " + value.GetType().Name + "." + value);
            return a.Name;
        }

        /// <summary>The [Wire] fields of a type, in wire order.</summary>
        public static List<KeyValuePair<FieldInfo, WireAttribute>> Fields(Type t)
        {
            var l = new List<KeyValuePair<FieldInfo, WireAttribute>>();
            foreach (var f in t.GetFields(BindingFlags.Public | BindingFlags.Instance))
            {
                var a = f.GetCustomAttribute<WireAttribute>();
                if (a != null) l.Add(new KeyValuePair<FieldInfo, WireAttribute>(f, a));
            }
            l.Sort((x, y) => x.Value.Order.CompareTo(y.Value.Order));
            return l;
        }

        /// <summary>The tree of a value: objects as dictionaries (a variant with its `type`), lists, enums as names.</summary>
        public static object Tree(object v)
        {
            if (v == null) return null;
            if (v is float) return (float)v;
            if (v is uint) return (long)(uint)v;
            if (v is byte) return (long)(byte)v;
            if (v is int) return (long)(int)v;
            if (v is string) return v;
            if (v is bool) return v;
            var e = v as Enum;
            if (e != null) return Name(e);
            var list = v as IList;
            if (list != null)
            {
                var o = new List<object>();
                foreach (var x in list) o.Add(Tree(x));
                return o;
            }
            var d = new Dictionary<string, object>();
            var tag = v.GetType().GetCustomAttribute<WireAttribute>();
            if (tag != null) d["type"] = tag.Name;
            foreach (var kv in Fields(v.GetType()))
            {
                var x = kv.Key.GetValue(v);
                if (x == null)
                {
                    // A wire Option: explicit none in the JSON form; a defaulted field: left out.
                    continue;
                }
                d[kv.Value.Name] = Tree(x);
            }
            return d;
        }

        internal static Dictionary<string, object> Dict(object v) { return (Dictionary<string, object>)Tree(v); }

        internal static List<object> List<T>(IEnumerable<T> items)
        {
            var o = new List<object>();
            if (items != null) foreach (var x in items) o.Add(Tree(x));
            return o;
        }
    }
}

namespace Steerd.Client.Behaviors
{
    // One class per behaviour kind, in the wire's order. Required fields are plain (a target, an
    // agent id, waypoints); a null field takes the server's default (PROTOCOL.md §5.1); an
    // [Wire(Optional = true)] field is an Option on the wire (null = none).
    [Wire("seek", 0)]
    public sealed class Seek : Behavior
    {
        [Wire("target", 0)] public Target Target;
    }

    [Wire("flee", 1)]
    public sealed class Flee : Behavior
    {
        [Wire("target", 0)] public Target Target;
        [Wire("panic_distance", 1)] public float? PanicDistance;
    }

    [Wire("arrive", 2)]
    public sealed class Arrive : Behavior
    {
        [Wire("target", 0)] public Target Target;
        [Wire("target_radius", 1)] public float? TargetRadius;
        [Wire("slow_radius", 2)] public float? SlowRadius;
        [Wire("time_to_target", 3)] public float? TimeToTarget;
    }

    [Wire("pursue", 3)]
    public sealed class Pursue : Behavior
    {
        [Wire("target_agent", 0)] public uint TargetAgent;
        [Wire("max_prediction", 1)] public float? MaxPrediction;
    }

    [Wire("evade", 4)]
    public sealed class Evade : Behavior
    {
        [Wire("target_agent", 0)] public uint TargetAgent;
        [Wire("panic_distance", 1)] public float? PanicDistance;
        [Wire("max_prediction", 2)] public float? MaxPrediction;
    }

    [Wire("align", 5)]
    public sealed class Align : Behavior
    {
        [Wire("target", 0)] public AlignTarget Target;
        [Wire("align", 1)] public AlignParams Params;
    }

    [Wire("face", 6)]
    public sealed class Face : Behavior
    {
        [Wire("target", 0)] public Target Target;
        [Wire("align", 1)] public AlignParams Params;
    }

    [Wire("look_where_you_are_going", 7)]
    public sealed class LookWhereYouAreGoing : Behavior
    {
        [Wire("align", 0)] public AlignParams Params;
    }

    [Wire("velocity_match", 8)]
    public sealed class VelocityMatch : Behavior
    {
        [Wire("target_agent", 0)] public uint TargetAgent;
        [Wire("time_to_target", 1)] public float? TimeToTarget;
    }

    [Wire("wander", 9)]
    public sealed class Wander : Behavior
    {
        [Wire("variant", 0)] public WanderVariant? Variant;
        [Wire("wander_offset", 1)] public float? WanderOffset;
        [Wire("wander_radius", 2)] public float? WanderRadius;
        [Wire("wander_rate", 3)] public float? WanderRate;
    }

    [Wire("random_target", 10)]
    public sealed class RandomTarget : Behavior
    {
        [Wire("radius", 0)] public float? Radius;
        [Wire("interval_min", 1)] public float? IntervalMin;
        [Wire("interval_max", 2)] public float? IntervalMax;
        [Wire("center", 3, Optional = true)] public Vec2 Center;
    }

    [Wire("obstacle_avoidance", 11)]
    public sealed class ObstacleAvoidance : Behavior
    {
        [Wire("min_box_length", 0, Optional = true)] public float? MinBoxLength;
        [Wire("braking_weight", 1)] public float? BrakingWeight;
        [Wire("lateral_base", 2)] public float? LateralBase;
    }

    [Wire("ahead_avoidance", 12)]
    public sealed class AheadAvoidance : Behavior
    {
        [Wire("ahead_len", 0)] public float? AheadLen;
        [Wire("max_avoid_force", 1)] public float? MaxAvoidForce;
        [Wire("margin", 2)] public float? Margin;
    }

    [Wire("wall_avoidance", 13)]
    public sealed class WallAvoidance : Behavior
    {
        [Wire("look_ahead", 0)] public float? LookAhead;
        [Wire("avoid_distance", 1)] public float? AvoidDistance;
    }

    [Wire("agent_avoidance", 14)]
    public sealed class AgentAvoidance : Behavior
    {
        [Wire("look_ahead", 0)] public float? LookAhead;
        [Wire("avoid_radius", 1)] public float? AvoidRadius;
    }

    [Wire("separation", 15)]
    public sealed class Separation : Behavior
    {
        [Wire("neighbor_radius", 0)] public float? NeighborRadius;
    }

    [Wire("cohesion", 16)]
    public sealed class Cohesion : Behavior
    {
        [Wire("neighbor_radius", 0)] public float? NeighborRadius;
    }

    [Wire("alignment", 17)]
    public sealed class Alignment : Behavior
    {
        [Wire("neighbor_radius", 0)] public float? NeighborRadius;
        [Wire("time_to_target", 1)] public float? TimeToTarget;
    }

    [Wire("path_following", 18)]
    public sealed class PathFollowing : Behavior
    {
        [Wire("waypoints", 0)] public List<Vec2> Waypoints = new List<Vec2>();
        [Wire("path_radius", 1)] public float? PathRadius;
        [Wire("mode", 2)] public PathMode? Mode;
    }

    [Wire("leader_following", 19)]
    public sealed class LeaderFollowing : Behavior
    {
        [Wire("leader", 0)] public uint Leader;
        [Wire("behind_distance", 1)] public float? BehindDistance;
        [Wire("leader_sight_radius", 2)] public float? LeaderSightRadius;
        [Wire("separation_radius", 3)] public float? SeparationRadius;
        [Wire("separation_weight", 4)] public float? SeparationWeight;
    }

    [Wire("reciprocal_avoidance", 20)]
    public sealed class ReciprocalAvoidance : Behavior
    {
        [Wire("time_horizon", 0)] public float? TimeHorizon;
        [Wire("obstacle_time_horizon", 1)] public float? ObstacleTimeHorizon;
        [Wire("neighbor_dist", 2)] public float? NeighborDist;
        [Wire("max_neighbors", 3)] public uint? MaxNeighbors;
    }
}
