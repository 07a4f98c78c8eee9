"""A plain (non-editable) `pip install .` into a throwaway virtual
environment: the package carries what tcpvar builds at run time (the eBPF
hook's sources, the kernel series, the study files) and analyses a capture as tshark counts it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT
from peers import tshark_conversations

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    where = tmp_path_factory.mktemp("install") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    done = subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "-q",
                           str(ROOT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return where


def _run(venv, *args, cwd):
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True,
                          text=True, cwd=cwd)


def test_the_sources_ship_with_the_package(venv, tmp_path):
    code = ("import json, tcpvar\n"
            "from tcpvar.capture import kernel_build, probe\n"
            "print(json.dumps([tcpvar.__file__, str(probe.HOOK_DIR),"
            " str(kernel_build.patches_dir())]))")
    done = _run(venv, "python", "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    package, hook, patches = json.loads(done.stdout)
    site = str(venv / "lib")
    assert package.startswith(site) and hook.startswith(site) and patches.startswith(site)
    for name in ("Makefile", "tcp_probe_ext.bpf.c", "tcp_probe_ext.c", "tcp_probe_ext.h"):
        assert (ROOT / "hooks" / "tcp_probe_ext" / name).read_bytes() == \
            open(f"{hook}/{name}", "rb").read()
    # Python's byte-code of claims.py is no source (bench/run.py compiles the checkout)
    shipped = sorted(p.relative_to(ROOT / "kernel-patches").as_posix()
                     for p in (ROOT / "kernel-patches").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts)
    for name in shipped:
        assert (ROOT / "kernel-patches" / name).read_bytes() == \
            open(f"{patches}/{name}", "rb").read(), name


def test_doctor_runs_installed(venv, tmp_path):
    done = _run(venv, "tcpvar", "doctor", "--json", cwd=tmp_path)
    assert done.returncode in (0, 7), done.stderr   # 7: the main job cannot run here
    doc = json.loads(done.stdout)
    assert doc["groups"], doc


def test_analyze_runs_installed(venv, tmp_path):
    capture = FIXTURES / "iperf_4flows.pcap"
    done = _run(venv, "tcpvar", "analyze", "--json", "--db", str(tmp_path / "t.duckdb"),
                str(capture), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ours = sorted(c["total_packets"] for c in json.loads(done.stdout)["connections"])
    assert ours == sorted(c["frames"] for c in tshark_conversations(str(capture)))


def test_reproductions_ship_with_the_package(venv, tmp_path):
    """The installed package finds its reproduction files, the same bytes
    as the checkout's."""
    code = ("from tcpvar.resources import source_dir\n"
            "print(source_dir('studies'))")
    done = _run(venv, "python", "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    studies = done.stdout.strip()
    assert studies.startswith(str(venv / "lib")), studies
    for path in (ROOT / "studies").rglob("*.toml"):
        rel = path.relative_to(ROOT / "studies")
        assert path.read_bytes() == open(f"{studies}/{rel}", "rb").read(), rel
    done = _run(venv, "tcpvar", "reproduce", "callegari2011", "--scale", "smoke", "--dry-run",
                "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["runs"]) == 5
