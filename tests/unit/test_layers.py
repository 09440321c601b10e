#!/usr/bin/env python3
"""test_layers.py - the tree's C folders stand on floors and call only down,
no files call each other in a circle, and the probe's Python modules
(python/) import no circle and nothing above their floor either.  From the
built object files (nm: the symbols each defines and the ones it needs), an
edge A -> B when file A calls or reads something file B defines; and from
the sources what nm cannot see: A -> B when file A uses a macro or enum
constant that header B.h defines (B.h counting as B.c when an object is
built from B.c, else as a file of its own).  It fails on any circle of
files, on any edge from a folder to one on its own floor or above it, and
on an #include of a header of such a folder.  FLOORS is the allowed order,
the same as docs/DESIGN.md's ("Map").  Prints each folder's files in
layers, callers first.

The Python side reads every import statement of python/ (those inside
functions too: a lazy import closes a circle as surely once it runs), an
edge A -> B when module A imports module B of python/ (`from P import n`
takes P.n when that is a module, else P; for circles a package's own
__init__ is not a file its submodules import, for the floors it is: see
PY_ENTRY_POINTS).

usage: test_layers.py SOURCE_DIR BUILD_DIR OBJECT_LIST
  OBJECT_LIST: a file naming the object files to read, one a line (the
  targets' $<TARGET_OBJECTS>, tests/unit/CMakeLists.txt).
"""
import ast
import os
import re
import subprocess
import sys

# Top floor first.  A folder may call only folders on lower floors; the
# folders of one floor never call each other.  tprt (kernels/) is a program
# of its own beside tpaudit: its floors share the numbers, never a link.
FLOORS = [
    ("cli", "kernels/bench", "kernels/tests"),  # the tpaudit binary: its verbs; tprt's benches and tests
    ("launcher",),  # tpaudit run: the target under the shim
    ("analyzer",),  # databases (or a JSON report) into one report
    ("reports", "shim", "kernels/cuda"),  # renderers; libtpaudit.so; tprt's CUDA backend
    ("rules", "kernels"),  # the finding rules and kinds table; tprt's CPU kernels and model
    ("common",),  # the escapers, the command line's exit codes and option helpers
]
FLOOR = {folder: len(FLOORS) - i for i, row in enumerate(FLOORS) for folder in row}


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, needed = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            needed.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCGSVW":
            defined.add(parts[2])
    return defined, needed


def libc_names():
    """The names libc defines: the shim defines some of them too (its interposers), and a
    program that calls one calls libc's, not the shim."""
    libc = subprocess.run(["cc", "-print-file-name=libc.so.6"], capture_output=True, text=True).stdout.strip()
    out = subprocess.run(["nm", "-D", "--defined-only", libc], capture_output=True, text=True).stdout
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()}
    if "malloc" not in names:
        sys.exit(f"FAIL: cannot read the names libc defines (cc -print-file-name=libc.so.6 gave {libc!r})")
    return names


def source_of(obj, source_dir, build_dir):
    """<build>/<dir>/CMakeFiles/<target>.dir/<path>.o is <source>/<dir>/<path>, '__' standing for '..'."""
    rel = os.path.relpath(obj, build_dir).split(os.sep)
    at = rel.index("CMakeFiles")
    path = [".." if p == "__" else p for p in rel[: at] + rel[at + 2 :]]
    return os.path.relpath(os.path.normpath(os.path.join(source_dir, *path))[: -len(".o")], source_dir)


def folder_of(path):
    return max((f for f in FLOOR if path.startswith(f + "/")), key=len, default=None)


def graph(source_dir, build_dir, objects):
    """Files (by source path, the symbols of each object built from it) and their edges, each with a symbol."""
    files = {}
    for obj in objects:
        src = source_of(obj, source_dir, build_dir)
        if folder_of(src) is None:
            sys.exit(f"FAIL: {src} is in no folder of the floors' table (FLOORS)")
        defined, needed = symbols(obj)
        have = files.setdefault(src, (set(), set()))
        have[0].update(defined)
        have[1].update(needed)
    owners = {}
    for f, (defined, _) in files.items():
        for sym in defined:
            owners.setdefault(sym, set()).add(f)
    libc = libc_names()
    edges = {f: {} for f in files}
    for f, (_, needed) in files.items():
        for sym in sorted(needed):
            found = owners.get(sym, set())
            # The same name in two programs (the shim's tpa_db_close, the CLI's): a file's own folder's first.
            same = {o for o in found if folder_of(o) == folder_of(f)}
            for owner in same or (set() if sym in libc else found):
                if owner != f:
                    edges[f].setdefault(owner, sym)
    return edges


_COMMENT_OR_TEXT = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _code(text):
    """C text without its comments and string or character literals (their words are no names)."""
    return _COMMENT_OR_TEXT.sub(lambda m: " " if m.group(0)[0] == "/" else '""', text)


def header_names(code):
    """The names a header defines that no object file shows and that carry
    code or values: its macros and enum constants.  (A struct or typedef
    declared beside the functions that fill it is data both sides share,
    not a call, and is left out.)"""
    names = set(re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)", code, re.M))
    for body in re.findall(r"\benum\b[^{;]*\{([^}]*)\}", code):
        names.update(m.group(1) for m in re.finditer(r"(?:^|,)\s*([A-Za-z_]\w*)", body))
    return names


def source_files(source_dir):
    """The .c and .h files of the floors' folders, relative to source_dir."""
    found = []
    for top in sorted({f.split("/")[0] for f in FLOOR}):
        for folder, dirs, files in os.walk(os.path.join(source_dir, top)):
            dirs.sort()
            found += [os.path.relpath(os.path.join(folder, f), source_dir) for f in sorted(files) if f.endswith((".c", ".h"))]
    return [f for f in found if folder_of(f)]


def header_edges(source_dir, edges):
    """Adds to `edges` what nm cannot see: a file using a macro or enum
    constant of a header depends on that header's file (its .c of the same
    name when the objects have one, else the header itself), with the name.
    Returns them and, apart, each file's #include "x.h" as an edge to x.h's
    file (for the floors: a header shared by a folder's files is no circle,
    but one included from a folder above is a step up)."""
    files = source_files(source_dir)
    code, includes = {}, {}
    for f in files:
        with open(os.path.join(source_dir, f), errors="replace") as fh:
            text = fh.read()
        code[f] = _code(text)
        includes[f] = re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M)
    headers = [f for f in files if f.endswith(".h")]
    include_edges = {}

    def unit(path):
        twin = path[: -len(".h")] + ".c"
        return twin if path.endswith(".h") and twin in edges else path

    owners = {}
    for h in headers:
        for name in header_names(code[h]):
            owners.setdefault(name, set()).add(h)
    for f in files:
        here = edges.setdefault(unit(f), {})
        own = header_names(code[f])
        for name in sorted(set(re.findall(r"[A-Za-z_]\w*", code[f])) - own):
            found = owners.get(name, set())
            same = {h for h in found if folder_of(h) == folder_of(f)}
            for h in same or found:
                if unit(h) != unit(f):
                    here.setdefault(unit(h), f"{name}, {h}")
        for included in includes[f]:
            near = os.path.normpath(os.path.join(os.path.dirname(f), included))
            target = near if near in code else next((h for h in headers if h.endswith("/" + included)), None)
            if target and unit(target) != unit(f):
                include_edges.setdefault(unit(f), {}).setdefault(unit(target), f'#include "{included}"')
    for f in list(edges):
        for g in edges[f]:
            edges.setdefault(g, {})
    return edges, include_edges


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


def python_modules(source_dir):
    """{dotted module name: its file, relative to source_dir} of the .py files under python/."""
    root = os.path.join(source_dir, "python")
    mods = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                parts = os.path.relpath(os.path.join(folder, f), root)[: -len(".py")].split(os.sep)
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                mods[name] = os.path.relpath(os.path.join(folder, f), source_dir)
    return mods


def python_imports(name, path, tree):
    """(module name imported, the statement's text) for every import statement of tree."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".") if package else []
                up = up[: len(up) - (node.level - 1)] if node.level > 1 else up
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                yield (base, f"from {'.' * node.level}{node.module or ''} import {alias.name}"), alias.name


# The Python floors, top first: the entry points (nothing imports them),
# the package's API (tpaudit/__init__.py: only entry points import it), and
# the probe's modules, which import only each other.
PY_ENTRY_POINTS = ("python/sitecustomize.py", "python/tpaudit/__main__.py", "python/tpaudit/pytest_plugin.py")
PY_PACKAGE_API = "python/tpaudit/__init__.py"


def python_floor(path):
    return 3 if path in PY_ENTRY_POINTS else 2 if path == PY_PACKAGE_API else 1


def python_upward(edges):
    """Imports of a module on the same Python floor or above (the probe's modules among themselves aside)."""
    return [f"{a} -> {b} ({text})" for a in sorted(edges) for b, text in sorted(edges[a].items())
            if python_floor(b) >= python_floor(a) and python_floor(a) > 1 or python_floor(b) > python_floor(a)]


def python_graph(source_dir, with_ancestors=False):
    """The modules of python/ and their import edges, each with the statement
    (with_ancestors: a submodule's import of its own package counts too, as
    the floors see it; a circle does not run through it)."""
    mods = python_modules(source_dir)
    edges = {path: {} for path in mods.values()}
    for name, path in mods.items():
        with open(os.path.join(source_dir, path)) as f:
            tree = ast.parse(f.read(), path)
        ancestors = {name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)}
        for found in python_imports(name, path, tree):
            if isinstance(found[0], tuple):
                (base, text), member = found
                target = f"{base}.{member}" if f"{base}.{member}" in mods else base
            else:
                target, text = found
            if target in mods and target != name and (with_ancestors or target not in ancestors):
                edges[path].setdefault(mods[target], text)
    return edges


def upward(edges):
    """Edges from a folder to one on its own floor or above (not within one folder)."""
    bad = []
    for a in sorted(edges):
        for b, sym in sorted(edges[a].items()):
            fa, fb = folder_of(a), folder_of(b)
            if fa != fb and FLOOR[fb] >= FLOOR[fa]:
                bad.append(f"{a} -> {b} ({sym}): {fa}/ is on floor {FLOOR[fa]}, {fb}/ on floor {FLOOR[fb]}")
    return bad


def layers(files, edges):
    """Callers first: a file's layer is one more than its deepest callee's, counted inside its folder."""
    depth = {}

    def below(v):  # longest path down from v among `files`
        if v not in depth:
            depth[v] = 0
            depth[v] = 1 + max((below(w) for w in edges[v] if w in files), default=-1)
        return depth[v]

    for v in files:
        below(v)
    top = max(depth.values(), default=0)
    return [sorted(os.path.basename(v) for v in files if depth[v] == d) for d in range(top, -1, -1)]


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    source_dir, build_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with open(sys.argv[3]) as f:
        objects = sorted({line.strip() for line in f if line.strip()})
    edges, includes = header_edges(source_dir, graph(source_dir, build_dir, objects))
    failures = []
    for comp in cycles(edges):
        calls = [f"{a} -> {b} ({edges[a][b]})" for a in comp for b in edges[a] if b in comp]
        failures.append(f"files calling each other in a circle: {', '.join(calls)}")
    failures += [f"a call up the floors: {e}" for e in upward(edges)]
    failures += [f"an include up the floors: {e}" for e in upward(includes)]
    imports = python_graph(source_dir)
    for comp in cycles(imports):
        steps = [f"{a} -> {b} ({imports[a][b]})" for a in comp for b in imports[a] if b in comp]
        failures.append(f"python modules importing each other in a circle: {', '.join(steps)}")
    failures += [f"a python import up the floors: {e}" for e in python_upward(python_graph(source_dir, True))]
    for line in failures:
        print(f"FAIL: {line}", file=sys.stderr)
    if failures:
        return 1
    for row in FLOORS:
        for folder in row:
            files = {f for f in edges if folder_of(f) == folder}
            if files:
                print(f"floor {FLOOR[folder]} {folder}/: {'  |  '.join(' '.join(l) for l in layers(files, edges))}")
    print(f"PASS: {len(edges)} files in {len({folder_of(f) for f in edges})} folders, no circle, no call up;"
          f" {len(imports)} python modules, no import circle, none up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
