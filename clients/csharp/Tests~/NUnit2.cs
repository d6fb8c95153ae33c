// Compiled only by Tests~/run.sh: Debian's mono ships NUnit 2.6, the tests (Tests/Editor) are
// written for NUnit 3 as Unity's Test Runner runs them. NUnit 2.6 finds a fixture's one-time
// set-up and tear-down by attribute type, base types included, so NUnit 3's names derive from
// the 2.6 ones. Only what the tests use is here; a test using more fails to compile under mono.
namespace NUnit.Framework
{
    [System.AttributeUsage(System.AttributeTargets.Method, AllowMultiple = false, Inherited = true)]
    public sealed class OneTimeSetUpAttribute : TestFixtureSetUpAttribute { }

    [System.AttributeUsage(System.AttributeTargets.Method, AllowMultiple = false, Inherited = true)]
    public sealed class OneTimeTearDownAttribute : TestFixtureTearDownAttribute { }
}
