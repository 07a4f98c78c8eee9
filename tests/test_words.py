"""One word for one thing (docs/architecture.md, "Words"): the retired words
stay out of code, docs and messages."""
from __future__ import annotations

import ast
import re
import subprocess

from conftest import ROOT

TEXT = (".py", ".md", ".sql", ".toml", ".sh", ".c", ".h", ".lua", ".cfg", ".txt", ".properties")
# Hashed into the patched kernel's cache key (kernel-patches/build.sh): a
# word changed there rebuilds the kernel, for nothing.
KERNEL_INPUTS = re.compile(r"kernel-patches/(patches/.*|.*\.config)$")

RETIRING = "is not a tcpvar word"
BANNED = {  # pattern: what to say instead
    re.compile(r"\bexperiments?\b", re.I):
        "run, session or study (a paper's own: its measurements)",
    re.compile(r"--flow(?![\w-])"): "--conn N: an option that picks one takes a connection",
    re.compile(r"\b(report|store)[./]export\b"): "report/tabular.py or store/parquet.py",
}


def _files() -> list:
    """Every file of the checkout git keeps or would keep, but this one."""
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / n for n in names.splitlines()
            if n.endswith(TEXT) and not KERNEL_INPUTS.match(n) and n != "tests/test_words.py"
            and (ROOT / n).is_file()]


def test_no_retired_words():
    found = []
    for path in _files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if RETIRING in line:        # the glossary naming the word it retires
                continue
            for pattern, instead in BANNED.items():
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
                                 f"  -> {instead}")
    assert not found, "\n".join(found)


def test_probe_record_named_once():
    """The probe record's file name is artefacts/probe_record.CSV_NAME in
    tcpvar's code, never the name written out again."""
    name = "tcp_probe" + ".csv"
    found = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in _files()
             if p.suffix == ".py" and p.parts[len(ROOT.parts)] not in ("tests", "bench")
             and p.relative_to(ROOT).as_posix() != "artefacts/probe_record.py"
             for node in ast.walk(ast.parse(p.read_text()))
             if isinstance(node, ast.Constant) and node.value == name]
    assert not found, found


def test_vm_logs_stay_out_of_git():
    """The micro-VM's spec and log files beside the run folders are ignored,
    and none is kept."""
    kept = subprocess.run(["git", "ls-files", "--", "*.tcpvar-vm-*"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.split()
    assert not kept
    for path in ("runs/.tcpvar-vm-091a1e.log", "elsewhere/.tcpvar-vm-1.json"):
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
        assert ignored.returncode == 0, f"{path} is not ignored"
