// Players panel: who plays in the selected world (GET /worlds/{w}/players), with a kick button
// (DELETE /worlds/{w}/players/{id}). Admin calls: it uses the viewer's token, and hides itself
// while the server answers 401/403. Plain ES module; app.js calls initPlayers once.

const REFRESH_MS = 2000;

/**
 * @param {{world: () => (string|null), token: () => string, toast: (msg: string, ok?: boolean) => void}} opts
 */
export function initPlayers(opts) {
  const box = document.getElementById('players');
  const list = document.getElementById('players-list');
  const note = document.getElementById('players-note');
  if (!box || !list || !note) return;
  const headers = () => (opts.token() ? { Authorization: `Bearer ${opts.token()}` } : {});

  async function refresh() {
    const w = opts.world();
    if (!w) return;
    let r;
    try {
      r = await fetch(`/worlds/${encodeURIComponent(w)}/players`, { headers: headers() });
    } catch {
      return;
    }
    if (r.status === 401 || r.status === 403) {
      note.textContent = 'needs the admin token';
      list.replaceChildren();
      return;
    }
    if (!r.ok) return;
    const rows = await r.json();
    note.textContent = rows.length ? '' : 'no players';
    list.replaceChildren(...rows.map((p) => row(w, p)));
  }

  function row(w, p) {
    const li = document.createElement('li');
    const kb = p.bytes_per_sec >= 1024 ? `${(p.bytes_per_sec / 1024).toFixed(1)} KiB/s` : `${p.bytes_per_sec} B/s`;
    const who = `${p.player}${p.team ? ` [${p.team}]` : ''}`;
    li.textContent = `${who} · ${p.role ?? 'gone'} · ${p.connections} conn · ${p.agents} agents · ${kb}${p.orphaned ? ' · orphaned' : ''} `;
    const kick = document.createElement('button');
    kick.type = 'button';
    kick.textContent = 'Kick';
    kick.addEventListener('click', async () => {
      const r = await fetch(`/worlds/${encodeURIComponent(w)}/players/${encodeURIComponent(p.player)}`, { method: 'DELETE', headers: headers() });
      opts.toast(r.ok ? `kicked ${p.player}` : `kick ${p.player}: ${r.status}`, r.ok);
      refresh();
    });
    li.append(kick);
    return li;
  }

  refresh();
  setInterval(refresh, REFRESH_MS);
}
