#!/usr/bin/env python3
"""Import circles among server/src modules: the strongly connected components (more than one
file) of the graph file -> file it names by path (`crate::…`, `super::…`, a child module's
bare name), test modules (inline `#[cfg(test)] mod … { }` and `#[cfg(test)] mod …;` files)
left out. A glob import (`use super::*`) names no module and makes no edge. One line per
circle: its size and files.

    python3 scripts/import-circles.py [--exclude PREFIX]... [server/src]

--exclude PREFIX leaves out of the graph every module whose path (as printed, e.g.
`sim/behaviors`) is PREFIX or lies under it; may be given more than once. The issue's check
"no circle outside sim/behaviors" is `--exclude sim/behaviors`.
"""
import argparse, os, re, sys
ap = argparse.ArgumentParser(description='Import circles among the modules under ROOT.')
ap.add_argument('root', nargs='?', default='server/src')
ap.add_argument('--exclude', action='append', default=[], metavar='PREFIX',
                help='leave out the modules at or under this path (e.g. sim/behaviors)')
args = ap.parse_args()
root = args.root
excluded = [tuple(x.strip('/').split('/')) for x in args.exclude]
mods = {}  # module path tuple -> file
for d, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p = os.path.relpath(os.path.join(d, f), root)[:-3].split(os.sep)
        if p[-1] in ('mod', 'lib', 'main'): p = p[:-1]
        if any(tuple(p[:len(x)]) == x for x in excluded): continue
        mods[tuple(p)] = os.path.join(d, f)
def modpath(file):
    for k, v in mods.items():
        if v == file: return k
def resolve(parts):
    if any(tuple(parts[:len(x)]) == x for x in excluded): return None
    for n in range(len(parts), 0, -1):
        if tuple(parts[:n]) in mods: return tuple(parts[:n])
def expand(text):
    # a::{b, c::{d, e}} -> a::b, a::c::d, a::c::e
    out = []
    pat = re.compile(r'\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{')
    for m in pat.finditer(text):
        start = m.end(); depth = 1; j = start
        while j < len(text) and depth:
            depth += {'{': 1, '}': -1}.get(text[j], 0); j += 1
        inner = text[start:j-1]
        prefix = m.group(1) + m.group(2)
        parts, depth, cur = [], 0, ''
        for ch in inner:
            if ch == ',' and depth == 0: parts.append(cur); cur = ''; continue
            depth += {'{': 1, '}': -1}.get(ch, 0); cur += ch
        parts.append(cur)
        for p in parts:
            p = p.strip()
            if not p: continue
            sub = prefix + '::' + p
            if '{' in p: out += expand(sub)
            else: out.append(sub)
    return out
TEST_MOD = r'#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod (\w+)\s*'
def strip_tests(src):
    # Inline test modules (`#[cfg(test)] mod NAME { … }`), cut by brace matching.
    out, i = '', 0
    for m in re.finditer(TEST_MOD + r'\{', src):
        if m.start() < i: continue
        out += src[i:m.start()]
        j, depth = m.end(), 1
        while j < len(src) and depth:
            depth += {'{': 1, '}': -1}.get(src[j], 0); j += 1
        i = j
    return out + src[i:]
sources = {k: strip_tests(re.sub(r'//[^\n]*', '', open(f).read())) for k, f in mods.items()}
# Test-only files (`#[cfg(test)] mod NAME;`) are test modules too.
for k, f in list(mods.items()):
    for name in re.findall(TEST_MOD + ';', re.sub(r'//[^\n]*', '', open(f).read())):
        mods.pop(k + (name,), None); sources.pop(k + (name,), None)
edges = {}
for k, f in mods.items():
    src = sources[k]
    is_dir = os.path.basename(f) in ('mod.rs', 'lib.rs', 'main.rs')
    here = list(k)
    paths = re.findall(r'\b(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+', src) + expand(src)
    deps = set()
    for p in paths:
        parts = p.split('::')
        if parts[0] == 'crate': base = []; parts = parts[1:]
        elif parts[0] == 'self': base = here; parts = parts[1:]
        else:
            base = here
            while parts and parts[0] == 'super': base = base[:-1]; parts = parts[1:]
        r = resolve(base + parts)
        if r is not None and r != k: deps.add(r)
    # Child modules named by a bare path (`rest::health` in `http/mod.rs`).
    for m in mods:
        if len(m) == len(k) + 1 and m[:len(k)] == k and re.search(r'(?<![:\w])' + m[-1] + r'::', src):
            deps.add(m)
    edges[k] = deps
# Tarjan
idx, low, st, on, sccs, c = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in edges:
    if v not in idx: sc(v)
big = [sorted('/'.join(m) or 'lib' for m in s) for s in sccs if len(s) > 1]
for s in big:
    print(len(s), 'files:', ' '.join(s))
