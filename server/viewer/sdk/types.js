// The wire messages (client-proto/PROTOCOL.md §5) as TypeScript types, in their JSON form (§4).
// Binary frames decode to the same shapes (see codec.ts for the one difference: base indices).
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)
export {};
