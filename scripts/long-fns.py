#!/usr/bin/env python3
"""Functions a reader cannot hold: those over MAX_LINES lines (signature to closing brace) or
with more than MAX_PARAMS parameters (`self` not counted), outside tests. One line per
function: lines, parameters, file:line, name; then the count. Test code is left out: files
named tests.rs or under a tests/ or benches/ directory, `#[cfg(test)]` modules and items,
`#[test]` functions.

    python3 scripts/long-fns.py [--max-lines 100] [--max-params 6] [--check] [DIR ...]

DIR defaults to server/src client-proto/src loadtest/src. With --check the exit status is 1
when any function is listed.
"""
import argparse, os, re, sys

def mask(src):
    """`src` with comments, strings and char literals blanked (newlines kept), so that braces
    and parentheses in them do not count."""
    out, i, n = [], 0, len(src)
    def blank(s):
        return re.sub(r'[^\n]', ' ', s)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(blank(src[i:j])); i = j
        elif src.startswith('/*', i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith('/*', j): depth += 1; j += 2
                elif src.startswith('*/', j): depth -= 1; j += 2
                else: j += 1
            out.append(blank(src[i:j])); i = j
        elif c == 'r' and re.match(r'r#*"', src[i:i + 20]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == '_')):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(blank(src[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            out.append(blank(src[i:j + 1])); i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}') or a lifetime ('a): a lifetime has no closing quote.
            m = re.match(r"'(\\.[^']*|[^'\\])'", src[i:i + 12])
            if m:
                out.append(blank(m.group(0))); i += len(m.group(0))
            else:
                out.append(c); i += 1
        else:
            out.append(c); i += 1
    return ''.join(out)

def match(text, i, open_, close):
    """Index just past the bracket that closes the one at `i`."""
    depth = 0
    while i < len(text):
        ch = text[i]
        if ch == open_: depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0: return i + 1
        i += 1
    return len(text)

def test_spans(text):
    """(start, end) of `#[cfg(test)]` items and `#[test]` functions."""
    spans = []
    for m in re.finditer(r'#\[(cfg\(test\)|test)\]', text):
        j = m.end()
        # The item's body: its first `{` (a `mod x;` or `use` ends at `;` first).
        k = j
        while k < len(text) and text[k] not in '{;':
            k += 1
        if k < len(text) and text[k] == '{':
            spans.append((m.start(), match(text, k, '{', '}')))
    return spans

def params(plist):
    """Top-level parameters of a parameter list (without `self`)."""
    parts, depth, cur, prev = [], 0, '', ''
    for ch in plist:
        if ch in '([{<': depth += 1
        elif ch in ')]}' or (ch == '>' and prev != '-'): depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur); cur = ''
        else:
            cur += ch
        prev = ch
    parts.append(cur)
    parts = [p.strip() for p in parts if p.strip()]
    return [p for p in parts if not re.fullmatch(r'(&\s*(\'\w+\s+)?)?(mut\s+)?self(\s*:.*)?', p, re.S)]

def functions(path):
    src = open(path, encoding='utf-8').read()
    text = mask(src)
    skip = test_spans(text)
    for m in re.finditer(r'\bfn\s+([A-Za-z_][A-Za-z0-9_]*)\s*', text):
        if any(a <= m.start() < b for a, b in skip):
            continue
        i = m.end()
        if i < len(text) and text[i] == '<':
            depth, prev = 0, ''
            while i < len(text):
                ch = text[i]
                if ch == '<': depth += 1
                elif ch == '>' and prev != '-':
                    depth -= 1
                    if depth == 0: i += 1; break
                prev = ch; i += 1
            while i < len(text) and text[i].isspace(): i += 1
        if i >= len(text) or text[i] != '(':
            continue
        end = match(text, i, '(', ')')
        plist = text[i + 1:end - 1]
        k = end
        while k < len(text) and text[k] not in '{;':
            k += 1
        if k >= len(text) or text[k] == ';':
            continue  # a declaration without a body
        body_end = match(text, k, '{', '}')
        first = text.count('\n', 0, m.start()) + 1
        last = text.count('\n', 0, body_end - 1) + 1
        yield m.group(1), first, last - first + 1, len(params(plist))

def rust_files(root):
    for d, dirs, fs in os.walk(root):
        dirs[:] = [x for x in dirs if x not in ('tests', 'benches', 'target')]
        for f in sorted(fs):
            if f.endswith('.rs') and f != 'tests.rs':
                yield os.path.join(d, f)

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--max-lines', type=int, default=100)
    ap.add_argument('--max-params', type=int, default=6)
    ap.add_argument('--check', action='store_true')
    ap.add_argument('dirs', nargs='*', default=['server/src', 'client-proto/src', 'loadtest/src'])
    a = ap.parse_args()
    found = []
    for root in a.dirs:
        for f in sorted(rust_files(root)):
            for name, line, lines, n in functions(f):
                if lines > a.max_lines or n > a.max_params:
                    found.append((lines, n, f'{f}:{line}', name))
    found.sort(key=lambda r: (-r[0], -r[1], r[2]))
    for lines, n, where, name in found:
        print(f'{lines:5} lines {n:2} params  {where}  {name}')
    print(f'{len(found)} functions over {a.max_lines} lines or {a.max_params} parameters')
    return 1 if a.check and found else 0

if __name__ == '__main__':
    sys.exit(main())
