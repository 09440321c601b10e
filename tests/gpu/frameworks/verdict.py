"""One row of the frameworks table from a `tpaudit report --format json`
document (stdin) and the gate's exit status (argv[2]); argv[1] is the row's
label.  Prints: label | findings | stale tensors (name, bytes, successor) | gate."""
import json
import sys


def main():
    label, gate = sys.argv[1], sys.argv[2]
    try:
        doc = json.load(sys.stdin)
    except ValueError:
        print("| %s | no report | | gate %s |" % (label, gate))
        return
    audits = sum(r.get("audits", 0) for r in doc.get("runs", []))
    kinds = {}
    for f in doc.get("findings", []):
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    stale = ["%s %s B -> %s" % (f["tensor"]["name"] or "(unnamed)", f["retained_bytes"],
                                (f.get("successor") or {}).get("name", "none"))
             for f in doc.get("findings", []) if f["kind"] in ("stale_param", "stale_map_entry")]
    found = ", ".join("%d %s" % (n, k) for k, n in sorted(kinds.items())) or "clean"
    print("| %s | %s (%d audits) | %s | gate %s |" % (label, found, audits, "; ".join(stale[:4]), gate))


if __name__ == "__main__":
    main()
