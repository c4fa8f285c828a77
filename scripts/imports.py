#!/usr/bin/env python3
"""Import loops in src/: exits 1 and prints each loop, with the line behind every step.

Two kinds of graph are checked, for every folder of modules at any depth:
  - the top-level modules (src/report/* counts as `report`), and
  - within a folder, its files and subfolders (src/report/text.rs is `text` in `report`;
    the folder's own mod.rs, or src/report.rs, is the node named after the folder).
An edge A -> B is any `crate::...`, `super::...`, `self::...` or child-module path in A's code
(use trees included) that names B or an item of B. Test code (`#[cfg(test)]` items and files
declared under `#[cfg(test)]`) is left out, as cargo-modules does by default. A `pub use` of a
module's own descendant (the facade of a mod.rs) is not an edge: names it re-exports resolve to
the module that defines them.

Usage: scripts/imports.py [--graph] [SRC_DIR]   (python3, standard library only)
"""

import os
import re
import sys


def strip(text):
    """Code with comments, strings and char literals blanked (newlines kept for line numbers)."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        return re.sub(r"[^\n]", " ", s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif re.match(r'(?:b?r)(#*)"', text[i:i + 300]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'(?:b?r)(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(blank(text[i:j]))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i:j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a, 'static).
            if i + 1 < n and text[i + 1] == "\\":
                j = text.find("'", i + 2)
                j = n if j < 0 else j + 1
                out.append(blank(text[i:j]))
                i = j
            elif i + 2 < n and text[i + 2] == "'":
                out.append(blank(text[i:i + 3]))
                i += 3
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def skip_item(code, i):
    """Index just past the item starting at or after `i`: up to `;` or its `{...}` block."""
    depth = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth == 0:
            return i + 1
        elif c == "{" and depth == 0:
            d = 1
            i += 1
            while i < n and d:
                if code[i] == "{":
                    d += 1
                elif code[i] == "}":
                    d -= 1
                i += 1
            return i
        i += 1
    return n


TEST_ATTR = re.compile(r"#\[cfg\((?:test|any\([^\]]*\btest\b[^\]]*\))\)\]")


def drop_tests(code):
    """Blanks every `#[cfg(test)]` item; returns the code and the names of test-only `mod x;`."""
    test_mods = set()
    while True:
        m = TEST_ATTR.search(code)
        if not m:
            return code, test_mods
        end = skip_item(code, m.end())
        d = re.match(r"\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code[m.end():end])
        if d:
            test_mods.add(d.group(1))
        code = code[:m.start()] + re.sub(r"[^\n]", " ", code[m.start():end]) + code[end:]


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of names; () is the crate root
        self.file = file
        self.children = set()
        self.reexports = {}  # name -> module path that defines it
        self.code = ""


def load(src):
    """Every module reachable from lib.rs (or main.rs) through `mod` declarations."""
    mods = {}
    root = next((os.path.join(src, f) for f in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, f))), None)
    if root is None:
        sys.exit(f"imports.py: no lib.rs or main.rs in {src}")
    todo = [((), root, src)]
    while todo:
        path, file, folder = todo.pop()
        m = Module(path, file)
        with open(file, encoding="utf-8") as f:
            m.code, test_mods = drop_tests(strip(f.read()))
        mods[path] = m
        for d in re.finditer(r"(?:^|[;}\s])(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", m.code):
            name = d.group(1)
            if name in test_mods:
                continue
            sub = os.path.join(folder, name)
            for cand, sub_folder in ((sub + ".rs", sub), (os.path.join(sub, "mod.rs"), sub)):
                if os.path.exists(cand):
                    m.children.add(name)
                    todo.append((path + (name,), cand, sub_folder))
                    break
    return mods


USE = re.compile(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);")
PATH = re.compile(r"(?<![\w:])((?:crate|super|self|[a-z_][a-z0-9_]*)(?:\s*::\s*(?:\w+))+)")


def use_paths(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] as lists of names."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    out = []

    def walk(prefix, s):
        # split top-level commas
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            if "{" in p:
                head, rest = p.split("{", 1)
                head = [x for x in head.split("::") if x]
                walk(prefix + head, rest[:-1] if rest.endswith("}") else rest)
            else:
                out.append(prefix + [x for x in p.split("::") if x and x != "*"])

    walk([], tree)
    return out


def resolve(mods, here, names):
    """The module a path names from module `here`, or None (an external crate, a local item)."""
    if not names:
        return None
    if names[0] == "crate":
        cur, rest = (), names[1:]
    elif names[0] == "super":
        cur, rest = here, names
        while rest and rest[0] == "super":
            cur, rest = cur[:-1], rest[1:]
    elif names[0] == "self":
        cur, rest = here, names[1:]
    elif names[0] in mods[here].children:
        cur, rest = here, names
    else:
        return None
    for name in rest:
        m = mods.get(cur)
        if m is None:
            break
        if name in m.children:
            cur = cur + (name,)
        else:
            return m.reexports.get(name, cur)
    return cur


def edges(mods):
    """(from, to) -> (file, line) of the first reference."""
    found = {}
    # Re-exports first, so paths through a facade resolve to the defining module.
    for _ in range(3):
        for path, m in mods.items():
            for u in USE.finditer(m.code):
                if not u.group(1):
                    continue
                for names in use_paths(u.group(2)):
                    target = resolve(mods, path, names[:-1]) if len(names) > 1 else None
                    if target is not None and target[: len(path)] == path and target != path:
                        alias = names[-1]
                        real = resolve(mods, path, names)
                        m.reexports[alias] = real if real is not None and real != path else target
    for path, m in mods.items():
        refs = []
        for u in USE.finditer(m.code):
            line = m.code.count("\n", 0, u.start()) + 1
            for names in use_paths(u.group(2)):
                target = resolve(mods, path, names)
                if u.group(1) and target is not None and target[: len(path)] == path:
                    continue  # a facade over its own children
                refs.append((target, line))
        no_use = USE.sub(lambda u: re.sub(r"[^\n]", " ", u.group(0)), m.code)
        for p in PATH.finditer(no_use):
            names = re.sub(r"\s+", "", p.group(1)).split("::")
            line = no_use.count("\n", 0, p.start()) + 1
            refs.append((resolve(mods, path, names), line))
        for target, line in refs:
            if target is None or target == path or target not in mods:
                continue
            found.setdefault((path, target), (m.file, line))
    return found


def folder_graphs(mods, found):
    """For each folder: child -> child edges, with the reference behind each."""
    graphs = {}
    for (a, b), where in found.items():
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        folder = a[:k]
        node = lambda p: p[k] if len(p) > k else "(" + ("::".join(folder) or "crate") + ")"
        na, nb = node(a), node(b)
        if na == nb:
            continue
        g = graphs.setdefault(folder, {})
        g.setdefault(na, {}).setdefault(nb, (a, b, where))
    return graphs


def cycles(g):
    """One shortest loop per strongly connected component."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(set(comp))

    sys.setrecursionlimit(10000)
    nodes = set(g) | {w for v in g for w in g[v]}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    loops = []
    for comp in comps:
        start = min(comp)
        # BFS from start back to start inside the component.
        prev, frontier, seen = {}, [start], {start}
        done = False
        while frontier and not done:
            nxt = []
            for v in frontier:
                for w in sorted(g.get(v, {})):
                    if w not in comp:
                        continue
                    if w == start:
                        prev[start] = v
                        done = True
                        break
                    if w not in seen:
                        seen.add(w)
                        prev[w] = v
                        nxt.append(w)
                if done:
                    break
            frontier = nxt
        path, v = [start], prev[start]
        while v != start:
            path.append(v)
            v = prev[v]
        path.append(start)
        loops.append((list(reversed(path)), sorted(comp)))
    return loops


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show = "--graph" in sys.argv[1:]
    src = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    src = os.path.normpath(src)
    mods = load(src)
    found = edges(mods)
    graphs = folder_graphs(mods, found)
    name = lambda p: "::".join(p) or "crate"
    if show:
        for folder in sorted(graphs):
            print(f"[{name(folder)}]")
            for a in sorted(graphs[folder]):
                print(f"  {a} -> {', '.join(sorted(graphs[folder][a]))}")
    bad = 0
    for folder in sorted(graphs):
        for loop, comp in cycles(graphs[folder]):
            bad += 1
            where = "the top-level modules" if not folder else f"src/{'/'.join(folder)}/"
            print(f"import loop among {where}: {' -> '.join(loop)}")
            if len(comp) > len(loop) - 1:
                print(f"  (all of these reach each other: {', '.join(comp)})")
            for a, b in zip(loop, loop[1:]):
                fa, fb, (file, line) = graphs[folder][a][b]
                print(f"  {a} -> {b}: {os.path.relpath(file)}:{line} uses {name(fb)}")
    n_edges = sum(len(t) for g in graphs.values() for t in g.values())
    if bad:
        print(f"imports.py: {bad} import loop(s); move what both sides need below both (see above)")
        sys.exit(1)
    print(f"imports.py: no import loop ({len(mods)} modules, {n_edges} edges in {len(graphs)} folder graphs)")


if __name__ == "__main__":
    main()
