"""tcpvar doctor on this machine, against what the tools themselves say and
what the test finds on its own; then with tshark and iperf3 taken off PATH."""
from __future__ import annotations

import ctypes
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcpvar.errors import ExitStatus

from conftest import ROOT

GROUP_IDS = ["analyze", "netns", "vm", "probe", "kernel", "wireshark", "spark", "peers"]
RUN_TOOLS = ("ip", "tc", "ss", "iperf3", "tcpdump")
HIDDEN = ("tshark", "iperf3")


def doctor(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tcpvar.cli", "doctor", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def check(doc, group, name) -> dict:
    found = [c for c in doc["checks"] if c["group"] == group and c["name"] == name]
    assert len(found) == 1, (group, name)
    return found[0]


@pytest.fixture(scope="module")
def here():
    done = doctor("--json")
    assert done.returncode in (ExitStatus.OK, ExitStatus.TESTBED), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def without_tools(tmp_path_factory):
    """PATH = a folder of links to every program of PATH (and the system's
    folders) but tshark and iperf3; doctor's JSON and human output there."""
    folder = tmp_path_factory.mktemp("bin")
    dirs = os.environ.get("PATH", "").split(os.pathsep) + [
        "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    for d in filter(os.path.isdir, dirs):
        for entry in os.scandir(d):
            link = folder / entry.name
            if entry.name in HIDDEN or link.exists() or link.is_symlink():
                continue
            if entry.is_file() and os.access(entry.path, os.X_OK):
                link.symlink_to(entry.path)
    env = {**os.environ, "PATH": str(folder)}
    as_json, text = doctor("--json", env=env), doctor(env=env)
    return folder, as_json, text


# ---------------------------------------------------------------- this machine

def test_tshark_version_is_what_tshark_says(here):
    _, doc = here
    first = subprocess.run(["tshark", "--version"], capture_output=True,
                           text=True).stdout.splitlines()[0]
    said = first.split()[2]          # "TShark (Wireshark) 4.0.17 (Git v4.0.17 ...)."
    for group in ("wireshark", "peers"):
        c = check(doc, group, "tshark")
        assert c["ok"] and c["version"] == said, (c, first)
        assert c["detail"] == shutil.which("tshark")


def test_tcptrace_present(here):
    _, doc = here
    c = check(doc, "peers", "tcptrace")
    said = subprocess.run(["tcptrace", "-v"], capture_output=True, text=True)
    version = re.search(r"version (\S+)", said.stdout + said.stderr).group(1)
    assert c["ok"] and c["detail"] == shutil.which("tcptrace") and c["version"] == version


def test_native_reader_and_its_libpcap(here):
    from tcpvar.ingest import _pcapscan

    _, doc = here
    c = check(doc, "analyze", "native pcap reader")
    assert c["ok"] and c["detail"].startswith(_pcapscan.__file__), c
    lib = ctypes.CDLL("libpcap.so.0.8")
    lib.pcap_lib_version.restype = ctypes.c_char_p
    said = lib.pcap_lib_version().decode()          # "libpcap version 1.10.3 (...)"
    assert c["version"] == said.split()[2] and said in c["detail"]


def _netem_works() -> bool:
    ns = f"tcpvar-test-doctor-{os.getpid()}"
    try:
        if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode:
            return False
        return subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo",
                               "root", "netem", "delay", "1ms"],
                              capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _host_has_cubic() -> bool:
    ccs = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    modules = glob.glob(f"/lib/modules/{os.uname().release}/kernel/net/ipv4/tcp_cubic.ko*")
    return "cubic" in ccs or bool(modules)


def _stock_kernel_available() -> bool:
    base = os.environ.get("TCPVAR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tcpvar")
    if glob.glob(os.path.join(base, "kernels", "debian-*", "boot", "vmlinuz-*")):
        return True
    if not all(shutil.which(t) for t in ("apt-get", "apt-cache", "dpkg-deb", "depmod")):
        return False
    lists = subprocess.run(["apt-cache", "depends", "linux-image-amd64"], capture_output=True,
                           text=True).stdout
    return re.search(r"Depends:\s*linux-image-[0-9]", lists) is not None


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_main_job_verdict_matches_what_is_here(here):
    status, doc = here
    common = (os.geteuid() == 0 and all(shutil.which(t) for t in RUN_TOOLS)
              and all(map(_importable, ("tcpvar.ingest._pcapscan", "duckdb"))))
    tracepoint = any(os.path.isdir(f"{root}/events/tcp/tcp_probe")
                     for root in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"))
    netns = _netem_works() and _host_has_cubic()     # then auto picks netns
    beside = os.path.join(os.path.dirname(sys.executable), "vng")
    vm = ((os.access(beside, os.X_OK) or shutil.which("vng") is not None)
          and shutil.which("qemu-system-x86_64") is not None
          and any(os.access(p, os.X_OK) for p in ("/usr/lib/systemd/systemd-udevd",
                                                  "/lib/systemd/systemd-udevd"))
          and shutil.which("file") is not None and shutil.which("busybox") is not None
          and _stock_kernel_available())
    ready = common and ((netns and tracepoint) or (not netns and vm))
    backend = ("netns" if netns else "vm") if ready else None
    job = doc["main_job"]
    assert (doc["main_job_ready"], job["ready"], job["backend"]) == (ready, ready, backend), job
    assert status == (ExitStatus.OK if ready else ExitStatus.TESTBED)
    assert job["reason"] and (job["blocking"] == []) == ready
    assert check(doc, "netns", "netem")["ok"] == _netem_works()


def test_groups_and_their_readiness(here):
    _, doc = here
    assert [g["id"] for g in doc["groups"]] == GROUP_IDS
    assert [c["group"] for c in doc["checks"]] == sorted(
        (c["group"] for c in doc["checks"]), key=GROUP_IDS.index)
    for g in doc["groups"]:
        mine = [c for c in doc["checks"] if c["group"] == g["id"]]
        assert mine
        assert g["ready"] == all(c["ok"] for c in mine if c["required"])
        assert g["missing"] == [c["name"] for c in mine if not c["ok"]]
    for c in doc["checks"]:
        assert c["disables"]
        if c["ok"]:
            assert c["install"] is None and c["hint"] is None
        else:
            assert c["install"] or c["hint"], c


def test_every_json_field_documented(here):
    _, doc = here
    text = (ROOT / "docs" / "doctor.md").read_text()
    fields = set(doc) | set(doc["main_job"]) | set(doc["groups"][0]) | set(doc["checks"][0])
    documented = set(re.findall(r"`([a-z_]+)`", text))
    assert not fields - documented, sorted(fields - documented)


# ---------------------------------------------------------------- tools taken away

def test_missing_tools_named_with_their_install_commands(without_tools):
    folder, as_json, _ = without_tools
    assert not (folder / "tshark").exists() and (folder / "ip").exists()
    assert as_json.returncode == ExitStatus.TESTBED, as_json.stderr
    doc = json.loads(as_json.stdout)
    for group, name, command in (("wireshark", "tshark", "apt-get install tshark"),
                                 ("peers", "tshark", "apt-get install tshark"),
                                 ("netns", "iperf3", "apt-get install iperf3")):
        c = check(doc, group, name)
        assert not c["ok"] and c["install"] == command, c
    assert check(doc, "netns", "ip")["ok"] and check(doc, "peers", "tcptrace")["ok"]
    assert not doc["main_job_ready"] and doc["main_job"]["backend"] is None
    assert "netns/iperf3" in doc["main_job"]["blocking"]
    assert "apt-get install iperf3" in doc["main_job"]["reason"]


def test_missing_tools_in_the_human_output(without_tools):
    _, _, text = without_tools
    assert text.returncode == ExitStatus.TESTBED, text.stderr
    lines = text.stdout.splitlines()
    for name, command in (("tshark", "apt-get install tshark"),
                          ("iperf3", "apt-get install iperf3")):
        at = [i for i, ln in enumerate(lines) if re.match(rf"\s+✗ {re.escape(name)}\s", ln)]
        assert at, name
        for i in at:
            assert lines[i + 1].strip().startswith("disables: ")
            assert lines[i + 2].strip() == f"install: {command}"
    assert lines[-1].startswith("main job (tcpvar run --cc cubic --rtt 100): cannot run here")
    assert "iperf3" in lines[-1]


# ---------------------------------------------------------------- the human output

def test_one_section_per_group(here):
    status, doc = here
    done = doctor()
    assert done.returncode == status, done.stderr
    lines = done.stdout.splitlines()
    heads = [ln for ln in lines if not ln.startswith(" ") and " — " in ln
             and not ln.startswith("main job")]
    assert [h.split(" — ")[0] for h in heads] == [g["title"] for g in doc["groups"]]
    for head, g in zip(heads, doc["groups"]):
        assert head.endswith(": ready" if g["ready"] else ": not ready"), head
    verdict = [ln for ln in lines if ln.startswith("main job (")]
    assert len(verdict) == 1
    if doc["main_job_ready"]:
        assert f"can run here, on the {doc['main_job']['backend']} backend" in verdict[0]
    else:
        assert "cannot run here" in verdict[0]
