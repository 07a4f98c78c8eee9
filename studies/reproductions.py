#!/usr/bin/env python3
"""Run the seed papers' reproductions at a scale and write what they
measured to docs/reproductions/STUDY-SCALE.md: a campaign of hours, run
outside CI. Resumable: the runs go into one store (reproductions.duckdb
beside this script's working folder), and a study run again skips what the
store holds, so an interrupted campaign goes on where it stopped.

    .venv/bin/python studies/reproductions.py --scale small kinicki ngwa
    .venv/bin/python studies/reproductions.py --scale small            # all four
    .venv/bin/python studies/reproductions.py --scale small --write-only wbrto
    .venv/bin/python studies/reproductions.py --scale paper --jobs 2 callegari2011

docs/reproductions.md (written by hand) reads these pages: how each claim
of the paper fares within the confidence intervals.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ("kinicki", "ngwa", "wbrto", "callegari2011")
# the run options a study's delay scatter groups by (docs/img/reproductions/);
# kinicki's variants share each run, so its runs make one point
SCATTER_BY = {"ngwa": "ngwa", "wbrto": "wbrto,rtt"}


def tcpvar(*args: str, work: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "tcpvar"
    return subprocess.run([str(exe), *args], cwd=work, text=True, stdout=subprocess.PIPE)


def commit() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def header(study: str, scale: str, took_s: float | None, ran: str | None) -> str:
    """@ran: the commit the runs were made with (None: pages written again
    from the store, whose runs an earlier commit made)."""
    took = f", the runs took {took_s / 60:.0f} min" if took_s else ""
    made = f"tcpvar {ran}" if ran else f"the page written by tcpvar {commit()} from the store"
    return (f"# {study} at scale {scale}\n\n"
            f"Measured by `studies/reproductions.py --scale {scale} {study}` on "
            f"{time.strftime('%Y-%m-%d')}: {made}, {os.cpu_count()} cores, "
            f"host kernel {platform.release()}, the micro-VM under TCG"
            f"{' on virtual time' if scale == 'paper' else ''}{took}.\n\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("studies", nargs="*", default=list(STUDIES), metavar="STUDY")
    ap.add_argument("--scale", default="small", choices=("smoke", "small", "full", "paper"))
    ap.add_argument("--jobs", help="micro-VMs side by side (tcpvar reproduce --jobs)")
    ap.add_argument("--table", action="append", default=[],
                    help="only this table (repeatable; tcpvar reproduce --table)")
    ap.add_argument("--work", type=Path, default=ROOT / "studies" / "work",
                    help="folder of the store and the run folders")
    ap.add_argument("--write-only", action="store_true",
                    help="write the pages from what the store holds; run nothing")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    out = ROOT / "docs" / "reproductions"
    out.mkdir(exist_ok=True)
    status = 0
    ran = None if a.write_only else commit()    # before the hours of runs, not after
    for study in a.studies:
        args = [study, "--scale", a.scale, "--db", "reproductions.duckdb",
                *(arg for t in a.table for arg in ("--table", t))]
        took = None
        if not a.write_only:
            t0 = time.monotonic()
            jobs = ["--jobs", a.jobs] if a.jobs else []
            done = tcpvar("reproduce", *args, *jobs, "-q", work=a.work)
            took = time.monotonic() - t0
            if done.returncode != 0:
                print(f"{study}: tcpvar reproduce exited {done.returncode}; the page shows "
                      f"what is stored", file=sys.stderr)
                status = 1
        page = tcpvar("reproduce", *args, "--dry-run", "--markdown", work=a.work)
        if page.returncode != 0:
            return 1
        (out / f"{study}-{a.scale}.md").write_text(header(study, a.scale, took, ran) + page.stdout)
        if study in SCATTER_BY:
            figure = ROOT / "docs" / "img" / "reproductions" / f"{study}-{a.scale}.png"
            figure.parent.mkdir(parents=True, exist_ok=True)
            tcpvar("compare", "--db", "reproductions.duckdb", "--study", f"{study}-{a.scale}",
                   "--by", SCATTER_BY[study], "--plot", str(figure), work=a.work)
        print(f"{study}: docs/reproductions/{study}-{a.scale}.md")
    return status


if __name__ == "__main__":
    sys.exit(main())
