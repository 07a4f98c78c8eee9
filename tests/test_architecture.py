"""docs/architecture.md matches the code: the files it names exist, and the
imports keep to its rules (nothing runs back up the pipeline, the pipelines
import no command and no presentation, no module imports itself through
others, SQL only where the store is read and written, bench/ imports
nothing from tests/), read from the sources' own import statements."""
from __future__ import annotations

import ast
import re

import pytest

from conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"

# a folder may not import these (later stages, the pipelines, the commands)
FORBIDDEN = {
    # the basement: errors, progress, signals, tools, resources, safe_write
    "tcpvar": ("artefacts", "capture", "ingest", "store", "analyzers", "report", "cli",
               "pipelines", "dissectors"),
    "artefacts": ("capture", "ingest", "store", "analyzers", "report", "cli", "pipelines"),
    "capture": ("ingest", "analyzers", "report", "cli", "pipelines"),
    "store": ("capture", "ingest", "analyzers", "report", "cli", "pipelines"),
    "ingest": ("analyzers", "report", "cli", "pipelines"),
    "analyzers": ("report", "cli", "pipelines"),
    "pipelines": ("cli", "report"),      # plain data out: the commands present it
    "report": ("cli", "pipelines", "capture", "ingest", "store"),    # data in, never the store
}
# the pipelines, lowest first: one may import only those before it
PIPELINES = ("load", "plot", "analyze", "report", "run", "sweep", "reproduce", "spark",
             "probe", "wireshark", "doctor")
# where SQL is written: the stages that write the store and read it back
SQL_FOLDERS = ("store", "ingest", "analyzers")
_SQL = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|WITH|COPY|ATTACH|"
                  r"PRAGMA|SET|DESCRIBE|EXPORT|IMPORT)\b")


def _imports(path):
    """(module, names taken from it) of each import statement of @path,
    anywhere in it (also inside functions); relative ones made absolute."""
    folder, *inner = path.parent.relative_to(ROOT).parts
    package = (*_package_dirs()[folder].split("."), *inner)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join((*base, *(node.module or "").split("."))).rstrip(".")
            else:
                module = node.module
            yield module, [a.name for a in node.names]


def imported(path) -> set[str]:
    """The tcpvar modules a file imports, and the packages whose files it
    reads (importlib.resources.files("tcpvar.X"))."""
    names = {m for m, _ in _imports(path)}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "files" and node.args \
                and isinstance(node.args[0], ast.Constant):
            names.add(str(node.args[0].value))
    return {m for m in names if m == "tcpvar" or m.startswith("tcpvar.")}


def imported_modules(path, modules) -> set[str]:
    """The modules of @modules a file imports: `from P import M` imports
    the module P.M when there is one, else a name of P."""
    out = set()
    for module, names in _imports(path):
        subs = {f"{module}.{n}" for n in names} & set(modules)
        out |= subs
        if module in modules and len(subs) < len(names) or not names:
            out.add(module)
    return out & set(modules)


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


def test_pipelines_import_only_those_below():
    assert sorted(p.stem for p in sources("pipelines") if p.stem != "__init__") \
        == sorted(PIPELINES)
    modules = _modules()
    bad = []
    for path in sources("pipelines"):
        if path.stem == "__init__":
            continue
        for name in imported_modules(path, modules):
            parts = name.split(".")
            if parts[1:2] == ["pipelines"] and len(parts) > 2 and \
                    PIPELINES.index(parts[2]) >= PIPELINES.index(path.stem):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad


def _sql_in(path) -> list[str]:
    """Lines of @path that hold SQL: a string (not a docstring) that starts
    with an SQL statement, or a call of .execute/.sql with arguments."""
    tree = ast.parse(path.read_text())
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Constant)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and _SQL.match(str(first.value)):
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docs and _SQL.match(node.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("execute", "executemany", "sql") and node.args:
            lines.append(node.lineno)
    return [f"{path.relative_to(ROOT)}:{n}" for n in sorted(set(lines))]


def test_sql_only_where_the_store_is_read_and_written():
    folders = [f for f in _package_dirs() if f not in SQL_FOLDERS]
    assert {"pipelines", "cli", "report", "capture"} <= set(folders)
    bad = [line for f in folders for path in sources(f) for line in _sql_in(path)]
    assert not bad


def test_the_rule_sees_sql():
    """The SQL rule finds what it is for (a rule that sees nothing passes anyway)."""
    found = [line for path in sources("analyzers") for line in _sql_in(path)]
    assert any(line.startswith("analyzers/runs.py:") for line in found)


def test_no_import_cycle():
    """No module of tcpvar imports itself through others, also not through
    an import inside a function."""
    modules = _modules()
    graph = {m: sorted(imported_modules(p, modules) - {m}) for m, p in modules.items()}
    cycles = _cycles(graph)
    assert not cycles, cycles


def _package_dirs() -> dict[str, str]:
    """Checkout folder -> its package, from setup.cfg's package_dir."""
    setup = (ROOT / "setup.cfg").read_text()
    return {folder: package for package, folder in
            re.findall(r"^\s+(tcpvar(?:\.\w+)?) = ([\w-]+)$", setup, re.M)}


def _modules() -> dict:
    """Every Python module of tcpvar by its installed name."""
    out = {}
    for folder, package in _package_dirs().items():
        for path in sources(folder):
            rel = path.relative_to(ROOT / folder).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            out[".".join((package, *rel))] = path
    return out


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """One cycle of each group of modules that reach each other (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


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
