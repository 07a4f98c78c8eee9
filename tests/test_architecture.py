"""docs/architecture.md matches the code: the files it names exist, and the
imports keep to its rules (nothing runs back up the pipeline, report/ runs
no SQL, bench/ imports nothing from tests/), read from the sources' own
import statements."""
from __future__ import annotations

import ast
import re

import pytest

from conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"

# a stage may not import these (later stages, or the pipelines and commands)
FORBIDDEN = {
    "artefacts": ("capture", "ingest", "analyzers", "report", "cli", "run", "analysis"),
    "capture": ("ingest", "analyzers", "report", "cli", "run", "analysis"),
    "ingest": ("analyzers", "report", "cli", "run", "analysis"),
    "analyzers": ("report", "cli", "run", "analysis"),
    "report": ("cli", "capture", "ingest", "store"),     # data in, never the store
}


def imported(path) -> set[str]:
    """The tcpvar modules a file imports (absolute, or relative to its package)."""
    package = path.parent.relative_to(ROOT).parts
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                names.add(".".join(("tcpvar", *base, *(node.module or "").split(".")))
                          .rstrip("."))
            elif node.module:
                names.add(node.module)
    return {n for n in names if n == "tcpvar" or n.startswith("tcpvar.")}


def sources(folder: str):
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("stage", sorted(FORBIDDEN))
def test_no_import_runs_back_up(stage):
    bad = []
    for path in sources(stage):
        for name in imported(path):
            parts = name.split(".")
            if len(parts) > 1 and parts[1] in FORBIDDEN[stage]:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad


def test_report_runs_no_sql():
    bad = [str(p.relative_to(ROOT)) for p in sources("report")
           if re.search(r"\.execute\(|\bSELECT\b", p.read_text())]
    assert not bad


def test_bench_imports_nothing_from_tests():
    bad = []
    for path in sources("bench"):
        text = path.read_text()
        imports = re.search(r"^\s*(from|import)\s+(tests|conftest|probe_scenario|run_helpers)\b",
                            text, re.M)
        paths = re.findall(r"sys\.path\.\w+\((.*)\)", text)
        if imports or any("tests" in p for p in paths):
            bad.append(str(path.relative_to(ROOT)))
    assert not bad


def test_named_files_exist():
    text = DOC.read_text()
    named = set(re.findall(r"`((?:[\w-]+/)+[\w.-]*)`", text))
    assert len(named) > 20
    missing = [n for n in sorted(named) if "NAME" not in n and not (ROOT / n).exists()]
    assert not missing


def test_every_folder_of_the_card_is_on_the_map():
    text = DOC.read_text()
    setup = (ROOT / "setup.cfg").read_text()
    folders = set(re.findall(r"^\s+tcpvar\.\w+ = ([\w-]+)$", setup, re.M))
    assert {"capture", "ingest", "analyzers", "report", "artefacts"} <= folders
    assert not [f for f in sorted(folders) if f"`{f}/`" not in text]
