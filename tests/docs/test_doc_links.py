"""Every link in README.md and docs/*.md, and in tprt's kernels/README.md
and kernels/docs/*.md, resolves: markdown links to local files, and every
path of a .md, .json or source file the text names (in backticks or bare).
A name resolves beside the doc that cites it or from the repository root.  Run as: python test_doc_links.py <repo root>."""
import re
import sys
from pathlib import Path

LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
DOC_NAME = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.md)\b")
IGNORED = {"CHANGELOG.md"}  # names of other projects' files, cited as such


def targets(text):
    for m in LINK.finditer(text):
        if not re.match(r"[a-z]+:", m.group(1)):
            yield m.group(1)
    for m in DOC_NAME.finditer(text):
        if m.group(1) not in IGNORED:
            yield m.group(1)


def documents(root):
    return [top / "README.md" for top in (root, root / "kernels")] + sorted(root.glob("docs/*.md")) + sorted(
        root.glob("kernels/docs/*.md"))


def broken(root):
    for doc in documents(root):
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for t in targets(line):
                if not ((doc.parent / t).exists() or (root / t).exists()):
                    yield "%s:%d: %s" % (doc.relative_to(root), n, t)


def main():
    root = Path(sys.argv[1]).resolve()
    bad = list(broken(root))
    for line in bad:
        print("unresolved doc link: " + line)
    checked = len(documents(root))
    print("%d docs checked, %d unresolved links" % (checked, len(bad)))
    return 1 if bad or checked < 2 else 0


if __name__ == "__main__":
    sys.exit(main())
