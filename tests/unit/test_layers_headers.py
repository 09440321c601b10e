"""test_layers_headers.py - the layer test (test_layers.py) sees what nm
cannot: main bb5bb92's circle in rules/, where findings.c called
memory_growth.c, which took the macro TPA_AUDIT_SAW_OPTIMIZER from
findings.h, is rebuilt in a small tree of real C files compiled with cc; the
layer test must fail on it, and pass on its twin with the macro in a header
of its own (rules/audit_seen.h, as the tree has it now).  An #include of a
header on a floor above fails it too."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

FINDINGS_C = '#include "findings.h"\nint tpa_growth(void);\nconst char *findings(void) { return tpa_growth() ? SAW_TEXT : ""; }\n'
GROWTH_C = '#include "{header}"\nint tpa_growth(void) {{ return sizeof(TPA_AUDIT_SAW_OPTIMIZER("?1")) > 1; }}\n'
SAW = '#define TPA_AUDIT_SAW_OPTIMIZER(audit) "EXISTS (SELECT 1 FROM ref o WHERE o.audit_id=" audit ")"\n'


def layer_test(tmp_path, files):
    """Writes `files` ({path: text}) under a source tree, compiles its .c files
    as CMake would lay out their objects, and runs the layer test on them."""
    src, build = tmp_path / "src", tmp_path / "build"
    objects = []
    for path, text in files.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text)
    for path in files:
        if path.endswith(".c"):
            folder, name = os.path.split(path)
            obj = build / folder / "CMakeFiles" / "layers.dir" / (name + ".o")
            obj.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cc", "-c", "-I", str(src / folder), "-o", str(obj), str(src / path)], check=True)
            objects.append(str(obj))
    listing = tmp_path / "objects.txt"
    listing.write_text("\n".join(objects) + "\n")
    return subprocess.run([sys.executable, os.path.join(HERE, "test_layers.py"), str(src), str(build), str(listing)],
                          capture_output=True, text=True)


def test_macro_circle_of_bb5bb92_fails(tmp_path):
    r = layer_test(tmp_path, {
        "rules/findings.h": SAW + '#define SAW_TEXT "saw"\n',
        "rules/findings.c": FINDINGS_C,
        "rules/memory_growth.c": GROWTH_C.format(header="findings.h"),
    })
    assert r.returncode == 1, r.stdout + r.stderr
    assert "circle" in r.stderr and "rules/memory_growth.c -> rules/findings.c (TPA_AUDIT_SAW_OPTIMIZER" in r.stderr, r.stderr


def test_macro_in_a_header_of_its_own_passes(tmp_path):
    r = layer_test(tmp_path, {
        "rules/audit_seen.h": SAW,
        "rules/findings.h": '#include "audit_seen.h"\n#define SAW_TEXT "saw"\n',
        "rules/findings.c": FINDINGS_C,
        "rules/memory_growth.c": GROWTH_C.format(header="audit_seen.h"),
    })
    assert r.returncode == 0 and r.stdout.rstrip().endswith("none up"), r.stdout + r.stderr
    assert "PASS: 3 files" in r.stdout, r.stdout  # findings.c, memory_growth.c, audit_seen.h


@pytest.mark.parametrize("header, fails", [("reports/view.h", True), ("rules/audit_seen.h", False)])
def test_an_include_up_the_floors_fails(tmp_path, header, fails):
    name = os.path.basename(header)
    r = layer_test(tmp_path, {
        "rules/audit_seen.h": SAW,
        "reports/view.h": "#define VIEW_WIDTH 80\n",
        "rules/findings.c": '#include "../%s"\nint findings(void) { return 1; }\n' % header,
    })
    assert (r.returncode == 1) == fails, r.stdout + r.stderr
    if fails:
        assert 'an include up the floors: rules/findings.c -> %s (#include "../%s")' % (header, header) in r.stderr, r.stderr
    else:
        assert r.returncode == 0 and name not in r.stderr, r.stderr
