#!/usr/bin/env python3
"""Files and functions a reader can hold: exits 1 and lists each offender.

  - any file under src/, tests/ or loadgen/ (the binary) over 700 lines (tests included: split
    them into modules);
  - any non-test Rust fn over 100 lines, counted from the line of its signature to the line of
    its closing brace. Test code is skipped: `#[cfg(test)]` items, files declared as test
    modules (`#[cfg(test)] mod tests;`), and everything under tests/.

ALLOWED names the functions still waiting to be split (path:fn); an entry that no longer needs
its exception is reported too, so the list only shrinks.

Usage: scripts/sizes.py [ROOT]   (python3, standard library only)
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imports import drop_tests, load, strip  # noqa: E402

MAX_FILE_LINES = 700
MAX_FN_LINES = 100

# Functions others are splitting while changing them; the lead empties this list.
ALLOWED = set()

FN = re.compile(r"\bfn\s+(\w+)")


def line_of(code, i):
    return code.count("\n", 0, i) + 1


def fn_spans(code):
    """(name, first line, last line) of every fn with a body in `code` (already stripped)."""
    out = []
    for m in FN.finditer(code):
        # The signature's end: the body's `{` or a bodiless `;` outside (), [] and <>.
        i, depth, n = m.end(), 0, len(code)
        while i < n:
            c = code[i]
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            elif depth == 0 and c in "{;":
                break
            i += 1
        if i >= n or code[i] == ";":
            continue
        d, j = 1, i + 1
        while j < n and d:
            if code[j] == "{":
                d += 1
            elif code[j] == "}":
                d -= 1
            j += 1
        out.append((m.group(1), line_of(code, m.start()), line_of(code, j - 1)))
    return out


def text_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for _ in f)
    except UnicodeDecodeError:
        return 0  # binary fixtures are not read by people


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.normpath(root)
    problems = []

    for top in ("src", "tests", "loadgen"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                path = os.path.join(folder, name)
                n = text_lines(path)
                if n > MAX_FILE_LINES:
                    problems.append(f"{os.path.relpath(path, root)}: {n} lines (limit {MAX_FILE_LINES})")

    used = set()
    files = [m.file for m in load(os.path.join(root, "src")).values()]
    for folder, _, names in os.walk(os.path.join(root, "loadgen")):
        files.extend(os.path.join(folder, n) for n in names if n.endswith(".rs"))
    for path in sorted(files):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            code, _ = drop_tests(strip(f.read()))
        for name, first, last in fn_spans(code):
            n = last - first + 1
            if n <= MAX_FN_LINES:
                continue
            key = f"{rel}:{name}"
            if key in ALLOWED:
                used.add(key)
                continue
            problems.append(f"{rel}:{first}: fn {name} is {n} lines (limit {MAX_FN_LINES})")

    for key in sorted(ALLOWED - used):
        problems.append(f"{key}: no longer over {MAX_FN_LINES} lines; remove it from ALLOWED in scripts/sizes.py")

    for p in problems:
        print(p)
    if problems:
        print(f"sizes.py: {len(problems)} offender(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
