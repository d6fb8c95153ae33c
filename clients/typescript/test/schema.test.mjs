// One schema, three codecs: the encoder/decoder tables of this SDK (`WIRE_TABLES`) equal
// steer-proto's machine-readable description of every message and field
// (client-proto/schema.json, generated from the Rust wire types). A field added in Rust changes
// that file and fails this test until the codec follows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WIRE_TABLES, PROTOCOL_VERSION } from '../dist/index.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const schema = JSON.parse(readFileSync(join(root, 'client-proto/schema.json'), 'utf8'));

/** The codec's type in the schema's grammar (defaults dropped; `checksum` is an optional one). */
function norm(t) {
  if (typeof t === 'string') return t === 'checksum' ? { opt: 'checksum' } : t;
  if ('struct' in t) return { struct: t.struct.map(([n, ty]) => [n, norm(ty)]) };
  if ('opt' in t) return { opt: norm(t.opt) };
  if ('vec' in t) return { vec: norm(t.vec) };
  if ('tagged' in t) return { tagged: t.tagged.map(([tag, fields]) => [tag, fields.map(([n, ty]) => [n, norm(ty)])]) };
  if ('names' in t) return { names: [...t.names] };
  if ('packed' in t) return { packed: t.packed };
  throw new Error(`unknown codec type ${JSON.stringify(t)}`);
}

/** Every path where two types differ (for a readable failure). */
function diff(a, b, path, out) {
  if (JSON.stringify(a) === JSON.stringify(b)) return out;
  if (a && b && typeof a === 'object' && typeof b === 'object' && 'tagged' in a && 'tagged' in b) {
    const tags = (x) => x.tagged.map(([t]) => t);
    if (JSON.stringify(tags(a)) !== JSON.stringify(tags(b))) out.push(`${path}: variants ${tags(a)} vs ${tags(b)}`);
    a.tagged.forEach(([tag, fa], i) => {
      const fb = b.tagged[i]?.[1] ?? [];
      const names = (f) => f.map(([n]) => n).join(', ');
      if (names(fa) !== names(fb)) out.push(`${path}.${tag}: fields [${names(fa)}] vs [${names(fb)}]`);
      else fa.forEach(([n, ta], j) => diff(ta, fb[j][1], `${path}.${tag}.${n}`, out));
    });
    return out;
  }
  if (a && b && typeof a === 'object' && typeof b === 'object' && 'struct' in a && 'struct' in b) {
    const names = (f) => f.map(([n]) => n).join(', ');
    if (names(a.struct) !== names(b.struct)) out.push(`${path}: fields [${names(a.struct)}] vs [${names(b.struct)}]`);
    else a.struct.forEach(([n, ta], j) => diff(ta, b.struct[j][1], `${path}.${n}`, out));
    return out;
  }
  out.push(`${path}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  return out;
}

test('the schema is of the protocol version this SDK speaks', () => {
  assert.equal(schema.protocol_version, PROTOCOL_VERSION);
});

for (const side of ['client', 'server']) {
  test(`${side} messages: every variant, field and type of the codec equals client-proto/schema.json`, () => {
    const mine = norm(WIRE_TABLES[side]);
    assert.deepEqual(diff(mine, schema[side], side, []), []);
    assert.deepEqual(mine, schema[side]);
  });
}

test('the check fails on a drifted table (a field added in Rust)', () => {
  const drifted = structuredClone(schema.server);
  drifted.tagged.find(([t]) => t === 'pong')[1].push(['added_in_rust', 'u32']);
  assert.notDeepEqual(norm(WIRE_TABLES.server), drifted);
  assert.match(diff(norm(WIRE_TABLES.server), drifted, 'server', []).join('\n'), /pong: fields \[request_id, server_tick\] vs \[request_id, server_tick, added_in_rust\]/);
});
