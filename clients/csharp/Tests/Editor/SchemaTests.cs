// One schema, three codecs: this SDK's codec tables (Codec.DescribeTables) equal steer-proto's
// machine-readable description of every message and field (client-proto/schema.json, generated
// from the Rust wire types). A field added in Rust changes that file and fails this test until
// the codec follows.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    [TestFixture]
    public class SchemaTests
    {
        static Dictionary<string, object> Schema()
        {
            return (Dictionary<string, object>)MiniJson.Parse(File.ReadAllText(Path.Combine(ConformanceTests.Root, "client-proto/schema.json")));
        }

        /// <summary>A canonical text of a tree (lists, dictionaries, strings, numbers).</summary>
        static string Canon(object o)
        {
            var l = o as List<object>;
            if (l != null) return "[" + string.Join(",", l.Select(Canon)) + "]";
            var d = o as Dictionary<string, object>;
            if (d != null) return "{" + string.Join(",", d.OrderBy(kv => kv.Key, StringComparer.Ordinal).Select(kv => kv.Key + ":" + Canon(kv.Value))) + "}";
            return Convert.ToString(o, System.Globalization.CultureInfo.InvariantCulture);
        }

        /// <summary>Every variant whose fields differ (for a readable failure).</summary>
        static List<string> Diff(object mine, object theirs, string side)
        {
            var out_ = new List<string>();
            var a = (List<object>)((Dictionary<string, object>)mine)["tagged"];
            var b = (List<object>)((Dictionary<string, object>)theirs)["tagged"];
            var names = new Func<List<object>, string>(l => string.Join(", ", l.Select(v => (string)((List<object>)v)[0])));
            if (names(a) != names(b)) out_.Add(side + ": variants " + names(a) + " vs " + names(b));
            for (int i = 0; i < Math.Min(a.Count, b.Count); i++)
                if (Canon(a[i]) != Canon(b[i])) out_.Add(side + "." + ((List<object>)a[i])[0] + ": " + Canon(((List<object>)a[i])[1]) + " vs " + Canon(((List<object>)b[i])[1]));
            return out_;
        }

        [Test]
        public void TheSchemaIsOfThisProtocolVersion()
        {
            Assert.AreEqual(Codec.ProtocolVersion, (int)(double)Schema()["protocol_version"]);
        }

        [TestCase("client")]
        [TestCase("server")]
        public void TheCodecTablesEqualTheSchema(string side)
        {
            var mine = Codec.DescribeTables(side);
            var theirs = Schema()[side];
            CollectionAssert.IsEmpty(Diff(mine, theirs, side));
            Assert.AreEqual(Canon(theirs), Canon(mine));
        }

        [Test]
        public void TheCheckFailsOnADriftedTable()
        {
            var theirs = (Dictionary<string, object>)Schema()["server"];
            var pong = ((List<object>)theirs["tagged"]).Cast<List<object>>().First(v => (string)v[0] == "pong");
            ((List<object>)pong[1]).Add(new List<object> { "added_in_rust", "u32" });
            var d = Diff(Codec.DescribeTables("server"), theirs, "server");
            Assert.AreEqual(1, d.Count);
            StringAssert.StartsWith("server.pong:", d[0]);
            Assert.AreNotEqual(Canon(theirs), Canon(Codec.DescribeTables("server")));
        }
    }
}
