// The replay timeline.

import { $, V } from './state.js';
import { api, wpath, fail } from './rest.js';
import { selectedWorld } from './world.js';

// Replay timeline: shown for replay worlds only (GET /worlds/{w} has `replay`); a scrub bar
// (current tick / last tick), play/pause and a speed choice, over /worlds/{w}/replay/...

const SPEEDS = [0.25, 0.5, 1, 2, 4, 8, 16];

/** This module's own state. */
const own = {
  /** A replay world's timeline (null for a live world), and a scrub in progress. */
  replay: null,
  scrubbing: false,
};

/** The shown replay world's timeline (GET /worlds/{w}/replay), null for a live world. */
export const timeline = () => own.replay;

export function updateTimeline(rp) {
  $('timeline').hidden = !rp;
  // A replay world takes no commands: the simulation controls and tools would be refused.
  $('sim-controls').hidden = !!rp;
  $('tools').hidden = !!rp;
  own.replay = rp || null;
  if (!rp) return;
  const scrub = $('tl-scrub');
  scrub.max = String(rp.end_tick);
  if (!own.scrubbing) scrub.value = String(rp.tick);
  $('tl-tick').textContent = `${own.scrubbing ? scrub.value : rp.tick} / ${rp.end_tick}`;
  const play = $('tl-play');
  play.textContent = rp.playing ? 'Pause' : 'Play';
  play.classList.toggle('on', rp.playing);
  const sel = $('tl-speed');
  const speeds = SPEEDS.filter((x) => x <= rp.max_speed);
  if (sel.options.length !== speeds.length) sel.replaceChildren(...speeds.map((x) => new Option(`${x}×`, String(x))));
  if (document.activeElement !== sel) sel.value = String(rp.speed);
  const v = rp.verification;
  const chk = $('tl-check');
  chk.textContent = v.divergences ? `diverged at ${v.divergences} checkpoint(s)` : `${v.checks_ok}/${v.checks} checkpoints ok`;
  chk.className = `pill ${v.divergences ? 'bad' : 'ok'}`;
}

async function refreshReplay() {
  const shown = selectedWorld();
  if (!shown || !own.replay) return;
  const name = shown.name;
  const rp = await api('GET', wpath('/replay'));
  if (selectedWorld().name !== name) return;
  updateTimeline(rp);
}

async function replayControl(op, body) {
  const rp = await api('POST', wpath(`/replay/${op}`), body);
  updateTimeline(rp);
  V.replaySeeks += op === 'seek' ? 1 : 0;
  return rp;
}

/** Binds this module's listeners and timers (app.js calls it once, after every module has loaded). */
export function bindReplay() {
  $('tl-play').addEventListener('click', () => replayControl(own.replay && own.replay.playing ? 'pause' : 'play').catch(fail));
  $('tl-scrub').addEventListener('input', () => {
    own.scrubbing = true;
    $('tl-tick').textContent = `${$('tl-scrub').value} / ${$('tl-scrub').max}`;
  });
  $('tl-scrub').addEventListener('change', () => {
    const tick = Number($('tl-scrub').value);
    replayControl('seek', { tick }).catch(fail).finally(() => { own.scrubbing = false; });
  });
  $('tl-speed').addEventListener('change', (ev) => replayControl('speed', { speed: Number(ev.target.value) }).catch(fail));
  setInterval(() => { refreshReplay().catch(() => {}); }, 250);

}
