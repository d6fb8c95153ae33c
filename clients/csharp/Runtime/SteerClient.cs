// SteerClient: one WebSocket session to steerd (an ITransport: ClientWebSocket, or the browser's
// WebSocket in WebGL players) — Hello /
// Welcome, typed commands as Tasks resolved by their CommandResult, events, WorldViews per
// subscribed world, Ping/Pong clock sync, automatic reconnect with back-off that resubscribes
// (resuming the session: same player, same agents; protocol v4: a world's state arrives as one
// cells message per tick on a binary connection). Same shape as the TypeScript SDK.
//
// Threading: if ConnectAsync is called with a SynchronizationContext (Unity's main thread has
// one), every message is handled and every event raised on it, so views are read safely from
// Update(). Without one (a console app, tests), messages are handled on the receive thread
// under `lock (client.SyncRoot)`: take that lock to read a view from another thread.

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Steerd.Client
{
    public sealed class ConnectOptions
    {
        /// <summary>Player or admin token (Hello.token).</summary>
        public string Token;
        /// <summary>Reconnect automatically after a drop (default true).</summary>
        public bool Reconnect = true;
        public int ReconnectMinDelayMs = 250;
        public int ReconnectMaxDelayMs = 5000;
        /// <summary>
        /// Retry the first connection too (default false: ConnectAsync fails at once when the server
        /// is unreachable): with the reconnect back-off, up to ReconnectMaxAttempts, until the first
        /// Welcome. A refusal at Hello (bad token, version) still fails at once.
        /// </summary>
        public bool RetryFirstConnect;
        /// <summary>Give up after this many consecutive failed attempts (0 = never).</summary>
        public int ReconnectMaxAttempts;
        /// <summary>
        /// A command without its result after this long fails (ms): with `timeout` if it was still
        /// queued for a reconnect (it leaves the queue and is never sent), with `outcome_unknown` if
        /// it was sent (the server may or may not have run it).
        /// </summary>
        public int CommandTimeoutMs = 10000;
        /// <summary>Ping period (ms; the first five go 200 ms apart).</summary>
        public int PingIntervalMs = 1000;
        /// <summary>No Pong for this long: the connection is re-opened (ms).</summary>
        public int PongTimeoutMs = 10000;
        /// <summary>Commands queued while reconnecting; more fail with `not_connected`.</summary>
        public int MaxQueuedCommands = 256;
        /// <summary>Largest server frame accepted (bytes).</summary>
        public int MaxFrameBytes = Codec.DefaultServerLimit;
        /// <summary>Ask for batched frames (/ws?batch=1).</summary>
        public bool Batch;
        /// <summary>Interpolation delay of new views (ms).</summary>
        public double InterpDelayMs = 100;
        /// <summary>States kept per agent for interpolation.</summary>
        public int HistoryLength = 8;
        /// <summary>
        /// Makes the socket of each connection attempt (default Transports.Default():
        /// ClientWebSocketTransport, WebGLTransport in a WebGL player).
        /// </summary>
        public Func<ITransport> Transport;
        /// <summary>
        /// How the client waits (ms, cancellation) for timeouts, pings, back-off and resyncs
        /// (default Timing.Delay: Task.Delay, or a per-frame poll in WebGL players where timers never fire).
        /// </summary>
        public Func<int, CancellationToken, Task> Delay;
    }

    public sealed class SteerClient : IDisposable
    {
        static readonly Stopwatch clock = Stopwatch.StartNew();
        /// <summary>The local clock of the client (ms since start): pass it to WorldView.Sample.</summary>
        public static double NowMs { get { return clock.Elapsed.TotalMilliseconds; } }

        public Welcome Welcome { get; private set; }
        /// <summary>connecting, open, reconnecting or closed.</summary>
        public string State { get; private set; }
        public int Reconnects { get; private set; }
        /// <summary>Reconnects that resumed the previous session (same player, its agents and subscriptions).</summary>
        public int Resumes { get; private set; }
        /// <summary>The player this session acts as (Welcome.player_id); null before the first Welcome.</summary>
        public string PlayerId { get { var w = Welcome; return w != null ? w.PlayerId : null; } }
        /// <summary>The session's role (Welcome.role); null before the first Welcome.</summary>
        public Steerd.Client.Role? Role { get { var w = Welcome; return w != null ? w.Role : (Steerd.Client.Role?)null; } }
        /// <summary>The token a reconnect sends in Hello.resume (each Welcome brings a new one); null if none.</summary>
        public string ResumeToken { get { lock (SyncRoot) return resumeToken; } }
        /// <summary>Held while a message is handled (when no SynchronizationContext was captured).</summary>
        public readonly object SyncRoot = new object();

        public event Action<Welcome> Welcomed;
        public event Action<WorldEvent> Event;
        /// <summary>A MoveTo agent arrived: it stopped within the order's arrival distance of its stop point. Arguments: agent, world, tick.</summary>
        public event Action<uint, string, long> DestinationReached;
        /// <summary>A MoveTo agent gave up short of its stop point (no progress for the world's give-up time)
        /// (protocol v10). Arguments: agent, distance from its stop point, world, tick.</summary>
        public event Action<uint, float, string, long> GaveUp;
        /// <summary>No path reaches the MoveTo's target: the agent stopped at the nearest reachable point
        /// (protocol v10). Arguments: agent, distance from the target, world, tick.</summary>
        public event Action<uint, float, string, long> Unreachable;
        public event Action<uint, string, long> PathCompleted;
        /// <summary>Your agent (first) lost sight of a target (second) its behaviours aimed at, under
        /// `owned` visibility; those behaviours were removed. Arguments: agent, target, world, tick.</summary>
        public event Action<uint, uint, string, long> TargetLost;
        /// <summary>A world's tick rate changed (protocol v9): the new rate, world, tick. Its view's clock follows.</summary>
        public event Action<float, string, long> TickRateChanged;
        /// <summary>A server Error message or an undecodable frame.</summary>
        public event Action<string> Error;
        /// <summary>The connection ended: cause (client, server with its close code, network), and whether the client reconnects.</summary>
        public event Action<DisconnectInfo> Disconnected;
        /// <summary>
        /// Welcome received again after a drop (views resubscribed); the bool says whether the
        /// server resumed the previous session (false after SessionLost).
        /// </summary>
        public event Action<Welcome, bool> Reconnected;
        /// <summary>The server refused the resume token (grace period over, kicked, restarted): the reason.</summary>
        public event Action<string> SessionLost;
        /// <summary>
        /// A world moved to another server (a live handoff): (world, URL). When this client uses it
        /// (a view of it, or agents it spawned there) it reconnects to the URL at once and resumes
        /// its session there (same player, same agents; views resubscribe); Reconnected follows.
        /// </summary>
        public event Action<string, string> Moved;
        /// <summary>A view asked for keyframes again (world, reason).</summary>
        public event Action<string, string> Resynced;
        /// <summary>
        /// A view was dropped and cleared (world, reason): its world is gone after a reconnect, or
        /// the server refused to subscribe it again.
        /// </summary>
        public event Action<string, string> ViewRemoved;

        volatile Uri uri;
        /// <summary>Set when a <c>moved</c> message sent this client elsewhere: the next connection starts at once.</summary>
        volatile bool moving;
        readonly ConnectOptions opts;
        readonly SynchronizationContext context;
        readonly CancellationTokenSource stop = new CancellationTokenSource();
        readonly SemaphoreSlim sendLock = new SemaphoreSlim(1, 1);
        readonly Dictionary<long, Pending> pending = new Dictionary<long, Pending>();
        readonly List<Dictionary<string, object>> queue = new List<Dictionary<string, object>>();
        readonly Dictionary<string, WorldView> views = new Dictionary<string, WorldView>();
        /// <summary>Per world name: the agents this client spawned there and has not seen despawned.</summary>
        readonly Dictionary<string, HashSet<uint>> owned = new Dictionary<string, HashSet<uint>>();
        readonly Dictionary<long, double> pings = new Dictionary<long, double>();
        readonly List<uint> subscribedOrder = new List<uint>();
        readonly HashSet<string> resyncPending = new HashSet<string>();
        readonly TaskCompletionSource<bool> opened = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        ITransport ws;
        long nextRid = 1;
        string resumeToken;
        /// <summary>Whether the Hello of the current connection carried a resume token.</summary>
        bool resumeSent;
        bool everOpen;
        /// <summary>Set when this client aborts the current socket itself (DropSocket, pong timeout).</summary>
        volatile bool closingByClient;
        int attempts;
        double lastPongMs;
        int generation;

        sealed class Pending
        {
            public TaskCompletionSource<CommandResult> Tcs;
            public TaskCompletionSource<long> Pong;
            public bool Internal;
            /// <summary>Cancels the command's timeout (its result or its end came first).</summary>
            public readonly CancellationTokenSource Timer = new CancellationTokenSource();
            /// <summary>The message (queued until sent).</summary>
            public Dictionary<string, object> Msg;
            /// <summary>Handed to a socket: from then on a missing result is outcome_unknown.</summary>
            public bool Sent;
            /// <summary>Runs on the result tree before any later message is handled.</summary>
            public Action<Dictionary<string, object>> OnResult;
            public string What;
        }

        SteerClient(string url, ConnectOptions o, SynchronizationContext ctx)
        {
            uri = WsUri(url, o.Batch);
            opts = o;
            context = ctx;
            State = "connecting";
        }

        /// <summary>Opens a session; completes once the server's Welcome arrived.</summary>
        public static async Task<SteerClient> ConnectAsync(string url, ConnectOptions options = null)
        {
            var c = new SteerClient(url, options ?? new ConnectOptions(), SynchronizationContext.Current);
            var run = c.RunAsync();
            GC.KeepAlive(run);
            // On the caller's context (Unity's main thread): `opened` continues asynchronously, and
            // without a context that would be the thread pool, which a WebGL player never runs.
            await c.opened.Task;
            return c;
        }

        /// <summary>ws://host:port/ws from a ws(s) or http(s) URL (a bare origin gets /ws).</summary>
        public static Uri WsUri(string url, bool batch)
        {
            var b = new UriBuilder(url);
            if (b.Scheme == "http") b.Scheme = "ws"; else if (b.Scheme == "https") b.Scheme = "wss";
            if (b.Path == "/" || b.Path == "") b.Path = "/ws";
            if (batch) b.Query = (b.Query.Length > 1 ? b.Query.Substring(1) + "&" : "") + "batch=1";
            return b.Uri;
        }

        // ---- commands

        /// <summary>Spawns `count` agents of `group` in `area` (Shapes), with limits and behaviours; completes with their ids.</summary>
        public Task<CommandResult> Spawn(string world, string group, int count, SpawnArea area, Limits limits = null, IList<BehaviorEntry> behaviors = null)
        {
            if (area == null) throw new ArgumentNullException("area");
            return Command(new Dictionary<string, object>
            {
                { "type", "spawn" }, { "world", world }, { "group", group }, { "count", (long)count }, { "area", Wire.Tree(area) },
                { "limits", limits != null ? Wire.Tree(limits) : new Dictionary<string, object>() }, { "behaviors", Wire.List(behaviors) },
            }, false, r =>
            {
                if ((string)r["type"] != "spawned") return;
                lock (SyncRoot) { var set = MineSet(world); foreach (var id in Tree.U32s(r["agents"])) set.Add(id); }
            });
        }

        public Task<CommandResult> MoveTo(string world, IList<uint> agents, float x, float y, float stoppingDistance = 0)
        {
            return Command(new Dictionary<string, object>
            {
                { "type", "move_to" }, { "world", world }, { "agents", Tree.Objs(agents) },
                { "target", new Dictionary<string, object> { { "x", x }, { "y", y } } }, { "stopping_distance", stoppingDistance },
            });
        }

        /// <summary>Replaces the agents' behaviours.</summary>
        public Task<CommandResult> SetBehaviors(string world, IList<uint> agents, IList<BehaviorEntry> entries)
        {
            return Command(new Dictionary<string, object> { { "type", "set_behaviors" }, { "world", world }, { "agents", Tree.Objs(agents) }, { "behaviors", Wire.List(entries) } });
        }

        public Task<CommandResult> AddBehavior(string world, IList<uint> agents, BehaviorEntry entry)
        {
            if (entry == null) throw new ArgumentNullException("entry");
            return Command(new Dictionary<string, object> { { "type", "add_behavior" }, { "world", world }, { "agents", Tree.Objs(agents) }, { "entry", Wire.Tree(entry) } });
        }

        public Task<CommandResult> RemoveBehavior(string world, IList<uint> agents, BehaviorKind kind)
        {
            return Command(new Dictionary<string, object> { { "type", "remove_behavior" }, { "world", world }, { "agents", Tree.Objs(agents) }, { "kind", Wire.Name(kind) } });
        }

        public Task<CommandResult> ResetBehaviors(string world, IList<uint> agents)
        {
            return Command(new Dictionary<string, object> { { "type", "reset_behaviors" }, { "world", world }, { "agents", Tree.Objs(agents) } });
        }

        public Task<CommandResult> Despawn(string world, IList<uint> agents)
        {
            var ids = new List<uint>(agents);
            return Command(new Dictionary<string, object> { { "type", "despawn" }, { "world", world }, { "agents", Tree.Objs(agents) } }, false, r =>
            {
                if ((string)r["type"] == "ok") NotMine(world, ids);
            });
        }

        /// <summary>Ids of the agents this client spawned in `world` and has not seen despawned (SampledAgent.Mine): a copy.</summary>
        public List<uint> Mine(string world)
        {
            lock (SyncRoot) return new List<uint>(MineSet(world));
        }

        HashSet<uint> MineSet(string world)
        {
            HashSet<uint> set;
            if (!owned.TryGetValue(world, out set)) owned[world] = set = new HashSet<uint>();
            return set;
        }

        void NotMine(string world, IList<uint> agents)
        {
            lock (SyncRoot)
            {
                HashSet<uint> set;
                if (owned.TryGetValue(world, out set)) foreach (var id in agents) set.Remove(id);
            }
        }

        /// <summary>
        /// Subscribes to `area` (Shapes.View(minX, minY, maxX, maxY); null or WholeWorld = the whole
        /// world) and keeps the world's view (View(world)) across resyncs and reconnects.
        /// everyNTicks (default 1): the server sends the world's state only on ticks that are
        /// multiples of it (observers, minimaps); 0 or more than the server's limit (steerd:
        /// limits.max_every_n_ticks, default 20) is answered invalid_field.
        /// </summary>
        public Task<CommandResult> Subscribe(string world, ViewArea area = null, int everyNTicks = 1)
        {
            var r = area as RectView;
            if (area != null && r == null && !(area is WholeWorld)) throw new ArgumentException("area: a RectView or WholeWorld", "area");
            float[] rect = r != null ? new[] { r.MinX, r.MinY, r.MaxX, r.MaxY } : null;
            if (everyNTicks < 0)
            {
                var t = new TaskCompletionSource<CommandResult>();
                t.SetException(new CommandException("invalid_field", "everyNTicks " + everyNTicks + ": a number of ticks", "every_n_ticks"));
                return t.Task;
            }
            lock (SyncRoot)
            {
                if (!views.ContainsKey(world) && (Welcome == null || Welcome.World(world) == null))
                {
                    var t = new TaskCompletionSource<CommandResult>();
                    t.SetException(new CommandException("unknown_world", "no world `" + world + "` in the Welcome", "world"));
                    return t.Task;
                }
            }
            // The view exists, and takes this area and rate, only once the server accepted them: a
            // refused subscribe leaves nothing behind, and resyncs and reconnects replay only what
            // was accepted.
            return SubscribeCommand(world, rect, everyNTicks, false);
        }

        Task<CommandResult> SubscribeCommand(string world, float[] rect, int everyNTicks, bool isInternal)
        {
            return Command(SubscribeMsg(world, rect, everyNTicks), isInternal, r =>
            {
                if ((string)r["type"] == "subscribed") Accepted(world, rect, everyNTicks, (uint)Tree.L(r, "world"), Tree.U32s(r["cells"]), Strings(r["groups"]));
                else if (isInternal) RemoveView(world, "the server refused to subscribe again: " + r["code"] + ": " + r["message"]);
            });
        }

        /// <summary>A Subscribed answer: the view (created on the first) takes the area, rate and cells.</summary>
        static List<string> Strings(object list)
        {
            var o = new List<string>();
            foreach (var x in (List<object>)list) o.Add((string)x);
            return o;
        }

        void Accepted(string world, float[] rect, int everyNTicks, uint worldId, List<uint> cells, List<string> groups)
        {
            lock (SyncRoot)
            {
                WorldView v;
                if (!views.TryGetValue(world, out v))
                {
                    WorldInfo info = null;
                    if (Welcome != null) foreach (var w in Welcome.Worlds) if (w.Id == worldId) info = w;
                    if (info == null) return;
                    v = new WorldView(info, Welcome.Quantization, info.TickRateHz, rect, opts.HistoryLength) { InterpDelayMs = opts.InterpDelayMs };
                    string name = world;
                    v.OnResync = reason => ScheduleResync(name, reason);
                    v.Mine = MineSet(world);
                    views[world] = v;
                }
                v.Area = rect;
                v.EveryNTicks = everyNTicks;
                v.Groups = groups;
                v.Subscribed(cells);
                if (!subscribedOrder.Contains(worldId)) subscribedOrder.Add(worldId);
            }
        }

        void RemoveView(string world, string reason)
        {
            lock (SyncRoot)
            {
                WorldView v;
                if (!views.TryGetValue(world, out v)) return;
                views.Remove(world);
                subscribedOrder.Remove(v.Info.Id);
                v.Clear();
            }
            Raise(ViewRemoved, world, reason);
        }

        static float[] AreaOf(Dictionary<string, object> subscribe)
        {
            var a = (Dictionary<string, object>)subscribe["area"];
            if ((string)a["type"] != "rect") return null;
            return new[] { Tree.Fl(a, "min_x"), Tree.Fl(a, "min_y"), Tree.Fl(a, "max_x"), Tree.Fl(a, "max_y") };
        }

        static Dictionary<string, object> SubscribeMsg(string world, float[] rect, int everyNTicks)
        {
            var area = rect == null ? Wire.Tree(new WholeWorld()) : Wire.Tree(Shapes.View(rect[0], rect[1], rect[2], rect[3]));
            return new Dictionary<string, object> { { "type", "subscribe" }, { "world", world }, { "area", area }, { "every_n_ticks", (long)everyNTicks } };
        }

        public Task<CommandResult> Unsubscribe(string world)
        {
            lock (SyncRoot)
            {
                WorldView v;
                if (views.TryGetValue(world, out v)) { views.Remove(world); subscribedOrder.Remove(v.Info.Id); }
            }
            return Command(new Dictionary<string, object> { { "type", "unsubscribe" }, { "world", world } });
        }

        /// <summary>The view of a subscribed world, or null.</summary>
        public WorldView View(string world)
        {
            lock (SyncRoot) { WorldView v; return views.TryGetValue(world, out v) ? v : null; }
        }

        /// <summary>Sends a Ping; completes with the server tick of the Pong.</summary>
        public Task<long> Ping()
        {
            var p = new Pending { Pong = new TaskCompletionSource<long>(TaskCreationOptions.RunContinuationsAsynchronously), Sent = true };
            long rid;
            lock (SyncRoot)
            {
                rid = Rid();
                p.What = "ping " + rid;
                if (State != "open")
                {
                    p.Pong.SetException(new CommandException("not_connected", "not connected (" + State + "): ping not sent", null, rid));
                    return p.Pong.Task;
                }
                pending[rid] = p;
                pings[rid] = NowMs;
                StartTimer(rid, p);
            }
            if (!Send(new Dictionary<string, object> { { "type", "ping" }, { "request_id", rid } }))
                FailOne(rid, new CommandException("not_connected", "the socket is not open: ping not sent", null, rid));
            return p.Pong.Task;
        }

        /// <summary>Closes the transport as a network failure would: the client reconnects, resumes the session and resubscribes.</summary>
        public void DropSocket()
        {
            var w = ws;
            if (w == null) return;
            closingByClient = true;
            w.Abort();
        }

        /// <summary>Closes the session for good; pending commands fail.</summary>
        public void Close()
        {
            lock (SyncRoot)
            {
                if (State == "closed") return;
                State = "closed";
            }
            bool had = ws != null;
            stop.Cancel();
            DropSocket();
            FailPending("client closed", true);
            opened.TrySetException(new ConnectException("closed", uri.ToString(), "the client was closed before the Welcome"));
            if (had) Raise(Disconnected, new DisconnectInfo { Cause = DisconnectCause.Client, Code = 1000, Reason = "client closed" });
        }

        public void Dispose() { Close(); }

        long Rid()
        {
            long r = nextRid;
            nextRid = nextRid >= 0xffffffffL ? 1 : nextRid + 1;
            return r;
        }

        /// <summary>
        /// Sends msg now, or queues it while (re)connecting. Either it is sent and its result (or
        /// outcome_unknown) completes the task, or it times out in the queue, leaves it and is
        /// never sent (timeout).
        /// </summary>
        Task<CommandResult> Command(Dictionary<string, object> msg, bool isInternal = false, Action<Dictionary<string, object>> onResult = null)
        {
            var p = new Pending { Tcs = new TaskCompletionSource<CommandResult>(TaskCreationOptions.RunContinuationsAsynchronously), Internal = isInternal, Msg = msg, OnResult = onResult };
            bool send;
            long rid;
            lock (SyncRoot)
            {
                rid = Rid();
                msg["request_id"] = rid;
                p.What = "request " + rid + " (" + msg["type"] + ")";
                if (State == "closed")
                {
                    p.Tcs.SetException(new CommandException("not_connected", "the client is closed", null, rid));
                    return p.Tcs.Task;
                }
                send = State == "open";
                if (!send)
                {
                    if (queue.Count >= opts.MaxQueuedCommands)
                    {
                        p.Tcs.SetException(new CommandException("not_connected", "reconnecting and " + queue.Count + " commands already queued", null, rid));
                        return p.Tcs.Task;
                    }
                    queue.Add(msg);
                }
                p.Sent = send;
                pending[rid] = p;
                StartTimer(rid, p);
            }
            if (send) SendOrRequeue(rid, msg);
            return p.Tcs.Task;
        }

        /// <summary>Sends a pending command marked sent; if no socket is open it goes back to the queue unsent.</summary>
        void SendOrRequeue(long rid, Dictionary<string, object> msg)
        {
            if (Send(msg)) return;
            lock (SyncRoot)
            {
                Pending p;
                if (!pending.TryGetValue(rid, out p) || State == "closed") return;
                p.Sent = false;
                queue.Add(msg);
            }
        }

        Task Wait(int ms, CancellationToken cancel) { return (opts.Delay ?? Timing.Delay)(ms, cancel); }

        async void StartTimer(long rid, Pending p)
        {
            try { await Wait(opts.CommandTimeoutMs, p.Timer.Token).ConfigureAwait(false); }
            catch (OperationCanceledException) { return; }
            {
                bool mine;
                bool sent;
                lock (SyncRoot)
                {
                    mine = pending.Remove(rid);
                    sent = p.Sent;
                    if (mine && !sent) queue.Remove(p.Msg);
                }
                if (!mine) return;
                var e = sent
                    ? new CommandException("outcome_unknown", p.What + " was sent but not answered within " + opts.CommandTimeoutMs + " ms: it may or may not have taken effect", null, rid)
                    : new CommandException("timeout", "no connection within " + opts.CommandTimeoutMs + " ms: " + p.What + " was dropped unsent", null, rid);
                if (p.Tcs != null) p.Tcs.TrySetException(e); else p.Pong.TrySetException(e);
            }
        }

        /// <summary>Hands msg to the open socket; false if there is none.</summary>
        bool Send(Dictionary<string, object> msg)
        {
            var w = ws;
            if (w == null || !w.IsOpen) return false;
            byte[] bytes;
            try { bytes = Codec.EncodeClient(msg); }
            catch (ProtoException e)
            {
                FailOne(Convert.ToInt64(msg["request_id"]), new CommandException("bad_request", e.Message));
                return true;
            }
            SendBytes(w, bytes);
            return true;
        }

        async void SendBytes(ITransport w, byte[] bytes)
        {
            try
            {
                await sendLock.WaitAsync().ConfigureAwait(false);
                try { await w.SendAsync(bytes, stop.Token).ConfigureAwait(false); }
                finally { sendLock.Release(); }
            }
            catch (Exception)
            {
                // The receive loop sees the broken socket and reconnects.
            }
        }

        void FailOne(long rid, Exception e)
        {
            Pending p;
            lock (SyncRoot)
            {
                if (!pending.TryGetValue(rid, out p)) return;
                pending.Remove(rid);
            }
            p.Timer.Cancel();
            if (p.Tcs != null) p.Tcs.TrySetException(e); else p.Pong.TrySetException(e);
        }

        // ---- connection

        async Task RunAsync()
        {
            while (!stop.IsCancellationRequested)
            {
                var w = opts.Transport != null ? opts.Transport() : Transports.Default();
                string why = "";
                var info = new DisconnectInfo { Cause = DisconnectCause.Network, Code = 1006 };
                int gen;
                closingByClient = false;
                try
                {
                    await w.ConnectAsync(uri, stop.Token).ConfigureAwait(false);
                    lock (SyncRoot) { ws = w; gen = ++generation; }
                    string resume;
                    lock (SyncRoot) { resume = resumeToken; resumeSent = resume != null; }
                    SendBytes(w, Codec.EncodeClient(Codec.Hello(opts.Token, resume)));
                    await ReceiveLoop(w, gen).ConfigureAwait(false);
                    var code = w.CloseCode;
                    why = code.HasValue ? code.Value + " " + w.CloseReason : "closed";
                    if (code.HasValue)
                    {
                        info.Cause = DisconnectCause.Server;
                        info.Code = code.Value;
                        info.Reason = w.CloseReason ?? "";
                    }
                }
                catch (Exception e)
                {
                    why = e.Message;
                    info.Reason = e.Message;
                }
                bool moved = moving;
                moving = false;
                if (closingByClient) { info.Cause = DisconnectCause.Client; info.Code = moved ? 1000 : 4000; info.Reason = moved ? "world moved" : "dropped by the client"; }
                lock (SyncRoot) { if (ws == w) ws = null; }
                try { w.Dispose(); } catch (Exception) { }
                if (!OnDrop(why, info)) return;
                // A moved world's new server is up: no back-off.
                if (moved) continue;
                int delay = (int)(Math.Min(opts.ReconnectMaxDelayMs, opts.ReconnectMinDelayMs * Math.Pow(2, Math.Min(attempts, 20))) * (0.5 + Jitter()));
                attempts++;
                try { await Wait(delay, stop.Token).ConfigureAwait(false); } catch (OperationCanceledException) { return; }
            }
        }

        static readonly Random rng = new Random();
        static double Jitter() { lock (rng) return rng.NextDouble() * 0.5; }

        async Task ReceiveLoop(ITransport w, int gen)
        {
            while (!stop.IsCancellationRequested)
            {
                var data = await w.ReceiveAsync(opts.MaxFrameBytes, stop.Token).ConfigureAwait(false);
                if (data == null) return;
                double t = NowMs;
                if (context != null) context.Post(_ => OnFrame(data, t), null);
                else OnFrame(data, t);
            }
        }

        void OnFrame(byte[] data, double t)
        {
            List<Dictionary<string, object>> msgs;
            try
            {
                msgs = opts.Batch ? Codec.DecodeServerBatch(data, 0, data.Length, opts.MaxFrameBytes, true)
                    : new List<Dictionary<string, object>> { Codec.DecodeServer(data, 0, data.Length, opts.MaxFrameBytes, true) };
            }
            catch (ProtoException e)
            {
                Raise(Error, "undecodable frame: " + e.Message);
                lock (SyncRoot) foreach (var v in views.Values) v.Resync("undecodable frame: " + e.Message);
                return;
            }
            foreach (var m in msgs)
            {
                try { OnMessage(m, t); }
                catch (Exception e) when (!(e is OutOfMemoryException))
                {
                    Raise(Error, "bad message " + m["type"] + ": " + e.Message);
                }
            }
        }

        WorldView ViewById(uint id)
        {
            foreach (var v in views.Values) if (v.Info.Id == id) return v;
            return null;
        }

        string WorldName(uint id)
        {
            if (Welcome != null) foreach (var w in Welcome.Worlds) if (w.Id == id) return w.Name;
            return id.ToString();
        }

        void OnMessage(Dictionary<string, object> m, double t)
        {
            var type = (string)m["type"];
            switch (type)
            {
                case "welcome": OnWelcome(Tree.Welcome(m)); return;
                case "cells":
                    {
                        var c = Tree.Cells(m);
                        lock (SyncRoot)
                        {
                            var v = ViewById(c.World);
                            if (v != null) v.ApplyCells(c, t);
                        }
                        return;
                    }
                case "keyframe":
                case "delta":
                    {
                        var f = Tree.Frame(m);
                        lock (SyncRoot)
                        {
                            var v = ViewById(f.World);
                            if (v == null) return;
                            if (f.IsDelta) v.ApplyDelta(f, t); else v.ApplyKeyframe(f, t);
                        }
                        return;
                    }
                case "event":
                    {
                        var e = Tree.D(m, "event");
                        var ev = new WorldEvent { Type = (string)e["type"], World = WorldName((uint)Tree.L(m, "world")), Tick = Tree.L(m, "tick") };
                        if (e.ContainsKey("agent")) ev.Agent = (uint)Tree.L(e, "agent");
                        if (e.ContainsKey("agents")) ev.Agents = Tree.U32s(e["agents"]);
                        if (e.ContainsKey("target")) ev.Target = (uint)Tree.L(e, "target");
                        ev.Group = Tree.S(e, "group");
                        if (ev.Type == "despawned") NotMine(ev.World, ev.Agents);
                        if (e.ContainsKey("tick_rate_hz")) ev.TickRateHz = Tree.Fl(e, "tick_rate_hz");
                        if (e.ContainsKey("distance")) ev.Distance = Tree.Fl(e, "distance");
                        if (ev.Type == "groups")
                        {
                            var names = Strings(e["groups"]);
                            lock (SyncRoot)
                            {
                                var v = ViewById((uint)Tree.L(m, "world"));
                                if (v != null) v.Groups = names;
                            }
                        }
                        if (ev.Type == "tick_rate")
                        {
                            // The world's rate changed: its WorldInfo and its view's clock follow.
                            lock (SyncRoot)
                            {
                                uint wid = (uint)Tree.L(m, "world");
                                if (Welcome != null) foreach (var wi in Welcome.Worlds) if (wi.Id == wid) wi.TickRateHz = ev.TickRateHz;
                                var v = ViewById(wid);
                                if (v != null) v.SetTickRate(ev.TickRateHz);
                            }
                        }
                        Raise(Event, ev);
                        if (ev.Type == "destination_reached") { var h = DestinationReached; if (h != null) Guard(() => h(ev.Agent, ev.World, ev.Tick)); }
                        else if (ev.Type == "gave_up") { var h = GaveUp; if (h != null) Guard(() => h(ev.Agent, ev.Distance, ev.World, ev.Tick)); }
                        else if (ev.Type == "unreachable") { var h = Unreachable; if (h != null) Guard(() => h(ev.Agent, ev.Distance, ev.World, ev.Tick)); }
                        else if (ev.Type == "path_completed") { var h = PathCompleted; if (h != null) Guard(() => h(ev.Agent, ev.World, ev.Tick)); }
                        else if (ev.Type == "target_lost") { var h = TargetLost; if (h != null) Guard(() => h(ev.Agent, ev.Target, ev.World, ev.Tick)); }
                        else if (ev.Type == "tick_rate") { var h = TickRateChanged; if (h != null) Guard(() => h(ev.TickRateHz, ev.World, ev.Tick)); }
                        return;
                    }
                case "command_result": OnResult(m); return;
                case "moved":
                    {
                        string name = (string)m["name"], to = (string)m["to"];
                        bool uses;
                        lock (SyncRoot) uses = views.ContainsKey(name) || owned.ContainsKey(name);
                        Raise(Moved, name, to);
                        if (!uses || State == "closed") return;
                        Uri next;
                        try { next = WsUri(to, opts.Batch); }
                        catch (Exception e) when (e is UriFormatException || e is ArgumentException) { Raise(Error, "moved: `" + to + "` is not a URL"); return; }
                        // Reconnect there now and resume the session with the latest resume token.
                        uri = next;
                        moving = true;
                        var w = ws;
                        if (w != null) { closingByClient = true; w.Abort(); }
                        return;
                    }
                case "pong":
                    {
                        long rid = Tree.L(m, "request_id");
                        long tick = Tree.L(m, "server_tick");
                        Pending p = null;
                        lock (SyncRoot)
                        {
                            lastPongMs = t;
                            double sent;
                            if (pings.TryGetValue(rid, out sent))
                            {
                                pings.Remove(rid);
                                if (subscribedOrder.Count > 0)
                                {
                                    var v = ViewById(subscribedOrder[0]);
                                    if (v != null) v.Clock.AddSample(sent, t, tick);
                                }
                            }
                            if (pending.TryGetValue(rid, out p)) pending.Remove(rid);
                        }
                        if (p != null && p.Pong != null) { p.Timer.Cancel(); p.Pong.TrySetResult(tick); }
                        return;
                    }
                case "error":
                    {
                        string code = (string)m["code"];
                        Raise(Error, code + ": " + m["message"]);
                        if (code == "unauthorized" && (m["field"] as string) == "resume" && State != "open")
                        {
                            // The session is gone: the server closes, and the reconnect starts a
                            // new session with the token (the old agents are no longer ours).
                            lock (SyncRoot) resumeToken = null;
                            var h = SessionLost;
                            if (h != null) Guard(() => h((string)m["message"]));
                            return;
                        }
                        if (!everOpen && (code == "unauthorized" || code == "unsupported_version" || code == "forbidden"))
                        {
                            opened.TrySetException(new ConnectException(code, uri.ToString(), (string)m["message"], m["field"] as string));
                            Close();
                        }
                        return;
                    }
            }
        }

        void OnResult(Dictionary<string, object> m)
        {
            long rid = Tree.L(m, "request_id");
            var r = Tree.D(m, "result");
            var type = (string)r["type"];
            Pending p;
            Dictionary<string, object> late = null;
            lock (SyncRoot)
            {
                if (pending.TryGetValue(rid, out p)) pending.Remove(rid);
                else if (type == "subscribed" && State == "open")
                {
                    // A result after its command's timeout (outcome_unknown). A late Subscribed:
                    // the server streams what no view asked for (resubscribe the view's accepted
                    // area and rate, or unsubscribe).
                    string name = WorldName((uint)Tree.L(r, "world"));
                    WorldView v;
                    late = views.TryGetValue(name, out v) ? SubscribeMsg(name, v.Area, v.EveryNTicks)
                        : new Dictionary<string, object> { { "type", "unsubscribe" }, { "world", name } };
                }
            }
            if (p == null)
            {
                if (late != null)
                {
                    if ((string)late["type"] == "subscribe") Observe(SubscribeCommand((string)late["world"], AreaOf(late), (int)(long)late["every_n_ticks"], true));
                    else Observe(Command(late, true));
                }
                return;
            }
            p.Timer.Cancel();
            if (p.OnResult != null) p.OnResult(r);
            if (p.Tcs == null) return;
            if (type == "error") { p.Tcs.TrySetException(new CommandException((string)r["code"], (string)r["message"], r["field"] as string, rid)); return; }
            var res = new CommandResult { Type = type };
            if (type == "subscribed") { res.World = (uint)Tree.L(r, "world"); res.Cells = Tree.U32s(r["cells"]); }
            if (type == "spawned") res.Agents = Tree.U32s(r["agents"]);
            p.Tcs.TrySetResult(res);
        }

        void OnWelcome(Welcome w)
        {
            bool again, resumed;
            var resend = new List<KeyValuePair<string, WorldView>>();
            var gone = new List<string>();
            List<Dictionary<string, object>> queued;
            lock (SyncRoot)
            {
                again = everOpen;
                resumed = again && resumeSent;
                // Agents belong to the player: another player id (a new dev-mode session) owns none of them.
                if (Welcome != null && Welcome.PlayerId != w.PlayerId) foreach (var set in owned.Values) set.Clear();
                var goneWorlds = new List<string>();
                foreach (var name in owned.Keys) if (w.World(name) == null) goneWorlds.Add(name);
                foreach (var name in goneWorlds) owned.Remove(name);
                Welcome = w;
                State = "open";
                everOpen = true;
                attempts = 0;
                // Each Welcome names a new session token; the next reconnect resumes with it.
                resumeToken = string.IsNullOrEmpty(w.ResumeToken) ? null : w.ResumeToken;
                subscribedOrder.Clear();
                lastPongMs = NowMs;
                foreach (var kv in views)
                {
                    var info = w.World(kv.Key);
                    if (info == null) { gone.Add(kv.Key); continue; }
                    kv.Value.Rebind(info, w.Quantization, info.TickRateHz);
                    resend.Add(kv);
                }
                queued = new List<Dictionary<string, object>>(queue);
                queue.Clear();
                foreach (var q in queued)
                {
                    Pending p;
                    if (pending.TryGetValue(Convert.ToInt64(q["request_id"]), out p)) p.Sent = true;
                }
            }
            foreach (var name in gone) RemoveView(name, "the world is gone after the reconnect");
            foreach (var kv in resend) Observe(SubscribeCommand(kv.Key, kv.Value.Area, kv.Value.EveryNTicks, true));
            foreach (var q in queued) SendOrRequeue(Convert.ToInt64(q["request_id"]), q);
            var gen = generation;
            PingLoop(gen);
            Raise(Welcomed, w);
            if (again)
            {
                Reconnects++;
                if (resumed) Resumes++;
                var h = Reconnected;
                if (h != null) Guard(() => h(w, resumed));
            }
            opened.TrySetResult(true);
        }

        /// <summary>Reports a failed internal command as an Error (no thread-pool continuation: WebGL has none).</summary>
        async void Observe(Task t)
        {
            try { await t; } // on the context it was made on (a WebGL player has no thread pool)
            catch (OperationCanceledException) { }
            catch (Exception e) { Raise(Error, e.Message); }
        }

        void ScheduleResync(string world, string reason)
        {
            Raise(Resynced, world, reason);
            lock (SyncRoot) { if (!resyncPending.Add(world)) return; }
            ResubscribeSoon(world);
        }

        async void ResubscribeSoon(string world)
        {
            try { await Wait(50, stop.Token).ConfigureAwait(false); }
            catch (OperationCanceledException) { lock (SyncRoot) resyncPending.Remove(world); return; }
            {
                Dictionary<string, object> msg = null;
                lock (SyncRoot)
                {
                    resyncPending.Remove(world);
                    WorldView v;
                    if (State == "open" && views.TryGetValue(world, out v)) msg = SubscribeMsg(world, v.Area, v.EveryNTicks);
                }
                if (msg != null) Observe(SubscribeCommand(world, AreaOf(msg), (int)(long)msg["every_n_ticks"], true));
            }
        }

        async void PingLoop(int gen)
        {
            int sent = 0;
            while (!stop.IsCancellationRequested)
            {
                try { await Wait(sent < 5 ? Math.Min(200, opts.PingIntervalMs) : opts.PingIntervalMs, stop.Token).ConfigureAwait(false); }
                catch (OperationCanceledException) { return; }
                long rid;
                lock (SyncRoot)
                {
                    if (generation != gen || State != "open") return;
                    if (NowMs - lastPongMs > opts.PongTimeoutMs) { DropSocket(); return; }
                    rid = Rid();
                    pings[rid] = NowMs;
                    if (pings.Count > 64) pings.Clear();
                }
                Send(new Dictionary<string, object> { { "type", "ping" }, { "request_id", rid } });
                sent++;
            }
        }

        /// <summary>
        /// Fails the commands sent (outcome_unknown: they may or may not have run) and, when `all`
        /// (the session ends), the queued ones too (not_connected: never sent).
        /// </summary>
        void FailPending(string why, bool all)
        {
            var fail = new List<KeyValuePair<long, Pending>>();
            lock (SyncRoot)
            {
                foreach (var kv in pending) if (all || kv.Value.Sent) fail.Add(kv);
                foreach (var kv in fail) pending.Remove(kv.Key);
                pings.Clear();
                if (all) queue.Clear();
            }
            foreach (var kv in fail)
            {
                kv.Value.Timer.Cancel();
                var e = kv.Value.Sent
                    ? new CommandException("outcome_unknown", why + " before the result of " + kv.Value.What + ": it may or may not have taken effect", null, kv.Key)
                    : new CommandException("not_connected", why + ": " + kv.Value.What + " was never sent", null, kv.Key);
                if (kv.Value.Tcs != null) { if (kv.Value.Internal) kv.Value.Tcs.TrySetCanceled(); else kv.Value.Tcs.TrySetException(e); }
                else kv.Value.Pong.TrySetException(e);
            }
        }

        /// <summary>After a drop: fail the commands in flight; true when the client reconnects.</summary>
        bool OnDrop(string why, DisconnectInfo info)
        {
            bool will;
            int tries;
            lock (SyncRoot)
            {
                if (State == "closed") return false;
                will = opts.Reconnect && (everOpen || opts.RetryFirstConnect) && (opts.ReconnectMaxAttempts == 0 || attempts < opts.ReconnectMaxAttempts);
                State = will ? "reconnecting" : "closed";
                tries = attempts + 1;
            }
            FailPending("connection lost (" + why + ")", !will);
            info.WillReconnect = will;
            Raise(Disconnected, info);
            if (!will)
                opened.TrySetException(new ConnectException("unreachable", uri.ToString(), "no Welcome: " + why + (tries > 1 ? " (after " + tries + " attempts)" : ""), null, info.Code, info.Reason));
            return will;
        }

        void Raise<A>(Action<A> h, A a) { if (h != null) Guard(() => h(a)); }
        void Raise<A, B>(Action<A, B> h, A a, B b) { if (h != null) Guard(() => h(a, b)); }

        static void Guard(Action a)
        {
            // A listener's bug must not break the session.
            try { a(); } catch (Exception e) { Trace.TraceError("steerd client listener: " + e); }
        }
    }
}
