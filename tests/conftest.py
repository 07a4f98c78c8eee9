"""Shared test fixtures: where the captures are, and one store with every
capture analysed once per test session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tcpvar.analysis import AnalyzeOptions, analyze_capture
from tcpvar.store import Store

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "pcaps"
SHARED = Path(os.environ.get("TCPVAR_SHARED_PCAPS", ROOT.parent / "shared" / "pcaps"))

# readable captures (bad inputs live in fixtures/pcaps/bad/)
OWN_CAPTURES = sorted(p for p in FIXTURES.iterdir()
                      if p.is_file() and p.suffix in (".pcap", ".pcapng", ".gz")
                      and p.name != "pcapng_mixed_linktypes.pcapng")
SHARED_CAPTURES = sorted(p for p in SHARED.glob("*")
                         if p.suffix in (".pcap", ".pcapng", ".dmp")) if SHARED.is_dir() else []


def capture_id(path: Path) -> str:
    return path.name


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    s = Store(tmp_path_factory.mktemp("store") / "tcpvar.duckdb")
    yield s
    s.close()


@pytest.fixture(scope="session")
def analyzed(store):
    """analyzed(path) -> the JSON document of `tcpvar analyze` for it (cached)."""
    cache: dict[tuple, dict] = {}

    def get(path: Path, **kw) -> dict:
        key = (path, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = analyze_capture(store, str(path), AnalyzeOptions(**kw))
        return cache[key]
    return get
