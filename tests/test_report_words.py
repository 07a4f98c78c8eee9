"""report.html's "capture drops" in words, not a Python dict: a real netns
run's own report, held to the packets tcpdump itself said it dropped (the
closing statistics in the run folder's *.tcpdump.log); and the same run
folder with a bottleneck log that counts drops, loaded and reported again."""
from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import tcpvar_main

TINY = ("--backend", "netns", "--rtt", 0, "--buffer", 60, "--duration", 3, "--bw", "20mbit")
CAPTURES = ("sender", "bottleneck")
DROPPED = re.compile(r"^(\d+) packets? dropped by kernel$", re.M)


class _Text(HTMLParser):
    """The page's visible text: each text node, outside scripts and styles."""

    def __init__(self):
        super().__init__()
        self.hidden, self.nodes = 0, []

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.hidden -= tag in ("script", "style")

    def handle_data(self, data):
        if not self.hidden and data.strip():
            self.nodes.append(data.strip())


def _visible(page: Path) -> list[str]:
    parser = _Text()
    parser.feed(page.read_text())
    return parser.nodes


def _tcpdump_dropped(run_dir: Path) -> dict[str, int]:
    """tcpdump's own count per capture, from its closing lines."""
    out = {}
    for name in CAPTURES:
        found = DROPPED.findall((run_dir / f"{name}.tcpdump.log").read_text())
        assert len(found) == 1, name
        out[name] = int(found[0])
    return out


def _expected_words(dropped: dict[str, int]) -> str:
    if not any(dropped.values()):
        return "none"
    return ", ".join(f"{name} {n}" for name, n in dropped.items())


def _drops_line(page: Path) -> str:
    nodes = _visible(page)
    assert nodes.count("capture drops") == 1, nodes
    return nodes[nodes.index("capture drops") + 1]


def _no_dict_syntax(page: Path) -> None:
    for node in _visible(page):
        assert "{" not in node and "}" not in node, node
        assert not re.search(r"'\w+': ", node), node


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("words")
    r = tcpvar_main("run", *TINY, "--db", tmp / "r.duckdb", "--out", tmp / "runs", "-q", cwd=tmp)
    assert r.returncode == 0, r.stderr
    (folder,) = (tmp / "runs").iterdir()
    return folder


def test_run_report_says_drops_in_words(run_dir):
    page = run_dir / "report.html"
    assert _drops_line(page) == _expected_words(_tcpdump_dropped(run_dir))
    _no_dict_syntax(page)


def test_counted_drops_are_named_per_capture(run_dir, tmp_path):
    # the same run, its bottleneck tcpdump having counted 12 drops: the log
    # is edited by hand and the manifest takes its count, as the runner does
    folder = tmp_path / run_dir.name
    shutil.copytree(run_dir, folder)
    log = folder / "bottleneck.tcpdump.log"
    log.write_text(DROPPED.sub("12 packets dropped by kernel", log.read_text()))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["capture_drops"] = _tcpdump_dropped(folder)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    db, page = tmp_path / "b.duckdb", tmp_path / "r.html"
    r = tcpvar_main("load", "-q", "--db", db, folder, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = tcpvar_main("report", "run:1", "--db", db, "-q", "-o", page, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _drops_line(page) == f"sender {_tcpdump_dropped(folder)['sender']}, bottleneck 12"
    _no_dict_syntax(page)
