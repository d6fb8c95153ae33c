// The socket under SteerClient: ITransport carries whole binary messages. ClientWebSocketTransport
// (System.Net.WebSockets) everywhere but WebGL; WebGLTransport (WebGL/) over the browser's
// WebSocket in WebGL players, where ClientWebSocket cannot connect. ConnectOptions.Transport picks
// another (a relay, a test double).

using System;
using System.IO;
using System.Net.WebSockets;
using System.Threading;
using System.Threading.Tasks;

namespace Steerd.Client
{
    /// <summary>
    /// One WebSocket connection carrying binary messages. SteerClient makes one per connection
    /// attempt (ConnectOptions.Transport), calls ConnectAsync once, then ReceiveAsync in a loop while
    /// sending (at most one SendAsync at a time), and Dispose when the connection ended.
    /// </summary>
    public interface ITransport : IDisposable
    {
        /// <summary>Opens the connection; fails (throws) if it cannot be opened.</summary>
        Task ConnectAsync(Uri uri, CancellationToken cancel);
        /// <summary>Whether messages can be sent now.</summary>
        bool IsOpen { get; }
        /// <summary>Sends one binary message.</summary>
        Task SendAsync(byte[] message, CancellationToken cancel);
        /// <summary>
        /// The next whole binary message (text messages are skipped); null once the connection
        /// closed (CloseCode, CloseReason). A message over maxBytes throws ProtoException (TooLarge).
        /// </summary>
        Task<byte[]> ReceiveAsync(int maxBytes, CancellationToken cancel);
        /// <summary>The close code the peer sent (a close frame), or null: the connection broke (1006) or is open.</summary>
        int? CloseCode { get; }
        string CloseReason { get; }
        /// <summary>Ends the connection at once, as a network failure would (pending calls end).</summary>
        void Abort();
    }

    /// <summary>
    /// How the client waits (command timeouts, pings, reconnect back-off, resyncs). Task.Delay runs on
    /// System.Threading timers, which never fire in a WebGL player (no threads): there the client
    /// polls a clock once a frame instead (FrameDelay).
    /// </summary>
    public static class Timing
    {
        /// <summary>The platform's wait: FrameDelay in a WebGL player, else Task.Delay.</summary>
        public static Task Delay(int ms, CancellationToken cancel)
        {
#if UNITY_WEBGL && !UNITY_EDITOR
            return FrameDelay(ms, cancel);
#else
            return Task.Delay(ms, cancel);
#endif
        }

        static readonly System.Diagnostics.Stopwatch clock = System.Diagnostics.Stopwatch.StartNew();

        /// <summary>
        /// Waits ms milliseconds without a timer: yields (Task.Yield: the next frame on Unity's
        /// main thread) until the clock has moved on that far; cancelled like Task.Delay.
        /// </summary>
        public static async Task FrameDelay(int ms, CancellationToken cancel)
        {
            double end = clock.Elapsed.TotalMilliseconds + Math.Max(0, ms);
            do
            {
                cancel.ThrowIfCancellationRequested();
                await Task.Yield();
            } while (clock.Elapsed.TotalMilliseconds < end);
            cancel.ThrowIfCancellationRequested();
        }
    }

    public static class Transports
    {
        /// <summary>The platform's transport: WebGLTransport in a WebGL player, else ClientWebSocketTransport.</summary>
        public static ITransport Default()
        {
#if UNITY_WEBGL && !UNITY_EDITOR
            return new WebGLTransport();
#else
            return new ClientWebSocketTransport();
#endif
        }
    }

    /// <summary>ITransport over System.Net.WebSockets.ClientWebSocket.</summary>
    public sealed class ClientWebSocketTransport : ITransport
    {
        readonly ClientWebSocket ws = new ClientWebSocket();
        readonly byte[] buf = new byte[64 * 1024];
        readonly MemoryStream acc = new MemoryStream();

        public Task ConnectAsync(Uri uri, CancellationToken cancel) { return ws.ConnectAsync(uri, cancel); }

        public bool IsOpen { get { return ws.State == WebSocketState.Open; } }

        public Task SendAsync(byte[] message, CancellationToken cancel)
        {
            return ws.SendAsync(new ArraySegment<byte>(message), WebSocketMessageType.Binary, true, cancel);
        }

        public async Task<byte[]> ReceiveAsync(int maxBytes, CancellationToken cancel)
        {
            while (ws.State == WebSocketState.Open)
            {
                var r = await ws.ReceiveAsync(new ArraySegment<byte>(buf), cancel).ConfigureAwait(false);
                if (r.MessageType == WebSocketMessageType.Close) return null;
                acc.Write(buf, 0, r.Count);
                if (acc.Length > maxBytes) throw new ProtoException(ProtoErrorKind.TooLarge, "frame over " + maxBytes + " bytes");
                if (!r.EndOfMessage) continue;
                var data = acc.ToArray();
                acc.SetLength(0);
                if (r.MessageType != WebSocketMessageType.Binary) continue; // the client asks for binary
                return data;
            }
            return null;
        }

        public int? CloseCode
        {
            get
            {
                var s = ws.CloseStatus;
                if (!s.HasValue) return null;
                int code = (int)s.Value;
                return code == 1005 || code == 1006 ? (int?)null : code;
            }
        }

        public string CloseReason { get { return ws.CloseStatusDescription ?? ""; } }

        public void Abort() { try { ws.Abort(); } catch (Exception) { } }

        public void Dispose() { try { ws.Dispose(); } catch (Exception) { } }
    }
}
