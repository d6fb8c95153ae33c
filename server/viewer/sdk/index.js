// steerd-client: the TypeScript / JavaScript SDK of steerd (wire protocol v8).
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)
export * from './codec.js';
export * from './cell.js';
export * from './clock.js';
export * from './view.js';
export * from './client.js';
