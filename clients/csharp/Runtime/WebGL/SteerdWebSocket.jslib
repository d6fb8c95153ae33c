// The browser side of WebGLTransport (WebGL players only): a WebSocket per id, its binary
// messages queued until C# polls them (SteerdWs_NextLength / SteerdWs_Receive), its close code and
// reason kept. No callbacks into C#: the transport polls once a frame. The receive queue is bounded
// (maxQueuedBytes at open): past it the socket is closed and reported broken (no close code).
// Tested in headless Chromium by tests/browser/webgl-transport.test.mjs.
var SteerdWebSocketLib = {
  $SteerdWs: {
    sockets: {},
    next: 1,
    get: function (id) { return SteerdWs.sockets[id] || null; },
  },

  // Opens a socket to the UTF-8 URL at urlPtr; returns its id (> 0), or 0 if the URL is refused.
  SteerdWs_Open: function (urlPtr, maxQueuedBytes) {
    var url = UTF8ToString(urlPtr);
    var ws;
    try { ws = new WebSocket(url); } catch (e) { return 0; }
    ws.binaryType = 'arraybuffer';
    var id = SteerdWs.next++;
    var s = { ws: ws, queue: [], queuedBytes: 0, max: maxQueuedBytes > 0 ? maxQueuedBytes : 64 * 1024 * 1024, closeCode: 0, closeReason: '', closed: false };
    SteerdWs.sockets[id] = s;
    ws.onmessage = function (ev) {
      if (s.closed || typeof ev.data === 'string') return; // binary only
      var bytes = new Uint8Array(ev.data);
      if (s.queuedBytes + bytes.length > s.max) {
        s.closed = true;
        s.closeCode = 0;
        s.closeReason = 'receive queue over ' + s.max + ' bytes';
        try { ws.close(4000, 'receive queue full'); } catch (e) { }
        return;
      }
      s.queue.push(bytes);
      s.queuedBytes += bytes.length;
    };
    ws.onclose = function (ev) {
      if (s.closed) return;
      s.closed = true;
      // 1005 (no code) and 1006 (no close frame): the connection broke.
      s.closeCode = ev.code === 1005 || ev.code === 1006 ? 0 : ev.code;
      s.closeReason = ev.reason || '';
    };
    ws.onerror = function () { /* onclose follows */ };
    return id;
  },

  // 0 connecting, 1 open, 2 closing, 3 closed (or aborted; messages received before the close
  // stay queued until read); -1: no such socket.
  SteerdWs_State: function (id) {
    var s = SteerdWs.get(id);
    if (!s) return -1;
    return s.closed ? 3 : s.ws.readyState;
  },

  // Sends len bytes at ptr as one binary message; 0 sent, -1 not open.
  SteerdWs_Send: function (id, ptr, len) {
    var s = SteerdWs.get(id);
    if (!s || s.closed || s.ws.readyState !== 1) return -1;
    s.ws.send(HEAPU8.slice(ptr, ptr + len));
    return 0;
  },

  // Length of the next queued message, or -1 if none.
  SteerdWs_NextLength: function (id) {
    var s = SteerdWs.get(id);
    if (!s || s.queue.length === 0) return -1;
    return s.queue[0].length;
  },

  // Moves the next queued message to ptr (cap bytes there); its length, or -1 if none or cap is short.
  SteerdWs_Receive: function (id, ptr, cap) {
    var s = SteerdWs.get(id);
    if (!s || s.queue.length === 0 || s.queue[0].length > cap) return -1;
    var m = s.queue.shift();
    s.queuedBytes -= m.length;
    HEAPU8.set(m, ptr);
    return m.length;
  },

  // The close code of the server's close frame; 0 while open or when the connection broke.
  SteerdWs_CloseCode: function (id) {
    var s = SteerdWs.get(id);
    return s && s.closed ? s.closeCode : 0;
  },

  // Writes the close reason (UTF-8, NUL-terminated, at most cap bytes) to ptr; the bytes written.
  SteerdWs_CloseReason: function (id, ptr, cap) {
    var s = SteerdWs.get(id);
    var r = s ? s.closeReason : '';
    if (cap <= 0) return 0;
    return stringToUTF8(r, ptr, cap);
  },

  // Ends the connection now, as a network failure would: no close code, queued messages dropped.
  SteerdWs_Abort: function (id) {
    var s = SteerdWs.get(id);
    if (!s) return;
    if (!s.closed) {
      s.closed = true;
      s.closeCode = 0;
      s.closeReason = 'aborted';
      try { s.ws.close(4000, 'dropped by the client'); } catch (e) { }
    }
    s.queue.length = 0;
    s.queuedBytes = 0;
  },

  // Forgets the socket (closing it if still open).
  SteerdWs_Free: function (id) {
    var s = SteerdWs.get(id);
    if (!s) return;
    if (!s.closed) { try { s.ws.close(1000, 'client closed'); } catch (e) { } }
    s.ws.onmessage = s.ws.onclose = s.ws.onerror = null;
    delete SteerdWs.sockets[id];
  },
};

autoAddDeps(SteerdWebSocketLib, '$SteerdWs');
mergeInto(LibraryManager.library, SteerdWebSocketLib);
