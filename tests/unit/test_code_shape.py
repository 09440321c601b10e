"""The shim's, the analyzer's and the renderers' C files stay small enough to
read: no file over 500 lines and no function over 60 (counted from the line
of its opening brace to its closing one, comments and strings included).

Run as: python test_code_shape.py <repo root>."""
import re
import sys
from pathlib import Path

FOLDERS = ("shim", "rules", "analyzer", "launcher", "cli", "reports", "common")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60


def blank_comments_and_strings(text):
    """The text with comments, string and character literals blanked (line
    breaks kept), so braces inside them do not count."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(?:\\.|[^'\\\n])*'", "''", text)


def functions(text):
    """(name, first line, lines) of each top-level brace block that follows a
    parameter list: a function, or a function a macro defines."""
    lines = blank_comments_and_strings(text).split("\n")
    found, depth, start = [], 0, None
    for i, line in enumerate(lines):
        for col, ch in enumerate(line):
            if ch == "{":
                if depth == 0:
                    head = "\n".join(lines[max(0, i - 6):i] + [line[:col]])
                    name = re.findall(r"(\w+)\s*\([^;{}]*\)\s*(?:\\\s*)?$", head, re.S)
                    start = (i, name[-1]) if name and not re.search(r"=\s*$", head) else None
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and start:
                    found.append((start[1], start[0] + 1, i - start[0] + 1))
                    start = None
    return found


def main():
    root = Path(sys.argv[1]).resolve()
    problems, files = [], 0
    for folder in FOLDERS:
        for path in sorted((root / folder).glob("*.[ch]")):
            files += 1
            text = path.read_text()
            name = path.relative_to(root)
            if text.count("\n") > MAX_FILE_LINES:
                problems.append(f"{name}: {text.count(chr(10))} lines (at most {MAX_FILE_LINES})")
            for function, line, length in functions(text):
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{name}:{line}: {function} is {length} lines (at most {MAX_FUNCTION_LINES})")
    for p in problems:
        print("too long: " + p)
    print(f"{files} files of {', '.join(FOLDERS)} checked, {len(problems)} too long")
    return 1 if problems or files < 20 else 0


if __name__ == "__main__":
    sys.exit(main())
