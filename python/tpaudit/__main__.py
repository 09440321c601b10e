"""`python -m tpaudit ARGS...`: runs the tpaudit CLI of this install with ARGS
(it replaces this interpreter, so the exit status is the CLI's)."""
import os
import sys

from tpaudit import cli_path


def main():
    tool = cli_path()
    if not os.access(tool, os.X_OK):
        sys.stderr.write("tpaudit: the tpaudit program is not installed beside the probe (looked for %s)\n" % tool)
        return 2
    os.execv(tool, [tool] + sys.argv[1:])
    return 2


if __name__ == "__main__":
    sys.exit(main())
