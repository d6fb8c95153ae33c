// World <-> screen transforms, fit, zoom and pan. Owns the view: which world point is at the
// canvas centre, the scale, and whether the view was fitted (or placed) since the world changed.

import { canvas } from './state.js';
import { updateSubscription } from './stream.js';
import { selectedWorld } from './world.js';

/** This module's own state. */
const own = {
  view: { cx: 0, cy: 0, scale: 2 }, // world point at the canvas centre, pixels per world unit
  fitted: false,
};

/** Pixels per world unit. */
export const scale = () => own.view.scale;
/** Whether the view was fitted to the world (or placed by `lookAt`) since `unfit`. */
export const isFitted = () => own.fitted;
/** The world changed: the next `fit` call (draw, selectWorld) fits the view again. */
export function unfit() {
  own.fitted = false;
}

// View transform: world y points up, canvas y down

export function w2s(x, y) {
  const v = own.view;
  return [(x - v.cx) * v.scale + canvas.clientWidth / 2, canvas.clientHeight / 2 - (y - v.cy) * v.scale];
}
export function s2w(sx, sy) {
  const v = own.view;
  return [(sx - canvas.clientWidth / 2) / v.scale + v.cx, (canvas.clientHeight / 2 - sy) / v.scale + v.cy];
}

export function fit() {
  const shown = selectedWorld();
  if (!shown || !canvas.clientWidth) return;
  const b = shown.bounds;
  const w = b.max_x - b.min_x;
  const h = b.max_y - b.min_y;
  own.view.cx = (b.min_x + b.max_x) / 2;
  own.view.cy = (b.min_y + b.max_y) / 2;
  own.view.scale = Math.min((canvas.clientWidth - 20) / w, (canvas.clientHeight - 20) / h);
  own.fitted = true;
  updateSubscription();
}

/** Centres the view on a world point at `scale` pixels per unit (tests and screenshots). */
export function lookAt(x, y, scalePx) {
  own.view = { cx: x, cy: y, scale: scalePx || own.view.scale };
  own.fitted = true;
  updateSubscription();
}

export function zoomAt(sx, sy, factor) {
  const [wx, wy] = s2w(sx, sy);
  own.view.scale = Math.min(400, Math.max(0.01, own.view.scale * factor));
  const [nx, ny] = s2w(sx, sy);
  own.view.cx += wx - nx;
  own.view.cy += wy - ny;
  updateSubscription();
}

export function pan(dxPx, dyPx) {
  own.view.cx -= dxPx / own.view.scale;
  own.view.cy += dyPx / own.view.scale;
  updateSubscription();
}
