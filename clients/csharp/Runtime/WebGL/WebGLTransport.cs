// ITransport over the browser's WebSocket, for WebGL players (where ClientWebSocket cannot
// connect): SteerdWebSocket.jslib holds the socket and queues its binary messages; this side polls
// them once a frame (no callbacks from JavaScript). In a WebGL player the client runs on the main
// thread: call SteerClient.ConnectAsync from it (a MonoBehaviour), so that every continuation
// resumes on Unity's SynchronizationContext.

using System;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
#if UNITY_WEBGL && !UNITY_EDITOR
using System.Runtime.InteropServices;
#endif

namespace Steerd.Client
{
    /// <summary>The functions of SteerdWebSocket.jslib, as WebGLTransport calls them (ids, byte buffers).</summary>
    public interface IBrowserSocketApi
    {
        /// <summary>A socket to url; its id (&gt; 0), or 0 if the URL is refused.</summary>
        int Open(string url, int maxQueuedBytes);
        /// <summary>0 connecting, 1 open, 2 closing, 3 closed; -1 no such socket.</summary>
        int State(int id);
        /// <summary>Sends data as one binary message; 0 sent, -1 not open.</summary>
        int Send(int id, byte[] data);
        /// <summary>Length of the next queued message, or -1 if none.</summary>
        int NextLength(int id);
        /// <summary>Moves the next queued message into buffer; its length, or -1.</summary>
        int Receive(int id, byte[] buffer);
        /// <summary>The server's close code; 0 while open or when the connection broke.</summary>
        int CloseCode(int id);
        string CloseReason(int id);
        void Abort(int id);
        void Free(int id);
    }

    public sealed class WebGLTransport : ITransport
    {
        readonly IBrowserSocketApi api;
        readonly Func<Task> nextFrame;
        readonly int maxQueuedBytes;
        int id;

        /// <summary>
        /// The browser's WebSocket (a WebGL player); elsewhere pass an IBrowserSocketApi. nextFrame:
        /// how the transport waits between polls (default: Task.Yield, a frame on Unity's main
        /// thread). maxQueuedBytes bounds the messages the browser holds between two polls (default
        /// 64 MiB; past it the connection is reported broken).
        /// </summary>
        public WebGLTransport(IBrowserSocketApi api = null, Func<Task> nextFrame = null, int maxQueuedBytes = 64 * 1024 * 1024)
        {
            this.api = api ?? BrowserSocket();
            this.nextFrame = nextFrame ?? YieldOnce;
            this.maxQueuedBytes = maxQueuedBytes;
        }

        static async Task YieldOnce() { await Task.Yield(); }

        static IBrowserSocketApi BrowserSocket()
        {
#if UNITY_WEBGL && !UNITY_EDITOR
            return new JsLib();
#else
            throw new PlatformNotSupportedException("WebGLTransport needs a WebGL player (or an IBrowserSocketApi)");
#endif
        }

        public async Task ConnectAsync(Uri uri, CancellationToken cancel)
        {
            id = api.Open(uri.ToString(), maxQueuedBytes);
            if (id == 0) throw new InvalidOperationException("the browser refused the WebSocket URL " + uri);
            for (;;)
            {
                cancel.ThrowIfCancellationRequested();
                int s = api.State(id);
                if (s == 1) return;
                if (s != 0) throw new InvalidOperationException("the WebSocket to " + uri + " closed before it opened (" + (api.CloseCode(id) != 0 ? api.CloseCode(id) + " " + api.CloseReason(id) : "no close frame") + ")");
                await nextFrame().ConfigureAwait(false);
            }
        }

        public bool IsOpen { get { return id != 0 && api.State(id) == 1; } }

        public Task SendAsync(byte[] message, CancellationToken cancel)
        {
            if (id == 0 || api.Send(id, message) != 0) throw new InvalidOperationException("the WebSocket is not open");
            return Task.FromResult(true);
        }

        public async Task<byte[]> ReceiveAsync(int maxBytes, CancellationToken cancel)
        {
            if (id == 0) return null;
            for (;;)
            {
                int n = api.NextLength(id);
                if (n >= 0)
                {
                    if (n > maxBytes)
                    {
                        api.Abort(id);
                        throw new ProtoException(ProtoErrorKind.TooLarge, "frame over " + maxBytes + " bytes");
                    }
                    var buf = new byte[n];
                    if (api.Receive(id, buf) != n) throw new InvalidOperationException("the WebSocket's queued message changed under the receive");
                    return buf;
                }
                if (api.State(id) == 3) return null;
                cancel.ThrowIfCancellationRequested();
                await nextFrame().ConfigureAwait(false);
            }
        }

        public int? CloseCode
        {
            get
            {
                if (id == 0 || api.State(id) != 3) return null;
                int c = api.CloseCode(id);
                return c != 0 ? c : (int?)null;
            }
        }

        public string CloseReason { get { return id == 0 ? "" : api.CloseReason(id) ?? ""; } }

        public void Abort() { if (id != 0) api.Abort(id); }

        public void Dispose()
        {
            if (id == 0) return;
            api.Free(id);
            id = 0;
        }

#if UNITY_WEBGL && !UNITY_EDITOR
        sealed class JsLib : IBrowserSocketApi
        {
            [DllImport("__Internal")] static extern int SteerdWs_Open(string url, int maxQueuedBytes);
            [DllImport("__Internal")] static extern int SteerdWs_State(int id);
            [DllImport("__Internal")] static extern int SteerdWs_Send(int id, byte[] data, int len);
            [DllImport("__Internal")] static extern int SteerdWs_NextLength(int id);
            [DllImport("__Internal")] static extern int SteerdWs_Receive(int id, byte[] buffer, int cap);
            [DllImport("__Internal")] static extern int SteerdWs_CloseCode(int id);
            [DllImport("__Internal")] static extern int SteerdWs_CloseReason(int id, byte[] buffer, int cap);
            [DllImport("__Internal")] static extern void SteerdWs_Abort(int id);
            [DllImport("__Internal")] static extern void SteerdWs_Free(int id);

            public int Open(string url, int maxQueuedBytes) { return SteerdWs_Open(url, maxQueuedBytes); }
            public int State(int id) { return SteerdWs_State(id); }
            public int Send(int id, byte[] data) { return SteerdWs_Send(id, data, data.Length); }
            public int NextLength(int id) { return SteerdWs_NextLength(id); }
            public int Receive(int id, byte[] buffer) { return SteerdWs_Receive(id, buffer, buffer.Length); }
            public int CloseCode(int id) { return SteerdWs_CloseCode(id); }
            public string CloseReason(int id)
            {
                var buf = new byte[512];
                int n = SteerdWs_CloseReason(id, buf, buf.Length);
                return n > 0 ? Encoding.UTF8.GetString(buf, 0, n) : "";
            }
            public void Abort(int id) { SteerdWs_Abort(id); }
            public void Free(int id) { SteerdWs_Free(id); }
        }
#endif
    }
}
