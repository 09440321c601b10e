"""Shell completion: the bash script registers for `tpaudit` and completes
commands, options, option values, PATHs and the command after `run` (bash
run on simulated COMP_WORDS); every long option a command's --help lists is
completed by bash, zsh and fish alike; `cmake --install` puts the three
files where bash-completion, zsh and fish look.  zsh and fish are
syntax-checked when installed.  Needs TPAUDIT_BUILD."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SRC = Path(__file__).resolve().parents[2]
COMPLETIONS = SRC / "completions"
BASH = COMPLETIONS / "tpaudit.bash"
COMMANDS = ["run", "report", "gate", "diff", "kinds"]


def complete(*words, cwd=None):
    """COMPREPLY for the command line `words` (the last one is being completed)."""
    script = (f'source "{BASH}"\n'
              'COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()\n'
              '_tpaudit; printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", *words], capture_output=True,
                       text=True, cwd=cwd, timeout=30)
    assert r.returncode == 0 and not r.stderr, r.stderr
    return [w for w in r.stdout.splitlines() if w]


def test_bash_registers_the_completion():
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", f'source "{BASH}"; complete -p tpaudit'],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "complete -F _tpaudit tpaudit", r.stdout + r.stderr


@pytest.mark.parametrize("words,expected", [
    (["tpaudit", ""], COMMANDS + ["help", "--help", "--version", "-V"]),
    (["tpaudit", "re"], ["report"]),
    (["tpaudit", "g"], ["gate"]),
    (["tpaudit", "report", "--f"], ["--format"]),
    (["tpaudit", "report", "--format", ""], ["text", "json", "html", "junit", "memory-viz"]),
    (["tpaudit", "report", "--m"], ["--max-events"]),
    (["tpaudit", "report", "-f", "j"], ["json", "junit"]),
    (["tpaudit", "gate", "--fail-on", ""], ["error", "warning"]),
    (["tpaudit", "gate", "--format", ""], ["text", "junit", "json"]),
    (["tpaudit", "gate", "--allow"], ["--allow-incomplete"]),
    (["tpaudit", "run", "--f"], ["--force", "--fail-fast"]),
    (["tpaudit", "diff", "--e"], ["--exit-zero"]),
    (["tpaudit", "kinds", "-"], ["--help"]),
])
def test_bash_completes_commands_options_and_values(words, expected):
    assert sorted(complete(*words)) == sorted(expected)


def test_bash_completes_paths_and_the_command_to_run(tmp_path):
    for name in ("a.db", "b.json", "notes.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "runs").mkdir()
    assert sorted(complete("tpaudit", "report", "", cwd=tmp_path)) == ["a.db", "b.json", "runs"]
    assert sorted(complete("tpaudit", "gate", "--baseline", "", cwd=tmp_path)) == ["a.db", "b.json", "runs"]
    assert sorted(complete("tpaudit", "run", "-o", "", cwd=tmp_path)) == ["runs"]
    assert "bash" in complete("tpaudit", "run", "--", "bas")
    assert "bash" in complete("tpaudit", "run", "-o", "out", "--force", "bas")
    assert complete("tpaudit", "run", "-o", "out", "--", "-") == []  # CMD's options are not run's


def long_options(command):
    usage = subprocess.run([str(BUILD / "bin" / "tpaudit"), command, "--help"], capture_output=True, text=True,
                           timeout=30).stdout
    return set(re.findall(r"(--[a-z][a-z-]+)", usage))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_of_the_help_is_completed_in_each_shell(command):
    options = long_options(command) | {"--help"}
    got = set(complete("tpaudit", command, "--"))
    assert options <= got | ({"--"} if command == "run" else set()), (command, options - got)
    zsh, fish = (COMPLETIONS / "_tpaudit").read_text(), (COMPLETIONS / "tpaudit.fish").read_text()
    for option in options:
        assert re.search(r"[{'(, ]%s[=+\[,}]" % re.escape(option), zsh), ("zsh", command, option)
        assert re.search(r"__fish_seen_subcommand_from [a-z $]*\b%s\b.*-l %s\b" % (command, option[2:]), fish) or \
            (option == "--help" and "-l help -d 'Usage of the command'" in fish), ("fish", command, option)


@pytest.mark.parametrize("shell,file", [("zsh", "_tpaudit"), ("fish", "tpaudit.fish")])
def test_zsh_and_fish_scripts_parse(shell, file):
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    args = [shell, "-n", str(COMPLETIONS / file)] if shell == "zsh" else [shell, "--no-execute", str(COMPLETIONS / file)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_cmake_install_puts_them_where_the_shells_look(tmp_path):
    r = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(tmp_path)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    share = tmp_path / "share"
    assert (share / "bash-completion" / "completions" / "tpaudit").read_text() == BASH.read_text()
    assert (share / "zsh" / "site-functions" / "_tpaudit").is_file()
    assert (share / "fish" / "vendor_completions.d" / "tpaudit.fish").is_file()
