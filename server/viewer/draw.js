// Drawing the world on the canvas.

import { $, canvas, ctx, groupColor } from './state.js';
import { visibleRect, updateSubscription, connState, isSubscribed, quant, heldCells, cellSeenAt } from './stream.js';
import { drawAvoidance, drawFlow } from './overlays.js';
import { stuckMark } from './stuck.js';
import { selectedWorld, restInfo, isPaused, tickRate, obstacles, walls, groupName, agentRadius, neighborRadius } from './world.js';
import { w2s, fit, isFitted, scale } from './view.js';
import { pointer, isSelected, selectionSize, arrivedAt, moveTarget, awaitedArrivals } from './input.js';

/** This module's own state. */
const own = {
  gridStep: 1, // world units between grid lines (the scale bar's length)
};

// Drawing

function resize() {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth;
  const h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    if (!isFitted()) fit();
    updateSubscription();
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
}

export function draw() {
  resize();
  const W = canvas.clientWidth;
  const H = canvas.clientHeight;
  ctx.fillStyle = '#0f1216';
  ctx.fillRect(0, 0, W, H);
  const w = selectedWorld();
  if (!w) {
    ctx.fillStyle = '#8a93a3';
    ctx.font = '14px system-ui, sans-serif';
    ctx.fillText(connState() === 'live' ? 'no worlds' : 'connecting…', 20, 30);
    requestAnimationFrame(draw);
    return;
  }
  const b = w.bounds;
  const sc = scale();

  // World area and a light grid.
  const [bx0, by0] = w2s(b.min_x, b.max_y);
  const [bx1, by1] = w2s(b.max_x, b.min_y);
  ctx.fillStyle = '#171b21';
  ctx.fillRect(bx0, by0, bx1 - bx0, by1 - by0);
  drawGrid(b);
  ctx.strokeStyle = '#3a4150';
  ctx.lineWidth = 1;
  ctx.strokeRect(bx0 + 0.5, by0 + 0.5, bx1 - bx0, by1 - by0);

  if ($('ov-aoi').checked) drawAoi();

  // Walls.
  ctx.strokeStyle = '#c9ced8';
  ctx.lineWidth = Math.min(6, Math.max(2, 0.4 * sc));
  ctx.lineCap = 'round';
  ctx.beginPath();
  for (const wl of walls()) {
    const [x0, y0] = w2s(wl.a[0], wl.a[1]);
    const [x1, y1] = w2s(wl.b[0], wl.b[1]);
    ctx.moveTo(x0, y0);
    ctx.lineTo(x1, y1);
  }
  ctx.stroke();

  // Obstacles (the one being dragged follows the pointer).
  for (const o of obstacles()) {
    let [x, y] = w2s(o.center[0], o.center[1]);
    const dragging = pointer.drag && pointer.drag.kind === 'obstacle' && pointer.drag.o === o && pointer.drag.moved;
    if (dragging) [x, y] = [pointer.drag.ex, pointer.drag.ey];
    ctx.beginPath();
    ctx.arc(x, y, Math.max(2, o.radius * sc), 0, Math.PI * 2);
    ctx.fillStyle = dragging ? 'rgba(120,130,150,.35)' : '#2b313c';
    ctx.fill();
    ctx.strokeStyle = o === pointer.hoverObstacle || dragging ? '#4fa3ff' : '#59627a';
    ctx.lineWidth = o === pointer.hoverObstacle || dragging ? 2 : 1.2;
    ctx.stroke();
  }
  if (pointer.tool === 'obstacle' && pointer.mouse && !pointer.drag && !pointer.hoverObstacle) {
    const r = Math.max(0.5, parseFloat($('obstacle-radius').value) || 6) * sc;
    ctx.beginPath();
    ctx.arc(pointer.mouse[0], pointer.mouse[1], Math.max(2, r), 0, Math.PI * 2);
    ctx.setLineDash([4, 4]);
    ctx.strokeStyle = '#4fa3ff';
    ctx.lineWidth = 1;
    ctx.stroke();
    ctx.setLineDash([]);
  }

  drawFlow(sc);
  drawAvoidance(sc, 'planes'); // under the agents, so that the neighbours stay visible
  drawAgents(sc);
  drawAvoidance(sc, 'arrows');
  drawMoveTarget();

  // Selection box.
  if (pointer.drag && pointer.drag.kind === 'box') {
    const d = pointer.drag;
    ctx.fillStyle = 'rgba(79,163,255,.12)';
    ctx.strokeStyle = '#4fa3ff';
    ctx.lineWidth = 1;
    ctx.fillRect(d.sx, d.sy, d.ex - d.sx, d.ey - d.sy);
    ctx.strokeRect(d.sx + 0.5, d.sy + 0.5, d.ex - d.sx, d.ey - d.sy);
  }
  drawScale(W, H);
  requestAnimationFrame(draw);
}

function drawGrid(b) {
  const sc = scale();
  // A step of 1, 2 or 5 × 10^k world units, at least 40 px apart.
  const raw = 40 / sc;
  const p = 10 ** Math.floor(Math.log10(raw));
  const stepW = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
  ctx.strokeStyle = '#1e232b';
  ctx.lineWidth = 1;
  ctx.beginPath();
  const v = visibleRect();
  for (let x = Math.ceil(Math.max(b.min_x, v.min_x) / stepW) * stepW; x <= Math.min(b.max_x, v.max_x); x += stepW) {
    const [sx] = w2s(x, 0);
    const [, y0] = w2s(0, b.max_y);
    const [, y1] = w2s(0, b.min_y);
    ctx.moveTo(Math.round(sx) + 0.5, y0);
    ctx.lineTo(Math.round(sx) + 0.5, y1);
  }
  for (let y = Math.ceil(Math.max(b.min_y, v.min_y) / stepW) * stepW; y <= Math.min(b.max_y, v.max_y); y += stepW) {
    const [, sy] = w2s(0, y);
    const [x0] = w2s(b.min_x, 0);
    const [x1] = w2s(b.max_x, 0);
    ctx.moveTo(x0, Math.round(sy) + 0.5);
    ctx.lineTo(x1, Math.round(sy) + 0.5);
  }
  ctx.stroke();
  own.gridStep = stepW;
}

function drawScale(W, H) {
  const len = own.gridStep * scale();
  const x = W - 20 - len;
  const y = H - 14;
  ctx.strokeStyle = '#8a93a3';
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(x, y - 4);
  ctx.lineTo(x, y);
  ctx.lineTo(x + len, y);
  ctx.lineTo(x + len, y - 4);
  ctx.stroke();
  ctx.fillStyle = '#8a93a3';
  ctx.font = '11px system-ui, sans-serif';
  ctx.textAlign = 'center';
  ctx.fillText(`${own.gridStep} m`, x + len / 2, y - 5);
  ctx.textAlign = 'start';
}

function drawAoi() {
  const w = selectedWorld();
  const s = w.aoi_cell_size;
  ctx.lineWidth = 1;
  for (let c = 0; c < w.cols * w.rows; c++) {
    const col = c % w.cols;
    const row = Math.floor(c / w.cols);
    const x0 = w.bounds.min_x + col * s;
    const y0 = w.bounds.min_y + row * s;
    const [sx0, sy1] = w2s(x0, y0);
    const [sx1, sy0] = w2s(x0 + s, y0 + s);
    if (isSubscribed(c)) {
      ctx.fillStyle = 'rgba(79,163,255,.06)';
      ctx.fillRect(sx0, sy0, sx1 - sx0, sy1 - sy0);
      ctx.strokeStyle = 'rgba(79,163,255,.45)';
    } else {
      ctx.strokeStyle = 'rgba(255,255,255,.06)';
    }
    ctx.strokeRect(sx0 + 0.5, sy0 + 0.5, sx1 - sx0 - 1, sy1 - sy0 - 1);
  }
}

function drawAgents(sc) {
  const now = performance.now();
  const running = !!restInfo() && !isPaused();
  const showVel = $('ov-vel').checked;
  const showNbr = $('ov-nbr').checked;
  const showIds = $('ov-ids').checked && sc > 6;
  const period = 1000 / tickRate();
  const { pos_step: ps, vel_step: vs } = quant();
  const v = visibleRect();
  const margin = 5;
  for (const [cellId, cell] of heldCells()) {
    // Dead reckoning between frames: at most one tick ahead, and not while paused.
    const age = running ? Math.min(now - (cellSeenAt(cellId) || now), period) / 1000 : 0;
    for (const a of cell.agents) {
      const vx = a.vel[0] * vs;
      const vy = a.vel[1] * vs;
      const x = a.pos[0] * ps + vx * age;
      const y = a.pos[1] * ps + vy * age;
      if (x < v.min_x - margin || x > v.max_x + margin || y < v.min_y - margin || y > v.max_y + margin) continue;
      const [sx, sy] = w2s(x, y);
      const radius = agentRadius(a.group) || 0.5;
      const rpx = Math.max(3, radius * sc);
      const ang = (a.orient * Math.PI * 2) / 65536;
      const selected = isSelected(a.id);
      const color = groupColor(a.group);
      if (showNbr && (selected || selectionSize() === 0)) {
        const name = groupName(a.group);
        const nr = (name && neighborRadius(name)) || 3;
        ctx.beginPath();
        ctx.arc(sx, sy, nr * sc, 0, Math.PI * 2);
        ctx.strokeStyle = 'rgba(255,255,255,.12)';
        ctx.lineWidth = 1;
        ctx.stroke();
      }
      if (showVel && (vx || vy)) {
        ctx.beginPath();
        ctx.moveTo(sx, sy);
        ctx.lineTo(sx + vx * sc * 0.5, sy - vy * sc * 0.5);
        ctx.strokeStyle = 'rgba(255,255,255,.35)';
        ctx.lineWidth = 1;
        ctx.stroke();
      }
      // An oriented dart: nose along the heading.
      const c = Math.cos(ang);
      const s = Math.sin(ang);
      const nose = rpx * 1.6;
      const back = rpx;
      ctx.beginPath();
      ctx.moveTo(sx + c * nose, sy - s * nose);
      ctx.lineTo(sx - c * back - s * back * 0.9, sy + s * back - c * back * 0.9);
      ctx.lineTo(sx - c * back * 0.4, sy + s * back * 0.4);
      ctx.lineTo(sx - c * back + s * back * 0.9, sy + s * back + c * back * 0.9);
      ctx.closePath();
      ctx.fillStyle = color;
      ctx.fill();
      if (selected) {
        ctx.beginPath();
        ctx.arc(sx, sy, rpx * 1.7 + 2, 0, Math.PI * 2);
        ctx.strokeStyle = 'rgba(255,255,255,.85)';
        ctx.lineWidth = 1;
        ctx.stroke();
      }
      const mark = stuckMark(a.id);
      if (mark) {
        ctx.beginPath();
        ctx.arc(sx, sy, rpx * 1.7 + 4, 0, Math.PI * 2);
        ctx.setLineDash(mark === 'stuck' ? [] : [3, 3]);
        ctx.strokeStyle = 'rgba(230,60,60,.9)';
        ctx.lineWidth = 2;
        ctx.stroke();
        ctx.setLineDash([]);
      }
      const t = arrivedAt(a.id);
      if (t !== undefined && now - t < 1500) {
        const k = (now - t) / 1500;
        ctx.beginPath();
        ctx.arc(sx, sy, rpx * 2 + 2 + k * 14, 0, Math.PI * 2);
        ctx.strokeStyle = `rgba(95,211,141,${1 - k})`;
        ctx.lineWidth = 2;
        ctx.stroke();
      }
      if (showIds) {
        ctx.fillStyle = '#8a93a3';
        ctx.font = '10px system-ui, sans-serif';
        ctx.fillText(String(a.id), sx + rpx + 3, sy - rpx - 2);
      }
    }
  }
}

function drawMoveTarget() {
  const t = moveTarget();
  if (!t) return;
  const age = performance.now() - t.t;
  const [x, y] = w2s(t.x, t.y);
  const pending = awaitedArrivals();
  if (!pending && age > 3000) return;
  const pulse = 6 + 3 * Math.sin(age / 150);
  ctx.strokeStyle = '#5fd38d';
  ctx.lineWidth = 2;
  ctx.beginPath();
  ctx.arc(x, y, pulse, 0, Math.PI * 2);
  ctx.moveTo(x - 12, y);
  ctx.lineTo(x + 12, y);
  ctx.moveTo(x, y - 12);
  ctx.lineTo(x, y + 12);
  ctx.stroke();
}
