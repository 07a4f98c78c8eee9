"""The options several commands share are declared once, in cli/options.py,
and every command that takes one still lists it in its --help."""
from __future__ import annotations

import ast

import pytest

from conftest import ROOT, tcpvar_main

CLI = ROOT / "cli"
SHARED = ("--db", "--backend", "--kernel", "--json", "-q", "--quiet")

# Which commands take which shared option (a change here is a change of the
# command line, and of docs/).
TAKES = {
    "analyze": ("--db", "--json", "-q"),
    "compare": ("--db", "--json"),
    "doctor": ("--json",),
    "export": ("--db",),
    "load": ("--db", "--json", "-q"),
    "merge": ("--db",),
    "plot": ("--db", "--json", "-q"),
    "probe": ("--db", "--json"),
    "query": ("--db", "--json"),
    "report": ("--db", "-q"),
    "reproduce": ("--db", "--backend", "--json", "-q"),
    "run": ("--db", "--backend", "--kernel", "--json", "-q"),
    "spark": ("--json", "-q"),
    "sweep": ("--db", "--backend", "--kernel", "--json", "-q"),
}


def _declared(path) -> list[tuple[int, str]]:
    """(line, name) of every string in @path that is exactly a shared
    option's name: an option declared there, whatever the call."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and node.value in SHARED]


def test_shared_options_declared_only_in_options_py():
    found = [f"cli/{p.name}:{line}: {name}" for p in sorted(CLI.glob("*.py"))
             if p.name != "options.py" for line, name in _declared(p)]
    assert not found, "declare these in cli/options.py:\n" + "\n".join(found)
    assert {name for _, name in _declared(CLI / "options.py")} == set(SHARED)


def test_every_command_module_is_in_the_table():
    from tcpvar.cli.main import COMMANDS

    assert set(TAKES) == set(COMMANDS) - {"kernel", "wireshark"}   # groups: no shared option


@pytest.mark.parametrize("name", sorted(TAKES))
def test_help_lists_the_shared_options(name):
    res = tcpvar_main(name, "--help")
    assert res.returncode == 0, res.stderr
    listed = {word.rstrip(",") for line in res.stdout.splitlines()
              if line.lstrip().startswith("-") for word in line.split()[:2]}
    assert sorted((set(SHARED) - {"--quiet"}) & listed) == sorted(TAKES[name]), res.stdout


def test_one_set_of_kernels(tmp_path):
    """Every command taking a kernel names the same ones: those the kernel
    lookup names when given none of them."""
    from tcpvar.capture.kernels import resolve
    from tcpvar.errors import TcpvarError

    kernels = {line.split()[1] for name, opts in TAKES.items() if "--kernel" in opts
               for line in tcpvar_main(name, "--help").stdout.splitlines()
               if line.lstrip().startswith("--kernel ")}
    assert kernels == {"stock|patched|patched-debug|PATH"}
    with pytest.raises(TcpvarError) as refused:
        resolve(str(tmp_path / "no-such-bzImage"))
    named = refused.value.args[0].split("(use ")[1]
    assert [k for k in ("stock", "patched", "patched-debug") if f"{k}," in named] == \
        ["stock", "patched", "patched-debug"], named
