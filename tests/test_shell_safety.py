"""Shell metacharacters in any option never reach a shell: tcpvar starts
its tools with argument lists, and a value a shell would run is either
refused in one line or taken literally."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conftest import FIXTURES, error_lines
from conftest import tcpvar_process as tcpvar

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = ("tcpvar", "pipelines", "cli", "capture", "artefacts", "ingest", "analyzers",
                "store", "report", "studies", "hooks", "bench")
SHELLS = {("os", "system"), ("os", "popen"), ("subprocess", "getoutput"),
          ("subprocess", "getstatusoutput")}


def _calls_a_shell(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                (f.value.id, f.attr) in SHELLS:
            lines.append(node.lineno)
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant)
                                          and kw.value.value is False):
                lines.append(node.lineno)
    return lines


def test_no_code_starts_a_shell():
    sources = [p for d in PACKAGE_DIRS for p in (ROOT / d).rglob("*.py")
               if ".venv" not in p.parts]
    assert len(sources) > 40
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sources
             for n in _calls_a_shell(ast.parse(p.read_text(), str(p)))]
    assert not found, found


def _payloads(marker: Path) -> list[str]:
    """Values a shell would run `touch MARKER` for (in the commands' folder)."""
    m = marker.name
    return [f"x;touch {m}", f"$(touch {m})", f"`touch {m}`", f"x && touch {m}",
            f"x|touch {m}", f"'\"; touch {m}; \""]


@pytest.mark.parametrize("args", [
    ["run", "--backend", "netns", "--cc"], ["run", "--backend", "vm", "--bw"],
    ["run", "--buffer"], ["run", "--bw-schedule"], ["run", "--backend", "vm", "--kernel"],
    ["sweep", "--name", "s", "--cc"], ["sweep", "--name", "s", "--bw"],
    ["analyze"], ["plot", "--db", "t.duckdb"], ["probe", "--addr"],
    ["compare", "--by"], ["compare", "--study"], ["reproduce"],
])
def test_refused_in_one_line(tmp_path, args):
    marker = tmp_path / "ran"
    for payload in _payloads(marker):
        res = tcpvar(*args, payload, cwd=tmp_path)
        assert res.returncode != 0, (args, payload, res.stdout)
        assert len(error_lines(res.stderr)) == 1 and "Traceback" not in res.stderr, \
            (args, payload, res.stderr)
    assert not marker.exists()


def test_taken_literally(tmp_path):
    """A study name and a store path are names: kept as they are, never run."""
    marker = tmp_path / "ran"
    for payload in _payloads(marker):
        db = f"{payload}.duckdb"
        res = tcpvar("sweep", "--dry-run", "--json", "--name", payload, "--cc", "cubic",
                     "--db", db, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["study"] == payload
        res = tcpvar("analyze", "-q", "--db", db, FIXTURES / "sll.pcap", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert (tmp_path / db).is_file()
    assert not marker.exists()
