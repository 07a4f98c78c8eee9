"""Documentation keeps up with the code: every command option, every column
of the store and every JSON field is described in docs/."""
from __future__ import annotations

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
        "__init__", "__main__", "main", "options"}
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
