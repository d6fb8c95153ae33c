// The event log and the status panel (stream figures, /metrics, legend).

import { $, groupColor } from './state.js';
import { allAgents, traffic } from './stream.js';
import { refreshGroups, restInfo, isPaused, groupName, knowsAgentRadius } from './world.js';

/** This module's own state. */
const own = {
  metrics: null,
  legendKey: null, // the groups and counts the legend shows
  groupsPending: false, // a refreshGroups for a group without a radius is under way
  groupsTried: 0, // performance.now() of the last one
};

// Event log

export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function logEvent(html, cls, tick) {
  const li = document.createElement('li');
  if (cls) li.className = cls;
  li.innerHTML = `${tick !== undefined ? `<span>${tick}</span> ` : ''}${html}`;
  const ol = $('events');
  ol.prepend(li);
  while (ol.children.length > 200) ol.lastChild.remove();
}

// ---------------------------------------------------------------------------------------------
// Status panel

function fmtBytes(n) {
  if (n < 1024) return `${n.toFixed(0)} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(2)} MiB`;
}

function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (m && !m[2]) out[m[1]] = parseFloat(m[3]);
  }
  return out;
}

export async function refreshMetrics() {
  const r = await fetch('/metrics');
  if (!r.ok) return;
  const m = parseMetrics(await r.text());
  const prev = own.metrics;
  own.metrics = m;
  const sum = m.steerd_tick_duration_seconds_sum;
  const count = m.steerd_tick_duration_seconds_count;
  if (sum !== undefined && count !== undefined) {
    let mean = count ? sum / count : 0;
    if (prev && count > prev.steerd_tick_duration_seconds_count) {
      mean = (sum - prev.steerd_tick_duration_seconds_sum) / (count - prev.steerd_tick_duration_seconds_count);
    }
    $('s-tickdur').textContent = `${(mean * 1000).toFixed(2)} ms`;
  }
  if (m.steerd_subscribers !== undefined) $('s-subs').textContent = String(m.steerd_subscribers);
}

export function updateStatus() {
  const now = performance.now();
  const t = traffic(now);
  $('s-bytes').textContent = `${fmtBytes(t.bytesPerSec)}/s`;
  $('s-bytes').title = `${fmtBytes(t.bytes)} in total`;
  $('s-keys').textContent = `${t.keyframes}${t.chainBreaks ? ` · ${t.chainBreaks} resyncs` : ''}`;
  if (t.lateness.length) {
    const v = t.lateness;
    const p50 = v[Math.floor(v.length / 2)];
    const max = v[v.length - 1];
    $('s-late').textContent = `${p50.toFixed(1)} ms · max ${max.toFixed(1)}`;
  } else {
    $('s-late').textContent = isPaused() ? 'paused' : '–';
  }
  const info = restInfo();
  if (info) $('s-agents').textContent = `${info.agents} (${allAgents().length} streamed)`;
  updateLegend();
}

function updateLegend() {
  const counts = new Map();
  for (const a of allAgents()) counts.set(a.group, (counts.get(a.group) || 0) + 1);
  const groups = [...counts.keys()].sort((a, b) => a - b);
  const key = groups.map((g) => `${g}:${counts.get(g)}:${groupName(g) || ''}`).join('|');
  if (key === own.legendKey) return;
  own.legendKey = key;
  $('legend').replaceChildren(...groups.map((g) => {
    const li = document.createElement('li');
    const sw = document.createElement('span');
    sw.className = 'sw';
    sw.style.background = groupColor(g);
    const name = document.createElement('span');
    name.textContent = groupName(g) || `group ${g}`;
    const n = document.createElement('span');
    n.className = 'n';
    n.textContent = String(counts.get(g));
    li.append(sw, name, n);
    return li;
  }));
  if (groups.some((g) => !knowsAgentRadius(g)) && !own.groupsPending && performance.now() - own.groupsTried > 5000) {
    own.groupsPending = true;
    own.groupsTried = performance.now();
    refreshGroups().catch(() => {}).finally(() => { own.groupsPending = false; });
  }
}
