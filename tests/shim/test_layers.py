#!/usr/bin/env python3
"""test_layers.py - the shim's files call each other in one direction: from
each object file of libtpaudit.so (nm: the symbols it defines and the ones
it needs), an edge A -> B when A calls or reads something B defines; any
cycle among the files fails, with the files on it.  Prints the files in
layers, callers first (the order docs/DESIGN.md shows).

usage: test_layers.py OBJECT_DIR SOURCE,SOURCE,...  (the target's sources)
"""
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, needed = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            needed.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCGSV":
            defined.add(parts[2])
    return defined, needed


def graph(objdir, sources):
    files = {}
    for src in sources:
        name = os.path.basename(src)
        if name.endswith(".c"):
            files[name] = symbols(os.path.join(objdir, name + ".o"))
    owner = {sym: f for f, (defined, _) in files.items() for sym in defined}
    return {f: sorted({owner[s] for s in needed if s in owner and owner[s] != f}) for f, (_, needed) in files.items()}


def cycles(edges):
    """Tarjan's strongly connected components with more than one file."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layers(edges):
    """Callers first: a file's layer is one more than its deepest caller's."""
    depth = {}

    def below(v):  # longest path down from v
        if v not in depth:
            depth[v] = 0
            depth[v] = 1 + max((below(w) for w in edges[v]), default=-1)
        return depth[v]

    for v in edges:
        below(v)
    top = max(depth.values(), default=0)
    return [sorted(v for v in edges if depth[v] == d) for d in range(top, -1, -1)]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    edges = graph(sys.argv[1], [s for s in sys.argv[2].replace(";", ",").split(",") if s])
    found = cycles(edges)
    for comp in found:
        calls = [f"{a} -> {b}" for a in comp for b in edges[a] if b in comp]
        print(f"FAIL: files calling each other in a circle: {', '.join(calls)}", file=sys.stderr)
    if found:
        return 1
    for i, layer in enumerate(layers(edges)):
        print(f"layer {i}: {' '.join(layer)}")
    print("PASS: no circle among", len(edges), "files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
