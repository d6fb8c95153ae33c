// World <-> screen transforms, fit, zoom and pan.

import { canvas, S } from './state.js';
import { updateSubscription } from './stream.js';

// View transform: world y points up, canvas y down

export function w2s(x, y) {
  const v = S.view;
  return [(x - v.cx) * v.scale + canvas.clientWidth / 2, canvas.clientHeight / 2 - (y - v.cy) * v.scale];
}
export function s2w(sx, sy) {
  const v = S.view;
  return [(sx - canvas.clientWidth / 2) / v.scale + v.cx, (canvas.clientHeight / 2 - sy) / v.scale + v.cy];
}

export function fit() {
  if (!S.world || !canvas.clientWidth) return;
  const b = S.world.bounds;
  const w = b.max_x - b.min_x;
  const h = b.max_y - b.min_y;
  S.view.cx = (b.min_x + b.max_x) / 2;
  S.view.cy = (b.min_y + b.max_y) / 2;
  S.view.scale = Math.min((canvas.clientWidth - 20) / w, (canvas.clientHeight - 20) / h);
  S.fitted = true;
  updateSubscription();
}

export function zoomAt(sx, sy, factor) {
  const [wx, wy] = s2w(sx, sy);
  S.view.scale = Math.min(400, Math.max(0.01, S.view.scale * factor));
  const [nx, ny] = s2w(sx, sy);
  S.view.cx += wx - nx;
  S.view.cy += wy - ny;
  updateSubscription();
}

export function pan(dxPx, dyPx) {
  S.view.cx -= dxPx / S.view.scale;
  S.view.cy += dyPx / S.view.scale;
  updateSubscription();
}
