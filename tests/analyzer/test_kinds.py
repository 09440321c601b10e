"""The table of finding kinds (rules/finding_kinds.c) is the one list of
kinds: `tpaudit kinds` prints it, every kind in it has its query in
rules/findings.c and no query names a kind outside it, no renderer or
analyzer file names a kind, and no doc (README.md, docs/, the man page) nor
the report's JSON Schema keeps a list of kinds that would have to be kept in
step: a new kind is a row, a query and its tests, and nothing else.
Needs TPAUDIT_BUILD (the build tree) in the environment."""
import json
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
TPAUDIT = pathlib.Path(os.environ["TPAUDIT_BUILD"]) / "bin" / "tpaudit"


def table_kinds():
    text = (ROOT / "rules" / "finding_kinds.c").read_text()
    kinds = re.findall(r'^\s*\{NAMED\("(\w+)"\)', text, re.M)
    assert kinds, "no kinds read from rules/finding_kinds.c"
    return kinds


def growing_kinds():
    """Kinds judged across audits (`.grows = 1`): each has its rule in rules/KIND.c."""
    text = (ROOT / "rules" / "finding_kinds.c").read_text()
    return re.findall(r'^\s*\{NAMED\("(\w+)"\)[^{}]*\.grows = 1', text, re.M)


def oom_kinds():
    """Kinds judged once per process from its oom rows (`.oom = 1`): their rule is rules/out_of_memory.c."""
    text = (ROOT / "rules" / "finding_kinds.c").read_text()
    return re.findall(r'^\s*\{NAMED\("(\w+)"\)[^{}]*\.oom = 1', text, re.M)


def queried_kinds():
    """Kinds with a query in rules/findings.c, and kinds with a rule in rules/."""
    text = (ROOT / "rules" / "findings.c").read_text()
    block = text[text.index("FINDING_SQL[] = {"):]
    block = block[: block.index("\n};")]
    ruled = [k for k in growing_kinds() if (ROOT / "rules" / f"{k}.c").is_file()]
    ruled += [k for k in oom_kinds() if (ROOT / "rules" / "out_of_memory.c").is_file()]
    return re.findall(r'^\s*\{"(\w+)",', block, re.M) + ruled


def listed_kinds():
    """`tpaudit kinds` as (name, severity, meaning) rows, cut at its header's columns."""
    r = subprocess.run([TPAUDIT, "kinds"], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr
    header, *rows = r.stdout.splitlines()
    at_severity, at_meaning = header.index("severity"), header.index("meaning")
    assert header.split() == ["kind", "severity", "meaning"], header
    return [(row[:at_severity].strip(), row[at_severity:at_meaning].strip(), row[at_meaning:].strip()) for row in rows]


def test_every_kind_has_one_query_and_every_query_a_kind():
    queried = queried_kinds()
    assert sorted(queried) == sorted(table_kinds())
    assert len(set(queried)) == len(queried)


def test_tpaudit_kinds_lists_every_kind_the_analyzer_can_find():
    rows = listed_kinds()
    assert [name for name, _, _ in rows] == table_kinds()
    assert sorted(name for name, _, _ in rows) == sorted(queried_kinds())
    for name, severity, meaning in rows:
        assert severity == "error" or severity.startswith("warning"), (name, severity)
        assert len(meaning.split()) >= 4, (name, meaning)
    severities = dict((name, severity) for name, severity, _ in rows)
    assert severities["stale_param"] == "error"
    assert severities["untrained_param"].startswith("warning (error when")


def test_tpaudit_kinds_usage():
    for args in (["--nope"], ["extra"]):
        r = subprocess.run([TPAUDIT, "kinds", *args], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tpaudit:"), (args, r.stderr)
    r = subprocess.run([TPAUDIT, "kinds", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("usage: tpaudit kinds")
    r = subprocess.run([TPAUDIT, "kind"], capture_output=True, text=True)
    assert r.returncode == 2 and "did you mean kinds" in r.stderr


def test_no_renderer_or_analyzer_file_lists_the_kinds():
    kinds = table_kinds()
    for folder in ("rules", "analyzer", "launcher", "cli", "reports"):
        for path in sorted((ROOT / folder).glob("*.[ch]")):
            if path.name in ("finding_kinds.c", "findings.c"):
                continue
            text = path.read_text()
            named = [k for k in kinds if f'"{k}"' in text]
            assert not named, f"{path.name} names kinds {named}: take them from the table"


def test_report_schema_takes_any_kind_the_table_has():
    schema = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    kinds = set(table_kinds())

    def walk(node):
        if isinstance(node, dict):
            enum = node.get("enum")
            assert not (isinstance(enum, list) and kinds & set(enum)), f"the schema lists kinds: {enum}"
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    kind = schema["$defs"]["kind"]
    assert schema["$defs"]["finding"]["properties"]["kind"] == {"$ref": "#/$defs/kind"}
    assert schema["$defs"]["totals"]["properties"]["by_kind"]["propertyNames"] == {"$ref": "#/$defs/kind"}
    text = (ROOT / "rules" / "finding_kinds.c").read_text()
    json_keys = set(re.findall(r'(?:NAMED\(|\.json_key = )"(\w+)"', text))  # NAMED sets the key to the name
    assert json_keys >= set(table_kinds()), json_keys
    for key in json_keys | kinds:
        assert re.fullmatch(kind["pattern"], key), f"{key} does not match the schema's kind pattern"


def docs():
    paths = [ROOT / "README.md", ROOT / "docs" / "tpaudit.1"] + sorted((ROOT / "docs").glob("*.md"))
    return [(p.relative_to(ROOT), p.read_text()) for p in paths]


def test_no_doc_keeps_a_list_of_kinds():
    """A list is three kinds on one line (prose or a table row), or three
    entries of one paragraph (list items, table rows, roff tags) that each
    open with a kind."""
    kinds = table_kinds()
    opener = re.compile(r"^\s*(?:[-*|]|\.B|\.I)?\s*[`\"]?(?:%s)\b" % "|".join(kinds))
    for name, text in docs():
        entries = 0
        for n, line in enumerate(text.splitlines(), 1):
            named = {k for k in kinds if re.search(r"\b%s\b" % k, line)}
            assert len(named) < 3, f"{name}:{n} lists kinds {sorted(named)}: point to `tpaudit kinds`"
            if not line.strip() or re.match(r"\.(SH|SS|PP)\b", line):
                entries = 0
            entries += bool(opener.match(line))
            assert entries < 3, f"{name}:{n} is the third entry of a list of kinds: point to `tpaudit kinds`"


def test_docs_point_to_tpaudit_kinds():
    for name, text in docs():
        if str(name) in ("README.md", "docs/REPORT.md", "docs/ANALYZER.md", "docs/tpaudit.1"):
            assert "tpaudit kinds" in text, f"{name} does not point to `tpaudit kinds`"
