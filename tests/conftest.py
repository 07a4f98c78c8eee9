"""Shared test fixtures: where the captures are, and one store with every
capture analysed once per test session."""
from __future__ import annotations

import contextlib
import io
import os
import pty
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tcpvar.pipelines.analyze import AnalyzeOptions, analyze_capture, analyze_captures
from tcpvar.store import Store

# The suite may run under nohup or as a script's background job, where
# SIGHUP or SIGINT is ignored, and tcpvar keeps a signal ignored at its start
# (docs/reliability.md): the commands the tests signal start with the
# dispositions a terminal gives.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGHUP, signal.SIG_DFL)

# The patched kernel's claims are read from two boots of its debug flavour,
# about 35 minutes under TCG: a campaign that kernel-patches/claims.py runs
# outside CI, writing its table into kernel-patches/README.md.
CAMPAIGN_FIXTURES = {"guest_endpoints", "guest_traffic"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if CAMPAIGN_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.campaign)


ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "pcaps"
SHARED = Path(os.environ.get("TCPVAR_SHARED_PCAPS", ROOT.parent / "shared" / "pcaps"))

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".dmp", ".gz")


def _captures(folder: Path) -> dict[str, Path]:
    return {p.name: p for p in folder.glob("*") if p.suffix in CAPTURE_SUFFIXES}


# readable captures of our own (bad inputs live in fixtures/pcaps/bad/)
OWN_CAPTURES = sorted(p for p in _captures(FIXTURES).values()
                      if p.name != "pcapng_mixed_linktypes.pcapng")
# captures written by others: the shared collection when it is there, else
# the small ones copied into fixtures/pcaps/thirdparty/
SHARED_FOUND = SHARED.is_dir()
SHARED_CAPTURES = sorted({**_captures(FIXTURES / "thirdparty"),
                          **(_captures(SHARED) if SHARED_FOUND else {})}.values())


def tcpvar_main(*args, cwd=None) -> subprocess.CompletedProcess:
    """The tcpvar command run in this process, as the command's process runs
    it (cli.start.run(argv): DuckDB's instance started early for a command
    that opens the store first): the exit status, stdout and stderr a user
    gets, without the start-up of a new Python. The smoke tests that need a
    real process run `python -m tcpvar.cli` instead."""
    from tcpvar.cli.start import run

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            contextlib.chdir(cwd or os.getcwd()):
        status = run(argv)
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def tcpvar_process(*args, cwd=None, env=None, timeout: float = 300
                   ) -> subprocess.CompletedProcess:
    """The tcpvar command in a process of its own, `python -m tcpvar.cli`, as
    a user starts it."""
    return subprocess.run([sys.executable, "-m", "tcpvar.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def on_a_terminal(*args) -> tuple[int, str, str]:
    """`tcpvar ARGS` with stdout on a pseudo-terminal of 80 columns (Rich
    draws its tables there, a wide one at its natural width): exit status,
    stdout, stderr."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tcpvar.cli", *map(str, args)],
                            stdout=slave, stderr=subprocess.PIPE,
                            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "80"})
    os.close(slave)
    out = read_terminal(master)
    err = proc.stderr.read()
    proc.wait(timeout=120)
    return proc.returncode, out.decode(), err.decode()


def read_terminal(master: int) -> bytes:
    """All a process wrote to the pseudo-terminal whose end @master is,
    until it closed its side; @master is closed."""
    out = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:                 # EIO: the other end is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return out


def error_lines(stderr: str) -> list[str]:
    """The error lines of a command's stderr: tcpvar's own or Click's."""
    return [line for line in stderr.splitlines()
            if line.startswith(("tcpvar: error:", "Error:"))]


def capture_id(path: Path) -> str:
    return path.name


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    s = Store(tmp_path_factory.mktemp("store") / "tcpvar.duckdb")
    yield s
    s.close()


@pytest.fixture(scope="session")
def analyzed(store):
    """analyzed(path) -> the JSON document of `tcpvar analyze` for it (cached).
    The captures above are read at the first call, all at once with two
    worker threads (`analyze --jobs 2`): the comparisons with tcptrace,
    tshark and craft.py's ground truth check the parallel path too."""
    cache: dict[tuple, dict | Exception] = {}

    def get(path: Path, **kw) -> dict:
        if not cache:
            paths = OWN_CAPTURES + SHARED_CAPTURES
            for p, outcome in zip(paths, analyze_captures(store, [str(p) for p in paths],
                                                          AnalyzeOptions(), jobs=2)):
                cache[(p, ())] = outcome.doc or outcome.error
        key = (path, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = analyze_capture(store, str(path), AnalyzeOptions(**kw))
        if isinstance(cache[key], Exception):
            raise cache[key]
        return cache[key]
    return get


@pytest.fixture(scope="session")
def their_run(tmp_path_factory) -> Path:
    """A real run's folder (3 s of CUBIC over network namespaces), the
    material the tests of untrusted input copy and alter as a stranger
    would."""
    from run_helpers import tcpvar_run

    rc, doc, err = tcpvar_run(tmp_path_factory.mktemp("theirs"), "--backend", "netns",
                              "--cc", "cubic", "--rtt", 0, "--buffer", 60, "--duration", 3,
                              "--bw", "20mbit")
    assert rc == 0, err
    return Path(doc["runs"][0]["dir"])


def copy_of(run: Path, tmp_path: Path, name: str = "theirs") -> Path:
    """@run copied to tmp_path/@name as it was handed over: without the
    report and figures, which commands of the tests write anew."""
    folder = tmp_path / name
    shutil.copytree(run, folder, symlinks=True,
                    ignore=shutil.ignore_patterns("figures", "report.html"))
    return folder
