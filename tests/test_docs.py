"""Documentation keeps up with the code: every command option, every column
of the store and every JSON field is described in docs/, and the kernel's
table of claims names the tests that fill it."""
from __future__ import annotations

import ast
import importlib.util
import re

import click
import pytest

from tcpvar.cli.main import cli

from conftest import FIXTURES, ROOT

DOCS = ROOT / "docs"


def _options(command: click.Command):
    for param in command.params:
        if isinstance(param, click.Option):
            yield from (o for o in param.opts if o.startswith("--") and o != "--help")


def test_every_command_module_is_a_command():
    """The group imports a command's module on use: a module left out of
    its list would be a command nobody can run."""
    modules = {p.stem for p in (ROOT / "cli").glob("*.py")} - {
        "__init__", "__main__", "main", "options", "start"}
    assert set(cli.list_commands(None)) == modules


@pytest.mark.parametrize("name", cli.list_commands(None))
def test_every_option_documented(name):
    text = "\n".join(p.read_text() for p in sorted(DOCS.glob("*.md")))
    command = cli.get_command(None, name)
    assert command.name == name
    assert command.help and "Examples" in command.help
    missing = [o for o in _options(command) if f"`{o}" not in text]
    assert not missing, f"{name}: undocumented options {missing}"


def test_every_column_documented(store):
    text = (DOCS / "schema.md").read_text()
    rows = store.con.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_name <> 'dir_counters'").fetchall()
    missing = [f"{t}.{c}" for t, c in rows if f"`{c}`" not in text]
    assert not missing
    for (table,) in store.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall():
        assert f"`{table}`" in text, table


def test_every_json_field_documented(analyzed):
    text = (DOCS / "analyze.md").read_text()
    doc = analyzed(FIXTURES / "sll.pcap")
    conn = doc["connections"][0]
    fields = set(conn) | set(conn["a2b"]) | {k for k in doc if k != "connections"}
    documented = set(re.findall(r"`([a-z0-9_]+)`", text))
    assert not fields - documented, sorted(fields - documented)


def _claims_table() -> str:
    text = (ROOT / "kernel-patches" / "README.md").read_text()
    return text.split("<!-- claims:", 1)[1].split("<!-- /claims -->", 1)[0]


def test_kernel_claims_table_names_every_reporting_test():
    """Every test of test_kernel.py that reports what it saw has a row in
    kernel-patches/README.md's table of claims, and every row names such a
    test: claims.py fills the table from their reports."""
    tree = ast.parse((ROOT / "tests" / "test_kernel.py").read_text())
    reporting = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)
                 and any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "saw"
                         for n in ast.walk(f))}
    assert reporting and set(re.findall(r"`(test_\w+)`", _claims_table())) == reporting


def test_claims_script_writes_what_the_run_saw(tmp_path, monkeypatch):
    """claims.py on a run of two tests, one passed and one failed: the
    passed one's row gets its report, the failed one's "failed", a row of
    a test that did not run "not run"; a report without a row is refused."""
    spec = importlib.util.spec_from_file_location("claims", ROOT / "kernel-patches" / "claims.py")
    claims = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(claims)
    readme = (f"intro\n\n{claims.BEGIN}\nold line\n\n| claim | test | seen |\n| --- | --- | --- |\n"
              "| a | `test_a` | old |\n| b | `test_b`, `test_c` | old |\n| d | `test_d` | old |\n"
              f"{claims.END}\n\nafter\n")
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite errors="0" failures="1" skipped="0" tests="3" time="600" '
        'timestamp="2026-11-28T03:00:00"><testcase name="test_a"/>'
        '<testcase name="test_b[x]"/><testcase name="test_c"><failure/></testcase>'
        '</testsuite></testsuites>')
    states, totals = claims.outcomes(junit)
    assert states == {"test_a": "passed", "test_b": "passed", "test_c": "failed"}
    out = claims.rewrite(readme, {"test_a": ["1 of 1"], "test_b": ["x: 2 B"]}, states, totals)
    assert out == (f"intro\n\n{claims.BEGIN}\nFigures from the run of 2026-11-28 of "
                   "`tests/test_kernel.py`: 2 passed, 1 failed, 0 skipped, in 10 min.\n\n"
                   "| claim | test | seen |\n| --- | --- | --- |\n| a | `test_a` | 1 of 1 |\n"
                   "| b | `test_b`, `test_c` | x: 2 B; failed |\n| d | `test_d` | not run |\n"
                   f"{claims.END}\n\nafter\n")
    with pytest.raises(SystemExit, match="no row of the table for test_e"):
        claims.rewrite(readme, {"test_a": ["1"], "test_b": ["2"], "test_e": ["3"]}, states,
                       totals)
