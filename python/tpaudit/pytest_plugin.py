"""pytest plugin of tpaudit (entry point pytest11 `tpaudit`).

`pytest --tpaudit` audits every test; `@pytest.mark.tpaudit(max_retained="0")`
audits one test (with or without the option); `max_growth="1MiB"` (or
--tpaudit-max-growth for every audited test, as pytest-memray's limit_leaks)
fails a test whose loop keeps more than that per step (an optimizer step, or
an iteration of a loop that takes none).  An audited test is audited
once more at its end, while its locals and fixtures are still alive: the
optimizers it created (in the test or its fixtures) and the models they
train.  The verdict is `tpaudit gate --format json` on the process's
database, so it is the analyzer's, with the marker's keywords as the gate's options
(max_retained, max_findings, fail_on, max_growth); a failing test shows the
gate's lines and the findings, and the full report as a section.  Each
audited test is a run of its own for the growth watch (its step count
starts again), so a loop's growth is judged over that test's steps; a test
whose optimizers are gone at its end (trained in a helper or a fixture) or
that had none (an eval loop) is judged on growth alone when its growth audits
ran.  The test function's locals are roots of its audit's holder walk.
Follows pytest-memray's conventions: --tpaudit / ini `tpaudit`,
--hide-tpaudit-summary, a "TPAUDIT REPORT" summary, and a status naming
what failed the test: "STALE TENSORS", "MEMORY GROWTH" or both.

The plugin loads nothing until an audited test runs; then it imports torch,
loads libtpaudit.so into the pytest process (unless `tpaudit run` already
preloaded it) and installs the probe's hooks.  The databases then go to a
temporary directory that is removed once the pytest process (and anything
it forked) has exited, unless --tpaudit-out names one to keep.

The report shown for a failed test is about that test: its stacks start at
the test function (pytest's and pluggy's frames above it are cut), and the
run is not called inconclusive for still running, since the test was judged
at its own audit.
"""
import glob
import inspect
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import weakref

import pytest

MARKER = "tpaudit"
GATE_OPTIONS = ("max_retained", "max_findings", "fail_on", "max_growth")
# what failed a test: (its status word, the letter, the heading of its failure text)
FOUND = {
    "stale": ("STALE TENSORS", "T", "optimizers hold stale tensors at the end of %s"),
    "growth": ("MEMORY GROWTH", "G", "memory grows step over step in %s"),
    "stale+growth": ("STALE TENSORS AND MEMORY GROWTH", "T",
                     "optimizers hold stale tensors and memory grows step over step in %s"),
}


def pytest_addoption(parser):
    group = parser.getgroup("tpaudit")
    group.addoption("--tpaudit", action="store_true", default=False,
                    help="Audit every test: fail those whose optimizers hold stale tensors at their end")
    group.addoption("--tpaudit-out", metavar="DIR", default=None,
                    help="Directory of the audit databases (default: a new temporary directory)")
    group.addoption("--tpaudit-max-growth", metavar="SIZE", default=None,
                    help="Fail an audited test whose memory grows by more than SIZE per step or iteration "
                         "(e.g. 1MiB; a test's marker max_growth wins)")
    group.addoption("--hide-tpaudit-summary", action="store_true", default=False,
                    help="Hide the tpaudit summary at the end of the session")
    parser.addini("tpaudit", "Audit every test (as --tpaudit)", type="bool", default=False)
    parser.addini("hide_tpaudit_summary", "Hide the tpaudit summary", type="bool", default=False)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "tpaudit(max_retained=SIZE, max_findings=N, fail_on=LEVEL, max_growth=SIZE): audit this "
        "test at its end and fail it when `tpaudit gate` with these options fails")
    config.pluginmanager.register(Auditor(config), "tpaudit_auditor")


class _Result:
    def __init__(self, verdict, text="", report=""):
        self.verdict, self.text, self.report = verdict, text, report


class _FrameKeeper:
    """Keeps the test function's frame, so that its locals outlive its return
    until the audit.  Uses a profile function only until that frame starts,
    and not at all when a profiler is already set."""

    def __init__(self, function):
        target = inspect.unwrap(getattr(function, "__func__", function))
        self.code = getattr(target, "__code__", None)
        self.frame = None

    def __enter__(self):
        if self.code is not None and sys.getprofile() is None:
            sys.setprofile(self._profile)
        return self

    def _profile(self, frame, event, _arg):
        if event == "call" and frame.f_code is self.code:
            self.frame = frame
            sys.setprofile(None)

    def __exit__(self, *_exc):
        if sys.getprofile() == self._profile:
            sys.setprofile(None)

    def release(self):
        self.frame = None


class Auditor:
    """Audits the tests that ask for it and judges them with `tpaudit gate`."""

    def __init__(self, config):
        self.config = config
        self.all_tests = config.getoption("tpaudit") or config.getini("tpaudit")
        self.out_dir = None
        self.results = {}
        self.broken = None
        self.temporary = False

    # --- which tests, and the probe ---------------------------------------------

    def _wanted(self, item):
        return isinstance(item, pytest.Function) and (
            self.all_tests or item.get_closest_marker(MARKER) is not None)

    def _start(self):
        """Loads the shim and the torch hooks once; returns the probe's hook state or None."""
        if self.broken is not None:
            return None
        try:
            import torch  # noqa: F401  (the hooks patch torch)
        except ImportError:
            self.broken = "torch is not importable"
            return None
        import tpaudit
        from tpaudit import _hooks
        if _hooks.state.recorder is None:  # not under `tpaudit run`: load the shim here
            self.out_dir = self.config.getoption("tpaudit_out")
            if not self.out_dir:
                self.out_dir = tempfile.mkdtemp(prefix="tpaudit-pytest-")
                self.temporary = True
                _remove_after_exit(self.out_dir)
            os.makedirs(self.out_dir, exist_ok=True)
            os.environ["TPAUDIT_OUT"] = os.path.abspath(self.out_dir)
            os.environ.setdefault("TPAUDIT_AUDIT", "none")  # the plugin's own audit is the one judged
        else:
            from tpaudit import _structs
            self.out_dir = os.environ.get("TPAUDIT_OUT", _structs.DEFAULT_OUT)
        if not tpaudit.enable() or not _hooks.state.installed:
            self.broken = "libtpaudit.so could not be loaded (%s)" % tpaudit._native.library_path()
            return None
        return _hooks

    # --- around each test ---------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        if self._wanted(item):
            hooks = self._start()
            if hooks is not None:
                from tpaudit import _facts, _track
                from tpaudit import _growth
                _growth.leaks.restart()
                item.stash[_BEFORE] = (weakref.WeakSet(o for o, _ in _track.optimizers.live()),
                                       weakref.WeakSet(_facts.find_models()))
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        before = item.stash.get(_BEFORE, None)
        if before is None:
            yield
            return
        keeper = _FrameKeeper(item.obj)
        try:
            with keeper:
                outcome = yield
            if outcome.excinfo is None:
                self.results[item.nodeid] = self._audit_and_judge(item, keeper.frame, *before)
        finally:
            keeper.release()

    def _audit_and_judge(self, item, frame, optimizers_before, models_before):
        """The test's own audit, its test function's locals among the roots
        of the holder walk, judged.  A test whose optimizers are gone (a
        helper or a fixture trained and returned) or that had none (an eval
        loop) is judged for memory growth alone."""
        from tpaudit import _facts, _growth, _holders, _hooks, _track
        optimizers = [o for o, _ in _track.optimizers.live() if o not in optimizers_before]
        watch = _growth.leaks.watch
        if not optimizers and (watch is None or not watch.taken):  # no growth audit: no growth of its own
            return _Result("no optimizer")
        group_params = {id(p) for o in optimizers for g in getattr(o, "param_groups", ()) for p in g["params"]}
        models = [m for m in _facts.find_models()
                  if m not in models_before or any(id(p) in group_params for p in m.parameters())]
        if frame is not None:
            _holders.finished_frames.append(frame)
        try:
            audit_id = _hooks.run_audit("test " + item.nodeid, -1, models, optimizers)
        finally:
            _holders.finished_frames.clear()
        if audit_id is None:
            return _Result("error", "tpaudit: the audit did not run (the probe is off)")
        flush = getattr(_hooks.state.recorder.lib, "tpaudit_v1_flush", None)
        if flush is not None:
            flush()
        result = self._judge(item, growth_only=not optimizers)
        return _Result("no optimizer") if not optimizers and result.verdict == "clean" else result

    def _database(self):
        """This process's database: tpaudit-<host>-<pid>.db (or -<pid>-<n>.db), the newest."""
        stem = os.path.join(self.out_dir, "tpaudit-%s-%d" % (socket.gethostname(), os.getpid()))
        found = glob.glob(stem + ".db") + glob.glob(stem + "-[0-9]*.db")
        return max(found, key=os.path.getmtime) if found else None

    def _judge(self, item, growth_only=False):
        import tpaudit
        db = self._database()
        if db is None:
            return _Result("error", "tpaudit: no database of this process in %s" % self.out_dir)
        marker = item.get_closest_marker(MARKER)
        given = dict(marker.kwargs) if marker is not None else {}
        unknown = sorted(set(given) - set(GATE_OPTIONS))
        if unknown:
            return _Result("error", "tpaudit: unknown marker keyword %s (known: %s)"
                           % (", ".join(unknown), ", ".join(GATE_OPTIONS)))
        tool = tpaudit.cli_path()
        args = [tool, "gate", "--allow-incomplete"]
        for key, value in self._gate_options(given, growth_only).items():
            args += ["--" + key.replace("_", "-"), str(value)]
        # The verdict from the gate's JSON document (each rule's outcome);
        # its text, printed the same way again, only for the reader.
        gate = subprocess.run(args + ["--format", "json", db], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)
        if gate.returncode == 0:
            return _Result("clean")
        if gate.returncode != 1:
            return _Result("error", (gate.stderr + gate.stdout).strip())
        try:
            rules = json.loads(gate.stdout)["rules"]
        except (ValueError, KeyError, TypeError):
            return _Result("error", "tpaudit: the gate's JSON could not be read: %r" % gate.stdout[:200])
        text = subprocess.run(args + [db], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True).stdout
        report = subprocess.run([tool, "report", "--format", "text", db], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, universal_newlines=True).stdout
        report = _about_the_test(report)
        return _Result(_what_failed(tool, db, rules), text.strip() + "\n" + _findings_block(report), report)

    def _gate_options(self, given, growth_only=False):
        """The gate's options for a test: its marker's keywords; --tpaudit-max-growth
        adds max_growth where the marker gives none, and then max_retained 0
        unless the marker gives a rule, so stale tensors still fail it.  A
        test with no live optimizer of its own is judged on growth alone
        (its limit, else 0): the process's judged audit for stale tensors
        would be an earlier test's."""
        options = {key: given[key] for key in GATE_OPTIONS if key in given}
        limit = self.config.getoption("tpaudit_max_growth")
        if limit is not None and "max_growth" not in options:
            options["max_growth"] = limit
            if "max_retained" not in options and "max_findings" not in options:
                options["max_retained"] = "0"
        if growth_only:
            return {"max_growth": options.get("max_growth", "0")}
        return options

    # --- the verdict in the test's report -------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        result = self.results.get(item.nodeid)
        if call.when != "call" or result is None or result.verdict not in tuple(FOUND) + ("error",):
            return
        report = outcome.get_result()
        if report.outcome != "passed":
            return
        report.outcome = "failed"
        if result.verdict in FOUND:
            report.longrepr = "tpaudit: %s\n%s" % (FOUND[result.verdict][2] % item.nodeid, result.text)
            report.sections.append(("tpaudit report", result.report))
            report.user_properties.append(("tpaudit", result.verdict))
        else:
            report.longrepr = "tpaudit: could not judge %s\n%s" % (item.nodeid, result.text)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_report_teststatus(self, report):
        outcome = yield
        found = dict(getattr(report, "user_properties", ())).get("tpaudit")
        if report.when == "call" and report.outcome == "failed" and found in FOUND:
            word, letter, _ = FOUND[found]
            outcome.force_result(("failed", letter, word))

    def pytest_terminal_summary(self, terminalreporter):
        if self.config.getoption("hide_tpaudit_summary") or self.config.getini("hide_tpaudit_summary"):
            return
        if not self.results and self.broken is None:
            return
        terminalreporter.write_sep("=", "TPAUDIT REPORT")
        if self.broken is not None:
            terminalreporter.write_line("tpaudit: no test was audited: %s" % self.broken)
        counts = {}
        for nodeid, result in self.results.items():
            counts[result.verdict] = counts.get(result.verdict, 0) + 1
            if result.verdict in FOUND or result.verdict == "error":
                terminalreporter.write_line("%s %s" % (FOUND[result.verdict][0] if result.verdict in FOUND
                                                       else "NOT JUDGED", nodeid))
        where = ("databases removed at exit (--tpaudit-out DIR keeps them)" if self.temporary
                 else "databases in %s" % self.out_dir)
        terminalreporter.write_line(
            "%d audited: %d clean, %d with stale tensors, %d with memory growth, %d without an optimizer, "
            "%d not judged; %s"
            % (len(self.results), counts.get("clean", 0), counts.get("stale", 0) + counts.get("stale+growth", 0),
               counts.get("growth", 0) + counts.get("stale+growth", 0), counts.get("no optimizer", 0),
               counts.get("error", 0), where))


_BEFORE = pytest.StashKey()


def _what_failed(tool, db, gate_rules):
    """'stale', 'growth' or 'stale+growth': the error findings of the failed
    gate's database, growth counted unless the gate's max-growth rules (the
    "rules" of its JSON document) passed it."""
    out = subprocess.run([tool, "report", "--format", "json", db], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True).stdout
    try:
        kinds = {f["kind"] for f in json.loads(out)["findings"] if f.get("severity") == "error"}
    except (ValueError, KeyError, TypeError):
        kinds = set()
    growth_rules = [rule for rule in gate_rules if rule.get("rule") == "max-growth"]
    growth_passed = bool(growth_rules) and all(rule.get("outcome") == "passed" for rule in growth_rules)
    growth = "memory_growth" in kinds and not growth_passed
    stale = bool(kinds - {"memory_growth"}) or not growth
    return "stale+growth" if stale and growth else "growth" if growth else "stale"


def _findings_block(report):
    """The `findings:` lines of a text report (the verdict's answer, without the stacks)."""
    lines, inside = [], False
    for line in report.splitlines():
        if line.startswith("findings:"):
            inside = True
        elif inside and not line.strip():
            break
        if inside:
            lines.append(line)
    return "\n".join(lines)


# The run is the pytest process itself, still running when a test is judged
# at its own audit (the gate runs with --allow-incomplete): not news to the reader.
_STILL_RUNNING = "; INCONCLUSIVE: the run did not end cleanly (killed or still running)"
# A stack line of pytest's runner: a frame in _pytest or pluggy, or a fold of them.
_RUNNER_LINE = re.compile(r"\s+(?:(?:_pytest|pluggy)/\S+:\d+ in \S+|\.\.\. \d+ frames in .*\b(?:_pytest|pluggy)\b.*)$")
_FRAME_LINE = re.compile(r"        \S")


def _about_the_test(report):
    """The text report as a failed test shows it: each stack from the test
    function down (the runner's frames above it cut), and no 'inconclusive'
    for the pytest process still running."""
    lines = [line.replace(_STILL_RUNNING, "") for line in report.splitlines()]
    out, stack = [], []
    for line in lines + [""]:
        if _FRAME_LINE.match(line):
            stack.append(line)
            continue
        runner = [i for i, frame in enumerate(stack) if _RUNNER_LINE.match(frame)]
        out.extend(stack[runner[-1] + 1:] if runner and runner[-1] + 1 < len(stack) else stack)
        stack = []
        out.append(line)
    return "\n".join(out[:-1]) + ("\n" if report.endswith("\n") else "")


_REMOVER = """
import os, shutil, sys
try:
    while os.read(0, 4096):
        pass
finally:
    shutil.rmtree(sys.argv[1], ignore_errors=True)
"""


def _remove_after_exit(path):
    """Removes the temporary database directory once this process and every
    process it forked have exited (and so closed their databases): a small
    detached process waits for the end of a pipe only they hold."""
    read_end, write_end = os.pipe()
    try:
        subprocess.Popen([sys.executable, "-I", "-c", _REMOVER, path], stdin=read_end, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True,
                         env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    except OSError:
        os.close(write_end)
        write_end = None
    finally:
        os.close(read_end)
    _remove_after_exit.keep = write_end  # held open (not inherited by exec) until this process ends
