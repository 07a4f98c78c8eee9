"""`tcpvar report` on captures: one self-contained page that headless
Chromium opens with no console message and every figure drawn. A run's own
report.html (written by `tcpvar run`) is tested in test_run_vm.py."""
from __future__ import annotations

import re

from browser import open_page

from conftest import FIXTURES, tcpvar_main


def test_report_of_captures_opens_in_chromium(tmp_path):
    page = tmp_path / "r.html"
    captures = [FIXTURES / "iperf_4flows.pcap", FIXTURES / "ngwa_flows.pcap",
                FIXTURES / "thirdparty" / "chrissanders__tcp_zerowindowdead.pcapng"]
    res = tcpvar_main("report", *captures, "--db", tmp_path / "t.duckdb", "-q", "-o", page)
    assert res.returncode == 0, res.stderr
    text = page.read_text()
    # nothing from the network: every image is inline, no script or style is fetched
    assert not re.search(r'(src|href)="(?!data:)', text)
    for capture in captures:
        assert f"<h2>{capture.resolve()}</h2>" in text
    # iperf_4flows: 6 kinds and fairness (4 flows); ngwa_flows: 6, fairness, ngwa; one flow: 6
    assert text.count("<img ") == 7 + 8 + 6
    console, figures = open_page(page, tmp_path)
    assert console == [] and figures == "21/21"


def test_report_of_nothing_readable(tmp_path):
    res = tcpvar_main("report", tmp_path / "missing.pcap", "--db", tmp_path / "t.duckdb",
                      "-o", tmp_path / "r.html")
    assert res.returncode != 0 and res.stderr.count("\n") == 1
    assert not (tmp_path / "r.html").exists()
