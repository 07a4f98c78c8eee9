#!/usr/bin/env python3
"""Write the figures of kernel-patches/README.md's table of claims from a
run of tests/test_kernel.py, never by hand.

    kernel-patches/claims.py                     # runs the tests, then writes
    kernel-patches/claims.py --seen S --junit J  # from a run made before

The tests report what they saw (test_kernel.saw) into the file that
TCPVAR_KERNEL_SEEN names; pytest's JUnit XML says which passed. Each row of
the table names its tests in backticks; its last cell becomes what they saw,
or "failed" or "not run". A test that reports figures without a row, or a
row whose test passed without reporting any, is an error: the table and the
tests stay in step.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
BEGIN = "<!-- claims: written by kernel-patches/claims.py from a run of the tests -->"
END = "<!-- /claims -->"


def run_tests(seen: Path, junit: Path) -> None:
    env = {**os.environ, "TCPVAR_KERNEL_SEEN": str(seen)}
    # -m "": every test of the file, the campaign's boots included (CI runs
    # the file without them)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "",
                    f"--junitxml={junit}", str(HERE.parent / "tests" / "test_kernel.py")],
                   env=env, check=False)


def outcomes(junit: Path) -> tuple[dict[str, str], dict]:
    """Each test function's outcome (failed if any of its cases failed), and
    the run's totals."""
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    out: dict[str, str] = {}
    for case in suite.iter("testcase"):
        name = case.get("name", "").split("[")[0]
        kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")),
                    "passed")
        state = {"failure": "failed", "error": "failed"}.get(kind, kind)
        if out.get(name) != "failed":
            out[name] = state
    totals = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    totals["time"] = float(suite.get("time", 0))
    totals["date"] = (suite.get("timestamp") or datetime.date.today().isoformat())[:10]
    return out, totals


def cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def rewrite(readme: str, seen: dict[str, list[str]], states: dict[str, str],
            totals: dict) -> str:
    if readme.count(BEGIN) != 1 or readme.count(END) != 1:
        raise SystemExit(f"claims.py: {README} lacks the markers around the table")
    head, rest = readme.split(BEGIN)
    table, tail = rest.split(END)
    rows, named = [], set()
    for line in table.strip().splitlines():
        cells = line.split(" | ")
        tests = re.findall(r"`(test_\w+)`", cells[1]) if len(cells) == 3 else []
        if not tests:
            if line.startswith("|"):
                rows.append(line)
            continue
        named.update(tests)
        said = []
        for t in tests:
            state = states.get(t, "not run")
            if state == "passed" and t not in seen:
                raise SystemExit(f"claims.py: {t} passed but reported nothing (test_kernel.saw)")
            said.append("; ".join(seen[t]) if state == "passed" else state)
        rows.append(f"{cells[0]} | {cells[1]} | {cell('; '.join(said))} |")
    unlisted = sorted(set(seen) - named)
    if unlisted:
        raise SystemExit(f"claims.py: no row of the table for {', '.join(unlisted)}")
    passed = totals["tests"] - totals["failures"] - totals["errors"] - totals["skipped"]
    intro = (f"Figures from the run of {totals['date']} of `tests/test_kernel.py`: "
             f"{passed} passed, {totals['failures'] + totals['errors']} failed, "
             f"{totals['skipped']} skipped, in {totals['time'] / 60:.0f} min.")
    return head + BEGIN + "\n" + intro + "\n\n" + "\n".join(rows) + "\n" + END + tail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seen", type=Path, help="the file TCPVAR_KERNEL_SEEN named")
    ap.add_argument("--junit", type=Path, help="pytest's --junitxml of the same run")
    args = ap.parse_args()
    if (args.seen is None) != (args.junit is None):
        ap.error("--seen and --junit go together")
    with tempfile.TemporaryDirectory(prefix="tcpvar-claims-") as tmp:
        seen_path = args.seen or Path(tmp) / "seen.json"
        junit = args.junit or Path(tmp) / "junit.xml"
        if args.seen is None:
            run_tests(seen_path, junit)
        if not seen_path.is_file() or not junit.is_file():
            raise SystemExit("claims.py: the run left no results (see pytest's output)")
        seen = json.loads(seen_path.read_text())
        states, totals = outcomes(junit)
    README.write_text(rewrite(README.read_text(), seen, states, totals))
    print(f"claims.py: {README} written from the run of {totals['date']}")


if __name__ == "__main__":
    main()
