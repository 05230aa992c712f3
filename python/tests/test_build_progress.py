"""python/build_progress.py: setup.py's CMake build shows its progress on the terminal while pip captures its output
(issue 17, "the build shows its progress"), and changes nothing without a terminal."""
import importlib.util
import io
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

# Loaded from its file, not by putting python/ on sys.path: that directory also holds the source datavo_sdk/ (without
# its extension), which DataLoader's spawned workers would then import instead of the installed package.
_spec = importlib.util.spec_from_file_location("build_progress", os.path.join(REPO, "python", "build_progress.py"))
assert _spec is not None and _spec.loader is not None
build_progress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_progress)

# A stand-in for `cmake --build`: Ninja's progress lines, a line without progress, then an exit status.
FAKE_BUILD = r"""
import sys
for i in (1, 2, 3):
    print("[%d/3] Building CXX object src/part%d.cpp.o" % (i, i), flush=True)
print("ninja: finished", flush=True)
sys.exit(int(sys.argv[1]))
"""


def test_progress_lines_are_recognised_for_ninja_and_make():
    assert build_progress.progress_of("[12/130] Building CXX object x.o\n") == "12/130"
    assert build_progress.progress_of("[ 45%] Building CXX object x.o\n") == "45%"
    assert build_progress.progress_of("[100%] Linking CXX shared module _datavo.so\n") == "100%"
    assert build_progress.progress_of("-- Configuring done\n") is None
    assert build_progress.progress_of("ninja: no work to do.\n") is None


def test_every_line_reaches_stdout_and_the_progress_the_terminal(capfd):
    terminal = io.StringIO()
    build_progress.run([sys.executable, "-c", FAKE_BUILD, "0"], "building", terminal)
    out = capfd.readouterr().out
    assert out.splitlines() == ["[%d/3] Building CXX object src/part%d.cpp.o" % (i, i) for i in (1, 2, 3)] + [
        "ninja: finished"]
    shown = terminal.getvalue()
    for i in (1, 2, 3):
        assert "\r\033[Kbuilding: %d/3 Building CXX object src/part%d.cpp.o" % (i, i) in shown
    assert shown.endswith("\r\033[K")  # the line is cleared at the end
    assert "ninja: finished" not in shown


def test_a_failing_build_raises_with_its_status(capfd):
    with pytest.raises(subprocess.CalledProcessError) as failure:
        build_progress.run([sys.executable, "-c", FAKE_BUILD, "3"], "building", io.StringIO())
    assert failure.value.returncode == 3
    assert "ninja: finished" in capfd.readouterr().out


def test_no_terminal_when_turned_off(monkeypatch):
    monkeypatch.setenv("DATAVO_BUILD_PROGRESS", "0")
    assert build_progress.open_terminal() is None


def test_under_a_pseudo_terminal_with_stdout_captured_the_progress_goes_to_the_terminal(tmp_path):
    # As under pip: stdout is a file (pip's pipe), the process has a controlling terminal (script's pty).
    script = shutil.which("script")
    assert script, "util-linux's script(1) is needed (scripts/install-deps.sh installs util-linux)"
    child = tmp_path / "child.py"
    child.write_text("import sys\nsys.path.insert(0, %r)\nimport build_progress\nbuild_progress.run([sys.executable, "
                     "'-c', %r, '0'], 'datavo_sdk: building')\n" % (os.path.join(REPO, "python"), FAKE_BUILD))
    captured = tmp_path / "captured.txt"
    env = {k: v for k, v in os.environ.items() if k != "DATAVO_BUILD_PROGRESS"}
    done = subprocess.run([script, "-qec", "%s %s > %s" % (sys.executable, child, captured), "/dev/null"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "datavo_sdk: building: 3/3 Building CXX object src/part3.cpp.o" in done.stdout  # what the terminal showed
    assert "[3/3] Building" in captured.read_text()  # what pip would have kept
    assert "[3/3] Building" not in done.stdout
