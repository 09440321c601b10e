"""Opens a `tpaudit report --format memory-viz` snapshot in PyTorch's own
viewer, offline, in headless Chromium: a screenshot, and the check that the
viewer loaded it (its legend lists the owner categories, no script error).

The viewer is not part of tpaudit: give the path of a `MemoryViz.js`
(torch/utils/viz/MemoryViz.js of a PyTorch checkout; torch's wheels load it
from a CDN) and of a d3 v5 bundle (d3.v5.min.js, e.g. from the mpld3 wheel).
The page made here inlines both, with MemoryViz.js's five CDN imports read
from the d3 bundle's global instead, and calls its add_local_files() on the
snapshot, as torch.cuda._memory_viz's own HTML does.

usage: python3 scripts/memviz_view.py MEMORYVIZ_JS D3_JS SNAPSHOT OUT_PNG
           [--view "Active Memory Timeline"|"Allocator State History"|...]
Prints the categories of the viewer's legend; exit 1 when a timeline view
drew none, or the page reported an error, 2 on bad arguments."""
import argparse
import base64
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

D3_NAMES = "{axisLeft, scaleLinear, zoom, zoomIdentity, brushX}"
PROBE = """<script>
window.addEventListener('error', e => document.body.setAttribute('data-error', String(e.message)));
window.addEventListener('unhandledrejection', e => document.body.setAttribute('data-error', String(e.reason)));
setTimeout(() => document.body.setAttribute('data-legend', JSON.stringify(
  [...document.querySelectorAll('svg text[font-family="helvetica"]')].map(t => t.textContent))), 3000);
</script>"""


def viewer_module(source):
    """MemoryViz.js with its CDN imports taken from the d3 global."""
    lines = [ln for ln in source.splitlines() if not re.match(r"\s*import .* from \"https://", ln)]
    if len(lines) != len(source.splitlines()) - 5:
        raise ValueError("MemoryViz.js does not have the five CDN imports this script replaces")
    body = "\n".join(lines).replace("export function", "function")
    return "const d3 = window.d3;\nconst %s = window.d3;\n%s\nwindow.tpauditAddLocalFiles = add_local_files;\n" % (
        D3_NAMES, body)


def page(viewer_js, d3_js, snapshot, view):
    files = json.dumps([{"name": snapshot.name, "base64": base64.b64encode(snapshot.read_bytes()).decode()}])
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>%s\n<script>%s</script>\n"
            "<script type=\"module\">\n%s\nwindow.tpauditAddLocalFiles(%s, %s);\n</script></body></html>\n"
            % (PROBE, d3_js, viewer_module(viewer_js), files, json.dumps(view)))


def chromium(url, tmp, *flags):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise FileNotFoundError("no chromium on PATH (scripts/setup.sh installs it)")
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=%s" % (tmp / "profile"),
                           "--window-size=1400,1000", "--virtual-time-budget=8000", *flags, url],
                          capture_output=True, text=True, timeout=180)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("memoryviz_js", type=Path)
    ap.add_argument("d3_js", type=Path)
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("out_png", type=Path)
    ap.add_argument("--view", default="Active Memory Timeline")
    a = ap.parse_args()
    for p in (a.memoryviz_js, a.d3_js, a.snapshot):
        if not p.is_file():
            print("memviz_view: %s: not a file" % p, file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        html = tmp / "view.html"
        html.write_text(page(a.memoryviz_js.read_text(), a.d3_js.read_text(), a.snapshot, a.view))
        dom = chromium(html.as_uri(), tmp, "--dump-dom").stdout
        chromium(html.as_uri(), tmp, "--screenshot=%s" % a.out_png.resolve())
    error = re.search(r'data-error="([^"]*)"', dom)
    legend = re.search(r"data-legend=\"([^\"]*)\"", dom)
    categories = json.loads(legend.group(1).replace("&quot;", '"')) if legend else []
    print("legend: %s" % ", ".join(categories))
    if error:
        print("memviz_view: the viewer reported: %s" % error.group(1), file=sys.stderr)
    if not a.out_png.is_file():
        print("memviz_view: chromium wrote no screenshot", file=sys.stderr)
    legend_drawn = categories or a.view == "Allocator State History"  # that view has no legend
    return 1 if error or not legend_drawn or not a.out_png.is_file() else 0


if __name__ == "__main__":
    sys.exit(main())
