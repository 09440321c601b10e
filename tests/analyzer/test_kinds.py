"""The table of finding kinds (reports/finding_kinds.c) is the one list of
kinds: every kind in it has its query in analyzer/findings.c and no query
names a kind outside it, and the published copies (the JSON Schema of the
report, the kinds table of README.md, docs/REPORT.md, docs/ANALYZER.md)
name exactly the kinds of the table, so a missed copy fails here."""
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def table_kinds():
    text = (ROOT / "reports" / "finding_kinds.c").read_text()
    kinds = re.findall(r'\.name = "(\w+)"', text)
    assert kinds, "no kinds read from reports/finding_kinds.c"
    return kinds


def test_every_kind_has_one_query_and_every_query_a_kind():
    text = (ROOT / "analyzer" / "findings.c").read_text()
    block = text[text.index("FINDING_SQL[] = {"):]
    block = block[: block.index("\n};")]
    queried = re.findall(r'^\s*\{"(\w+)",', block, re.M)
    assert sorted(queried) == sorted(table_kinds())
    assert len(set(queried)) == len(queried)


def test_no_renderer_or_analyzer_file_lists_the_kinds():
    kinds = table_kinds()
    for folder in ("analyzer", "reports"):
        for path in sorted((ROOT / folder).glob("*.[ch]")):
            if path.name in ("finding_kinds.c", "findings.c"):
                continue
            text = path.read_text()
            named = [k for k in kinds if f'"{k}"' in text]
            assert not named, f"{path.name} names kinds {named}: take them from the table"


def test_report_schema_names_the_table_kinds():
    schema = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    found = []

    def walk(node):
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
            enum = node.get("enum")
            if isinstance(enum, list) and "stale_param" in enum:
                found.append(enum)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert len(found) == 2, "the schema names the kinds for finding.kind and totals.by_kind"
    for enum in found:
        assert enum == table_kinds()


def test_docs_name_every_kind():
    for doc in ("README.md", "docs/REPORT.md", "docs/ANALYZER.md"):
        text = (ROOT / doc).read_text()
        missing = [k for k in table_kinds() if f"`{k}`" not in text]
        assert not missing, f"{doc} does not describe {missing}"
