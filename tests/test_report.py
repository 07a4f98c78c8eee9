"""`tcpvar report` on captures: one self-contained page that headless
Chromium opens with no console message and every figure drawn. A run's own
report.html (written by `tcpvar run`) is tested in test_run_vm.py."""
from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser

import tshark_truth as truth
from browser import open_page

import peers
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


class _Page(HTMLParser):
    """The page's definition lists and tables, as text."""

    def __init__(self):
        super().__init__()
        self.items: list[tuple[str, str]] = []          # (dt, dd)
        self.rows: list[list[str]] = []                  # table rows, headers included
        self._text: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("dt", "dd", "td", "th"):
            self._text = []
        elif tag == "tr":
            self.rows.append([])

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag not in ("dt", "dd", "td", "th") or self._text is None:
            return
        text, self._text = "".join(self._text), None
        if tag == "dt":
            self.items.append((text, ""))
        elif tag == "dd":
            self.items[-1] = (self.items[-1][0], text)
        else:
            self.rows[-1].append(text)


UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "bit/s": 1, "kbit/s": 1e3,
         "Mbit/s": 1e6, "Gbit/s": 1e9, "s": 1}


def _printed(text: str, truth: float) -> bool:
    """Whether @text ("5.52 MB") is @truth rounded to the digits printed."""
    number, unit = text.split()
    decimals = len(number.partition(".")[2])
    return abs(float(number) * UNITS[unit] - truth) <= 0.5 * 10 ** -decimals * UNITS[unit]


def test_report_numbers_are_tsharks(tmp_path):
    """The numbers report.html prints for iperf_rto.pcap, parsed from the
    page, against tshark's: frames, TCP segments, duration, and per
    direction its packets, data packets and bytes, the bytes sent once and
    the rates over the connection's span, each to the digits printed."""
    path = FIXTURES / "iperf_rto.pcap"
    page = tmp_path / "r.html"
    res = tcpvar_main("report", path, "--db", tmp_path / "t.duckdb", "-q", "-o", page)
    assert res.returncode == 0, res.stderr
    parsed = _Page()
    parsed.feed(page.read_text())
    facts = dict(parsed.items)
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "separator=,",
                          "-e", "frame.time_epoch", "-e", "ip.src", "-e", "tcp.srcport",
                          "-e", "ip.dst", "-e", "tcp.dstport", "-e", "tcp.len", "-e", "tcp.seq"],
                         capture_output=True, text=True, check=True).stdout
    frames = [line.split(",") for line in out.splitlines()]
    tcp = [f for f in frames if f[2]]
    times = [float(f[0]) for f in frames]
    assert int(facts["frames"]) == len(frames)
    assert int(facts["TCP segments"]) == len(tcp)
    assert _printed(facts["duration"], max(times) - min(times))
    header, *rows = parsed.rows
    col = {name: i for i, name in enumerate(header)}
    assert len(rows) == 4
    for row in rows:
        src, _, dst = row[col["from → to"]].split()
        sender, receiver = peers.endpoint(src), peers.endpoint(dst)
        mine = [f for f in tcp if ((f[1], int(f[2])), (f[3], int(f[4]))) == (sender, receiver)]
        both = [float(f[0]) for f in tcp if {(f[1], int(f[2])), (f[3], int(f[4]))}
                == {sender, receiver}]
        data = [int(f[5]) for f in mine if int(f[5]) > 0]
        span = max(both) - min(both)                    # the connection, first to last packet
        once = truth.sent_once([(0, int(f[6]), int(f[5])) for f in mine])
        assert int(row[col["pkts"]]) == len(mine)
        assert int(row[col["data pkts"]]) == len(data)
        assert _printed(row[col["data bytes"]], sum(data)), row
        assert _printed(row[col["unique"]], once), row
        assert _printed(row[col["throughput"]], 8 * sum(data) / span), row
        assert _printed(row[col["goodput"]], 8 * once / span), row
