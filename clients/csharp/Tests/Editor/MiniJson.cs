// A small strict JSON reader for the tests (vectors, REST answers): objects become
// Dictionary<string, object>, arrays List<object>, numbers double, plus string, bool, null.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Steerd.Client.Tests
{
    public static class MiniJson
    {
        public static object Parse(string s)
        {
            int p = 0;
            var v = Value(s, ref p);
            Ws(s, ref p);
            if (p != s.Length) throw new FormatException("trailing characters at " + p);
            return v;
        }

        static void Ws(string s, ref int p) { while (p < s.Length && char.IsWhiteSpace(s[p])) p++; }

        static object Value(string s, ref int p)
        {
            Ws(s, ref p);
            if (p >= s.Length) throw new FormatException("unexpected end");
            char c = s[p];
            if (c == '{')
            {
                p++;
                var d = new Dictionary<string, object>();
                Ws(s, ref p);
                if (s[p] == '}') { p++; return d; }
                for (;;)
                {
                    Ws(s, ref p);
                    var k = Str(s, ref p);
                    Ws(s, ref p);
                    if (s[p++] != ':') throw new FormatException("':' expected at " + p);
                    d[k] = Value(s, ref p);
                    Ws(s, ref p);
                    if (s[p] == ',') { p++; continue; }
                    if (s[p] == '}') { p++; return d; }
                    throw new FormatException("',' or '}' expected at " + p);
                }
            }
            if (c == '[')
            {
                p++;
                var l = new List<object>();
                Ws(s, ref p);
                if (s[p] == ']') { p++; return l; }
                for (;;)
                {
                    l.Add(Value(s, ref p));
                    Ws(s, ref p);
                    if (s[p] == ',') { p++; continue; }
                    if (s[p] == ']') { p++; return l; }
                    throw new FormatException("',' or ']' expected at " + p);
                }
            }
            if (c == '"') return Str(s, ref p);
            if (s.Substring(p).StartsWith("true")) { p += 4; return true; }
            if (s.Substring(p).StartsWith("false")) { p += 5; return false; }
            if (s.Substring(p).StartsWith("null")) { p += 4; return null; }
            int start = p;
            while (p < s.Length && "+-0123456789.eE".IndexOf(s[p]) >= 0) p++;
            if (start == p) throw new FormatException("value expected at " + p);
            return double.Parse(s.Substring(start, p - start), NumberStyles.Float, CultureInfo.InvariantCulture);
        }

        static string Str(string s, ref int p)
        {
            if (s[p] != '"') throw new FormatException("string expected at " + p);
            p++;
            var sb = new StringBuilder();
            while (s[p] != '"')
            {
                char c = s[p++];
                if (c != '\\') { sb.Append(c); continue; }
                char e = s[p++];
                switch (e)
                {
                    case 'n': sb.Append('\n'); break;
                    case 't': sb.Append('\t'); break;
                    case 'r': sb.Append('\r'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'u': sb.Append((char)int.Parse(s.Substring(p, 4), NumberStyles.HexNumber)); p += 4; break;
                    default: sb.Append(e); break;
                }
            }
            p++;
            return sb.ToString();
        }
    }
}
