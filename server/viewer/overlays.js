// Overlays for the selected agent: its MoveTo flow field, and what reciprocal avoidance sees
// (half-planes of the velocity obstacle, preferred and chosen velocity).

import { $, ctx, V } from './state.js';
import { api, wpath } from './rest.js';
import { visibleRect, allAgents, quant } from './stream.js';
import { w2s } from './view.js';
import { selectedWorld } from './world.js';
import { firstSelected, isSelected, selectionSize } from './input.js';

/** This module's own state: the overlays' last answers, and whether a fetch is under way. */
const own = {
  flow: null, // GET /worlds/{w}/flowfield answer for the selection's first agent
  flowBusy: false,
  avoid: null, // GET /worlds/{w}/agents/{id}/avoidance answer for the selection's first agent
  avoidBusy: false,
};

/** The flow-field overlay's last answer ({status, goal, angles, …}), or null. */
export const flowAnswer = () => own.flow;
/** The avoidance overlays' last answer, or null. */
export const avoidAnswer = () => own.avoid;

export async function refreshFlow() {
  if (!$('ov-flow').checked || !selectedWorld() || !selectionSize() || own.flowBusy) {
    if (!$('ov-flow').checked || !selectionSize()) { own.flow = null; $('flow-status').textContent = ''; }
    return;
  }
  const agent = firstSelected();
  own.flowBusy = true;
  try {
    own.flow = await api('GET', wpath(`/flowfield?agent=${agent}&max_side=64`));
    const why = {
      ready: `agent ${agent}: following a flow field`,
      pending: `agent ${agent}: field requested, heading straight meanwhile`,
      straight: `agent ${agent}: sees its goal, no field needed`,
      no_order: `agent ${agent}: no MoveTo order`,
    };
    $('flow-status').textContent = why[own.flow.status] || own.flow.status;
  } catch (e) {
    own.flow = null;
    $('flow-status').textContent = String(e.message || e);
  } finally {
    own.flowBusy = false;
  }
}

/** True when an avoidance overlay is on and an agent is selected (only then is it polled). */
function avoidWanted() {
  return ($('ov-vo').checked || $('ov-pvc').checked) && !!selectedWorld() && selectionSize() > 0;
}

/** Fetches what reciprocal avoidance sees for the first selected agent (5 Hz while wanted). */
export async function refreshAvoidance() {
  if (!avoidWanted()) {
    if (own.avoid) { own.avoid = null; $('avoid-status').textContent = ''; }
    return;
  }
  if (own.avoidBusy) return;
  const agent = firstSelected();
  own.avoidBusy = true;
  try {
    V.avoidFetches++;
    const a = await api('GET', wpath(`/agents/${agent}/avoidance`));
    if (!avoidWanted()) return; // switched off meanwhile
    own.avoid = a;
    const nStatic = a.half_planes.filter((h) => h.static).length;
    const speed = (v) => Math.hypot(v.x, v.y).toFixed(2);
    $('avoid-status').textContent = `agent ${agent}: ${a.active ? 'avoids reciprocally' : 'does not avoid reciprocally (default parameters shown)'} · `
      + `${a.half_planes.length - nStatic} neighbour + ${nStatic} static half-planes`
      + `${permittedPolygon(a.half_planes, a.max_speed).length ? '' : ' (none leaves room: least violation chosen)'}`
      + ` · preferred ${speed(a.preferred)} (${a.preferred_source}), chosen ${speed(a.chosen)} u/s`;
  } catch (e) {
    own.avoid = null;
    $('avoid-status').textContent = String(e.message || e);
  } finally {
    own.avoidBusy = false;
  }
}

/**
 * The velocities every half-plane permits within the max-speed disc (a 48-gon), as a polygon
 * in velocity space (Sutherland–Hodgman clipping); empty when none does (a jam: the solver
 * then picks the least violation).
 */
function permittedPolygon(planes, maxSpeed) {
  let poly = [];
  for (let i = 0; i < 48; i++) {
    const t = (i / 48) * Math.PI * 2;
    poly.push({ x: maxSpeed * Math.cos(t), y: maxSpeed * Math.sin(t) });
  }
  // Permitted: det(direction, point − v) ≤ 0, i.e. left of the directed line.
  const side = (h, v) => h.direction.x * (h.point.y - v.y) - h.direction.y * (h.point.x - v.x);
  for (const h of planes) {
    const out = [];
    for (let i = 0; i < poly.length; i++) {
      const a = poly[i];
      const b = poly[(i + 1) % poly.length];
      const sa = side(h, a);
      const sb = side(h, b);
      if (sa <= 0) out.push(a);
      if ((sa <= 0) !== (sb <= 0)) {
        const t = sa / (sa - sb);
        out.push({ x: a.x + (b.x - a.x) * t, y: a.y + (b.y - a.y) * t });
      }
    }
    poly = out;
    if (!poly.length) break;
  }
  return poly;
}

/** An arrow from (x0, y0) to (x1, y1) in screen pixels. */
function arrow(x0, y0, x1, y1, color, width, dash = []) {
  const len = Math.hypot(x1 - x0, y1 - y0);
  if (len < 0.5) return false;
  const back = Math.atan2(y1 - y0, x1 - x0) + Math.PI;
  const h = Math.min(10, Math.max(4, 0.25 * len));
  ctx.strokeStyle = color;
  ctx.lineWidth = width;
  ctx.setLineDash(dash);
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(x1, y1);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.beginPath();
  ctx.moveTo(x1, y1);
  ctx.lineTo(x1 + h * Math.cos(back + 0.45), y1 + h * Math.sin(back + 0.45));
  ctx.moveTo(x1, y1);
  ctx.lineTo(x1 + h * Math.cos(back - 0.45), y1 + h * Math.sin(back - 0.45));
  ctx.stroke();
  return true;
}

/**
 * The avoidance overlays of the selected agent, in velocity space centred on the agent: a
 * velocity v is drawn at the agent's position + v · vsc pixels (vsc: max speed ↦ at least 80 px,
 * 1 s of travel when zoomed in). "velocity obstacle": the dashed max-speed circle, each
 * half-plane's boundary with its forbidden side faintly shaded (red: neighbours, grey: obstacles
 * and walls), and the permitted velocities (what all half-planes leave of the max-speed disc)
 * in green.
 * "preferred vs chosen": two arrows, preferred (dashed blue) and chosen (green).
 */
export function drawAvoidance(sc, layer) {
  const a = own.avoid;
  const drawn = layer === 'planes' ? { planes: 0, arrows: 0, permitted: 0 } : V.avoidDrawn;
  V.avoidDrawn = drawn;
  if (!a || !avoidWanted() || !isSelected(a.agent)) return;
  // Where the agent is drawn now (the stream), else where the answer says it was.
  const live = allAgents().find((q) => q.id === a.agent);
  const [cx, cy] = live ? w2s(live.pos[0] * quant().pos_step, live.pos[1] * quant().pos_step) : w2s(a.position.x, a.position.y);
  const ms = Math.max(a.max_speed, 1e-3);
  const vsc = Math.max(sc, 80 / ms);
  const at = (v) => [cx + v.x * vsc, cy - v.y * vsc]; // screen y grows downwards
  if (layer === 'planes' && $('ov-vo').checked) {
    const reach = 1.6 * ms * vsc; // pixels of velocity space shown
    ctx.save();
    ctx.beginPath();
    ctx.arc(cx, cy, reach, 0, Math.PI * 2);
    ctx.fillStyle = 'rgba(15,18,22,.35)';
    ctx.fill();
    ctx.clip();
    const far = 4 * reach;
    for (const h of a.half_planes) {
      const [px, py] = at(h.point);
      const dx = h.direction.x;
      const dy = -h.direction.y;
      // Permitted: left of the direction in velocity space, i.e. right of it on screen (y flipped).
      const nx = dy;
      const ny = -dx;
      const [ax, ay] = [px - dx * far, py - dy * far];
      const [bx, by] = [px + dx * far, py + dy * far];
      ctx.beginPath();
      ctx.moveTo(ax, ay);
      ctx.lineTo(bx, by);
      ctx.lineTo(bx - nx * far, by - ny * far);
      ctx.lineTo(ax - nx * far, ay - ny * far);
      ctx.closePath();
      ctx.fillStyle = h.static ? 'rgba(160,170,190,.05)' : 'rgba(255,90,90,.05)';
      ctx.fill();
      ctx.beginPath();
      ctx.moveTo(ax, ay);
      ctx.lineTo(bx, by);
      ctx.strokeStyle = h.static ? 'rgba(190,198,214,.8)' : 'rgba(255,110,110,.85)';
      ctx.lineWidth = 1.2;
      ctx.stroke();
      drawn.planes++;
    }
    ctx.restore();
    // What is left: the velocities avoidance may choose from.
    const poly = permittedPolygon(a.half_planes, ms);
    if (poly.length) {
      ctx.beginPath();
      poly.forEach((v, i) => { const [x, y] = at(v); if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y); });
      ctx.closePath();
      ctx.fillStyle = 'rgba(95,211,141,.28)';
      ctx.fill();
      ctx.strokeStyle = 'rgba(95,211,141,.9)';
      ctx.lineWidth = 1;
      ctx.stroke();
    }
    drawn.permitted = poly.length;
    ctx.beginPath();
    ctx.arc(cx, cy, ms * vsc, 0, Math.PI * 2);
    ctx.setLineDash([3, 4]);
    ctx.strokeStyle = 'rgba(255,255,255,.45)';
    ctx.lineWidth = 1;
    ctx.stroke();
    ctx.setLineDash([]);
  }
  if (layer === 'arrows' && $('ov-pvc').checked) {
    const [px, py] = at(a.preferred);
    const [qx, qy] = at(a.chosen);
    if (arrow(cx, cy, px, py, '#6fb3ff', 2, [5, 3])) drawn.arrows++;
    if (arrow(cx, cy, qx, qy, '#5fd38d', 2)) drawn.arrows++;
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#6fb3ff';
    ctx.textAlign = 'right';
    ctx.fillText('preferred', px - 6, py - 4);
    ctx.textAlign = 'left';
    ctx.fillStyle = '#5fd38d';
    ctx.fillText('chosen', qx + 6, qy + 12);
  }
}

export function drawFlow(sc) {
  const f = own.flow;
  if (!f || !$('ov-flow').checked) return;
  let arrows = 0;
  if (f.status === 'ready') {
    const len = 0.38 * f.spacing * sc;
    const step = len < 3 ? Math.ceil(3 / Math.max(len, 0.1)) : 1; // thin out when zoomed far out
    const v = visibleRect();
    ctx.strokeStyle = 'rgba(245,197,66,.55)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let r = 0; r < f.rows; r += step) {
      for (let c = 0; c < f.cols; c += step) {
        const a = f.angles[r * f.cols + c];
        if (a === null || a === undefined) continue;
        const x = f.origin[0] + (c + 0.5) * f.spacing;
        const y = f.origin[1] + (r + 0.5) * f.spacing;
        if (x < v.min_x - f.spacing || x > v.max_x + f.spacing || y < v.min_y - f.spacing || y > v.max_y + f.spacing) continue;
        const [sx, sy] = w2s(x, y);
        const dx = Math.cos(a) * len * step;
        const dy = -Math.sin(a) * len * step; // screen y grows downwards
        ctx.moveTo(sx - dx, sy - dy);
        ctx.lineTo(sx + dx, sy + dy);
        // Arrow head.
        const hx = sx + dx;
        const hy = sy + dy;
        const back = Math.atan2(dy, dx) + Math.PI;
        const h = Math.max(2, 0.5 * len * step);
        ctx.moveTo(hx, hy);
        ctx.lineTo(hx + h * Math.cos(back + 0.5), hy + h * Math.sin(back + 0.5));
        ctx.moveTo(hx, hy);
        ctx.lineTo(hx + h * Math.cos(back - 0.5), hy + h * Math.sin(back - 0.5));
        arrows++;
      }
    }
    ctx.stroke();
  }
  if (f.goal) {
    const [gx, gy] = w2s(f.goal[0], f.goal[1]);
    ctx.strokeStyle = '#f5c542';
    ctx.lineWidth = 1.5;
    ctx.strokeRect(gx - 5, gy - 5, 10, 10);
  }
  V.flowArrows = arrows;
}
