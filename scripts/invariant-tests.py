#!/usr/bin/env python3
"""Every **Invariant:** paragraph of ARCHITECTURE.md names the test that checks it, and every
test it names exists: the names cannot rot.

    python3 scripts/invariant-tests.py [ARCHITECTURE.md]

A paragraph (from `**Invariant:**` to the next blank line, bullet or heading) must hold `(test: `a::b::name`)` or
`(tests: `…`, `…`)`. A name is a Rust path:
  - `it::file::name`            a test of server/tests/it/file.rs
  - `reliability::file::tNN_x`  a test function of tests/reliability/file.rs
  - `steer_proto::…::name`      a test of client-proto (src/ or tests/)
  - `module::…::name`           a test of the steerd library, server/src/module/…
and must be a function marked `#[test]` or `#[tokio::test]` (reliability: an `async fn`) in a
file whose path holds every module of the name but `tests` in that order. A name that is a
path ending in `.mjs`, `.js`, `.rs` or `.sh` must be a file. Exit status 1 on any fault.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_ATTR = re.compile(r'#\[(?:tokio::)?test\b')


def rust_files(top):
    for dp, _, fns in os.walk(os.path.join(ROOT, top)):
        for f in fns:
            if f.endswith('.rs'):
                yield os.path.join(dp, f)


def test_fns(path, reliability):
    """Names of the test functions of a file."""
    lines = open(path, encoding='utf-8').read().split('\n')
    out = set()
    for i, l in enumerate(lines):
        m = re.match(r'\s*(?:pub(?:\([^)]*\))?\s+)?(async\s+)?fn\s+([a-z0-9_]+)', l)
        if not m:
            continue
        if reliability and m.group(1) and re.match(r't\d\d_', m.group(2)):
            out.add(m.group(2))
        elif any(TEST_ATTR.search(lines[j]) for j in range(max(0, i - 4), i)):
            out.add(m.group(2))
    return out


def modules_of(path, base):
    rel = os.path.relpath(path, os.path.join(ROOT, base))[:-3].split(os.sep)
    return [p for p in rel if p not in ('mod', 'lib', 'main')]


def in_order(want, have):
    it = iter(have)
    return all(w in it for w in want)


def resolve(name, index):
    parts = name.split('::')
    head, fn = parts[0], parts[-1]
    mods = [p for p in parts[:-1] if p != 'tests']
    if head == 'it':
        bases, mods = ['server/tests/it'], mods[1:]
    elif head == 'reliability':
        bases, mods = ['tests/reliability'], mods[1:]
    elif head == 'steer_proto':
        bases, mods = ['client-proto/src', 'client-proto/tests'], mods[1:]
    else:
        bases = ['server/src']
    for base in bases:
        for path, fns in index(base):
            if fn in fns and in_order(mods, modules_of(path, base)):
                return True
    return False


def main():
    doc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'ARCHITECTURE.md')
    text = open(doc, encoding='utf-8').read()
    cache = {}

    def index(base):
        if base not in cache:
            rel = base == 'tests/reliability'
            cache[base] = [(p, test_fns(p, rel)) for p in rust_files(base)]
        return cache[base]

    faults, count, names = [], 0, 0
    lines = text.split('\n')
    for i, first in enumerate(lines):
        body = first.strip().lstrip('- ')
        if not body.startswith('**Invariant:**'):
            continue
        count += 1
        para = [body]
        for nxt in lines[i + 1:]:
            s = nxt.strip()
            if not s or s.startswith(('- ', '#', '**Invariant:**')):
                break
            para.append(s)
        para = ' '.join(para)
        line = i + 1
        cited = re.findall(r'\(tests?: ([^)]*)\)', para)
        if not cited:
            faults.append(f'{doc}:{line}: an invariant names no test: {body[:80]}…')
            continue
        for group in cited:
            for name in re.findall(r'`([^`]+)`', group):
                names += 1
                if re.search(r'\.(mjs|js|rs|sh)$', name):
                    ok = os.path.isfile(os.path.join(ROOT, name))
                else:
                    ok = resolve(name, index)
                if not ok:
                    faults.append(f'{doc}:{line}: no test `{name}`')
    for f in faults:
        print(f)
    print(f'invariants: {count}, tests named: {names}, faults: {len(faults)}')
    return 1 if faults or count == 0 else 0


if __name__ == '__main__':
    sys.exit(main())
