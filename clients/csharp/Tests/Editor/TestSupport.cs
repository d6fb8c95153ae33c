// What the test fixtures share: where the repository is (golden vectors, schema.json, scenarios,
// the steerd binary), and a test thread without a SynchronizationContext.
using System;
using System.IO;
using System.Runtime.CompilerServices;
using System.Threading;
using NUnit.Framework;

namespace Steerd.Client.Tests
{
    public static class Repo
    {
        /// <summary>
        /// The steerd repository: STEERD_ROOT, else the first directory holding client-proto/ up from
        /// this source file (the package inside the repository: this project's mono run, or a Unity
        /// project that references the package by path), else up from the test assembly. Without it
        /// the test is ignored (a package installed by git URL carries no vectors, schema or server),
        /// unless STEERD_TESTS_REQUIRE_ALL is set (the mono run sets it): then it fails.
        /// </summary>
        public static string Root
        {
            get
            {
                var env = Environment.GetEnvironmentVariable("STEERD_ROOT");
                if (!string.IsNullOrEmpty(env)) return env;
                var found = Up(Path.GetDirectoryName(SourcePath())) ?? Up(AppDomain.CurrentDomain.BaseDirectory);
                if (found != null) return found;
                var why = "the steerd repository (client-proto/) was not found above " + SourcePath() + " or " + AppDomain.CurrentDomain.BaseDirectory + " (set STEERD_ROOT)";
                if (!string.IsNullOrEmpty(Environment.GetEnvironmentVariable("STEERD_TESTS_REQUIRE_ALL"))) throw new DirectoryNotFoundException(why);
                Assert.Ignore(why);
                return null;
            }
        }

        static string SourcePath([CallerFilePath] string path = "") { return path; }

        static string Up(string dir)
        {
            if (string.IsNullOrEmpty(dir)) return null;
            try
            {
                for (var d = new DirectoryInfo(dir); d != null; d = d.Parent)
                    if (Directory.Exists(Path.Combine(d.FullName, "client-proto"))) return d.FullName;
            }
            catch (Exception) { }
            return null;
        }
    }

    /// <summary>
    /// Tests that block on the client's Tasks run without a SynchronizationContext: the client then
    /// handles messages on its receive thread. (Unity's Test Runner runs Edit Mode tests on the main
    /// thread, whose context the client would post to while the test blocks it.)
    /// </summary>
    public abstract class NoContextFixture
    {
        SynchronizationContext saved;

        [SetUp]
        public void ClearSynchronizationContext()
        {
            saved = SynchronizationContext.Current;
            SynchronizationContext.SetSynchronizationContext(null);
        }

        [TearDown]
        public void RestoreSynchronizationContext()
        {
            SynchronizationContext.SetSynchronizationContext(saved);
        }
    }
}
