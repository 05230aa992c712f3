"""The progress of setup.py's CMake build, for `pip install .` (imported by setup.py; not part of the package).

pip captures a build backend's output: it shows it with -v or when the build fails, and otherwise only a spinner, or
"still running..." without a terminal. A build of several minutes then says nothing of how far it got. So run()
passes every line of the build to stdout, as before (pip keeps it), and also, when that output is captured and the
process has a controlling terminal, writes the build tool's progress ("[ 45/120]" from Ninja, "[ 45%]" from Make)
as one line that it rewrites on /dev/tty, as `sudo` or `ssh` write their prompts there. DATAVO_BUILD_PROGRESS=0 turns
it off; without a terminal (CI) nothing changes.
"""
import os
import re
import subprocess
import sys
import typing

_STEP = re.compile(r"^\[\s*(\d+)/(\d+)\]")  # Ninja: [12/130] Building CXX object ...
_PERCENT = re.compile(r"^\[\s*(\d+)%\]")  # Make: [ 45%] Building CXX object ...


def progress_of(line: str) -> typing.Optional[str]:
    """The progress a line of build output announces ("12/130", "45%"), or None."""
    step = _STEP.match(line)
    if step:
        return "%s/%s" % (step.group(1), step.group(2))
    percent = _PERCENT.match(line)
    if percent:
        return "%s%%" % percent.group(1)
    return None


def open_terminal() -> typing.Optional[typing.TextIO]:
    """The controlling terminal for writing, when stdout is captured (not itself a terminal) and progress is wanted;
    else None."""
    if os.environ.get("DATAVO_BUILD_PROGRESS", "1") == "0" or sys.stdout.isatty():
        return None
    try:
        return open("/dev/tty", "w")
    except OSError:  # no controlling terminal: CI, a daemon
        return None


def run(command: typing.Sequence[str], what: str, terminal: typing.Optional[typing.TextIO] = None) -> None:
    """Runs `command`; raises subprocess.CalledProcessError if it fails. Its output goes to stdout line by line;
    its progress, as "<what>: 12/130 ...", to `terminal` (default: open_terminal()), rewritten in place and cleared
    at the end."""
    own = terminal is None
    if own:
        terminal = open_terminal()
    if terminal is None:
        subprocess.check_call(list(command))
        return
    try:
        with subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace") as process:
            assert process.stdout is not None
            for line in process.stdout:
                sys.stdout.write(line)
                progress = progress_of(line)
                if progress is not None:
                    terminal.write("\r\033[K%s: %s %s" % (what, progress, line.split("]", 1)[1].strip()[:60]))
                    terminal.flush()
            status = process.wait()
        terminal.write("\r\033[K")
        terminal.flush()
        sys.stdout.flush()
        if status != 0:
            raise subprocess.CalledProcessError(status, list(command))
    finally:
        if own:
            terminal.close()
