"""The binary wheel as a user without build packages installs it.

test_wheel.sh builds the wheel (TPAUDIT_WHEEL) and runs this file through
hide_dev.sh, so the build packages' libraries, headers, compilers, cmake and
the CUDA toolkit are hidden (TPA_DEV_HIDDEN=1; "visible" where no mount
namespace could be made).  Each install kind (a fresh venv, --target,
--user, --prefix) puts the wheel somewhere else; the demo's buggy run
(examples/finetune.py --order buggy) must give the stale wte and gate 1,
the fixed run gate 0.  torch comes from the project venv (this python): a
.pth file in the fresh venv, and the training interpreter itself for the
other installs, as a user audits their own python with a tool installed
elsewhere.
"""
import ctypes
import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile

import pytest

WHEEL = os.environ["TPAUDIT_WHEEL"]
SOURCE = os.environ["TPAUDIT_SOURCE_DIR"]
FINETUNE = os.path.join(SOURCE, "examples", "finetune.py")
# What the installed ELF files may take from the system: glibc, zlib (both
# on every manylinux system), and the C++ runtime.
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
               "libz.so.1", "libgcc_s.so.1", "libstdc++.so.6"}


def run(args, env, cwd, expect=0):
    done = subprocess.run(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    assert done.returncode == expect, "%s exited %d, not %d:\n%s" % (args, done.returncode, expect, done.stdout)
    return done.stdout


def clean_env(**extra):
    """The user's environment: no shim preloaded, no venv active."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TPAUDIT_") and k not in ("LD_PRELOAD", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def pip_install(python, root, *how):
    started = time.monotonic()
    run([python, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", "-q"]
        + list(how) + [WHEEL], clean_env(), root)
    print("\ntest_wheel: pip install %s: %.1f s" % (" ".join(how) or "(venv)", time.monotonic() - started))


def site_of(python):
    return run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], clean_env(), "/").strip()


class Install:
    """Where one install kind put the wheel: the command that runs the CLI,
    the environment it needs, the python that trains, the package, the
    python that imports it (python -m tpaudit), and whether the demo runs
    through it."""

    def __init__(self, cli, env, python, package, importer=None, demo=True):
        self.cli, self.env, self.python, self.package = cli, env, python, package
        self.importer, self.demo = importer or python, demo
        self.kind = None


def install_venv(root):
    venv = os.path.join(root, "venv")
    run([sys.executable, "-m", "venv", venv], clean_env(), root)
    python = os.path.join(venv, "bin", "python")
    with open(os.path.join(site_of(python), "project-venv.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    pip_install(python, root)
    env = clean_env(PATH=os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", ""))
    return Install(["tpaudit"], env, python, os.path.join(site_of(python), "tpaudit"))


def install_target(root):
    target = os.path.join(root, "target")
    pip_install(sys.executable, root, "--target", target)
    return Install([sys.executable, "-m", "tpaudit"], clean_env(PYTHONPATH=target), sys.executable,
                   os.path.join(target, "tpaudit"))


def install_user(root):
    """pip's --user scheme (PYTHONUSERBASE) from an interpreter that sees user
    site-packages (a venv that includes the system's, as a plain python does)."""
    userbase, pyenv = os.path.join(root, "userbase"), os.path.join(root, "user-python")
    run([sys.executable, "-m", "venv", "--system-site-packages", pyenv], clean_env(), root)
    python = os.path.join(pyenv, "bin", "python")
    env = clean_env(PYTHONUSERBASE=userbase)
    run([python, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", "-q",
         "--user", WHEEL], env, root)
    user_site = run([python, "-c", "import site; print(site.getusersitepackages())"], env, root).strip()
    return Install([os.path.join(userbase, "bin", "tpaudit")], env, sys.executable, os.path.join(user_site, "tpaudit"),
                   importer=python)


def install_prefix(root):
    prefix = os.path.join(root, "prefix")
    pip_install(sys.executable, root, "--prefix", prefix)
    site = glob.glob(os.path.join(prefix, "lib", "python*", "site-packages"))[0]
    return Install([os.path.join(prefix, "bin", "tpaudit")], clean_env(PYTHONPATH=site), sys.executable,
                   os.path.join(site, "tpaudit"), demo=False)


KINDS = {"venv": install_venv, "target": install_target, "user": install_user, "prefix": install_prefix}


@pytest.fixture(scope="module", params=sorted(KINDS))
def installed(request, tmp_path_factory):
    install = KINDS[request.param](str(tmp_path_factory.mktemp(request.param)))
    install.kind = request.param
    return install


def test_the_build_packages_are_hidden():
    hidden = os.environ.get("TPA_DEV_HIDDEN")
    if hidden != "1":
        pytest.skip("no mount namespace on this machine: the installs below run with the build packages visible")
    with pytest.raises(OSError):
        ctypes.CDLL("libdw.so.1")
    with pytest.raises(OSError):
        ctypes.CDLL("libunwind.so.8")
    for tool in ("cmake", "cc", "pkg-config"):
        path = shutil.which(tool)
        assert path is None or os.path.getsize(path) == 0, tool


def test_wheel_is_manylinux_and_vendors_its_libraries():
    name = os.path.basename(WHEEL)
    assert name.startswith("tpaudit-") and "-py3-none-manylinux_" in name and name.endswith("_x86_64.whl")
    names = zipfile.ZipFile(WHEEL).namelist()
    for part in ("tpaudit/_bin/tpaudit", "tpaudit/_lib/libtpaudit.so", "tpaudit/_probe/sitecustomize.py"):
        assert part in names
    vendored = " ".join(n for n in names if n.startswith("tpaudit.libs/"))
    for lib in ("libunwind-", "libdw-", "libelf-", "liblzma-", "libbz2-"):
        assert "tpaudit.libs/" + lib in vendored, lib


def test_installed_elf_files_need_only_the_wheel_and_glibc(installed):
    libs = os.path.realpath(os.path.join(installed.package, "..", "tpaudit.libs"))
    for part in ("_bin/tpaudit", "_lib/libtpaudit.so"):
        for line in run(["ldd", os.path.join(installed.package, part)], clean_env(), "/").splitlines():
            if "=>" not in line:
                continue  # the vdso and the dynamic loader's own line
            name, path = [s.strip() for s in line.split("=>")]
            path = path.split(" (")[0]
            assert path != "not found", "%s: %s not found" % (part, name)
            assert os.path.dirname(os.path.realpath(path)) == libs or name in SYSTEM_LIBS, (part, name, path)


def test_python_m_tpaudit_and_the_cli_answer(installed):
    assert "usage" in run(installed.cli + ["gate", "--help"], installed.env, "/")
    assert "usage" in run([installed.importer, "-m", "tpaudit", "report", "--help"], installed.env, "/")


def test_demo_buggy_then_fixed_through_run_and_gate(installed, tmp_path):
    if not installed.demo:
        pytest.skip("--prefix: the CLI answers (test above); the demo runs through the other three installs")
    verdicts = {}
    for order, gate_status in (("buggy", 1), ("fixed", 0)):
        out = str(tmp_path / order)
        started = time.monotonic()
        run(installed.cli + ["run", "-o", out, "--", installed.python, FINETUNE, "--order", order],
            installed.env, str(tmp_path))
        print("\ntest_wheel: %s run %.1f s" % (order, time.monotonic() - started))
        report = json.loads(run(installed.cli + ["report", "--format", "json", out], installed.env, str(tmp_path)))
        verdicts[order] = [(f["kind"], f["tensor"]["name"], f["tensor"]["shape"]) for f in report["findings"]]
        assert [r["audits"] for r in report["runs"]] != [0], report["runs"]  # an audit happened
        run(installed.cli + ["gate", "--max-retained", "0", out], installed.env, str(tmp_path), expect=gate_status)
    assert ("stale_param", "wte.weight", [50257, 64]) in verdicts["buggy"]
    assert verdicts["fixed"] == []


# With the CUDA runtime of torch's nvidia package loaded but not its CUPTI
# (torch itself is not imported, which would load it), the shim's libcupti
# search reaches the package beside the runtime; the toolkit is hidden.
FIND_CUPTI = """
import ctypes, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
handle = ctypes.c_void_p()
ctypes.CDLL(None).cuptiSubscribe(ctypes.byref(handle), None, None)
print([line.split()[-1] for line in open("/proc/self/maps") if "libcupti" in line][:1])
"""


def test_cupti_found_in_torchs_nvidia_package(installed, tmp_path):
    if installed.kind != "venv":
        pytest.skip("once, through the venv install")
    names = zipfile.ZipFile(WHEEL).read("tpaudit/_lib/libtpaudit.so")
    if b"cuptiSubscribe" not in names:
        pytest.skip("this wheel was built without the CUDA toolkit's cupti.h: no CUPTI part")
    if os.environ.get("TPA_DEV_HIDDEN") != "1":
        pytest.skip("the CUDA toolkit cannot be hidden here (no mount namespace)")
    runtimes = glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "lib", "libcudart.so.*"))
    if not runtimes:
        pytest.skip("torch's nvidia CUDA runtime package is not in the project venv")
    env = dict(installed.env, LD_PRELOAD=os.path.join(installed.package, "_lib", "libtpaudit.so"),
               TPAUDIT_OUT=str(tmp_path / "out"), TPAUDIT_PYTHON="off")
    said = run([installed.python, "-c", FIND_CUPTI, runtimes[0]], env, str(tmp_path))
    assert os.path.join(os.path.dirname(runtimes[0]), "libcupti.so") in said, said
