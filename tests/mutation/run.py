"""Run the analyzers' mutants (mutants.py) one at a time and print which
tests caught each: a mutant no test catches is a test to write.

    python tests/mutation/run.py                  # every mutant, its own tests
    python tests/mutation/run.py triple_dupacks+1 csv_zero
    python tests/mutation/run.py --list
    python tests/mutation/run.py series_bin+1 -- tests/test_series.py -k iperf

After `--`, the pytest arguments replace the mutant's own tests. Exit
status 1 when a mutant survives."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from mutants import MUTANTS  # noqa: E402  (beside this script)

_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?:\[.*\])?(?: - |$)", re.M)


def run_one(name: str, tests: list[str], n: int) -> tuple[Counter, str]:
    """Failing tests of the mutant (test function -> cases failed), and
    pytest's last line."""
    env = {**os.environ, "TCPVAR_MUTANT": name,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE),
                                                       os.environ.get("PYTHONPATH")]))}
    base = Path(tempfile.gettempdir()) / f"tcpvar-mutant-{os.getpid()}-{n}"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "mutants",
                           "-p", "no:cacheprovider", f"--basetemp={base}", *tests],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    return Counter(_FAILED.findall(proc.stdout)), lines[-1] if lines else proc.stderr[-300:]


def main(argv: list[str]) -> int:
    extra = []
    if "--" in argv:
        argv, extra = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mutants", nargs="*", help="names (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants and their tests")
    args = ap.parse_args(argv)
    if args.list:
        for m in MUTANTS.values():
            print(f"{m.name:18} {m.what}\n{'':18} {' '.join(m.tests)}")
        return 0
    unknown = [n for n in args.mutants if n not in MUTANTS]
    if unknown:
        ap.error(f"no mutant {', '.join(unknown)} (see --list)")
    survivors = []
    print("| mutant | what | tests failed (cases) | pytest |\n| --- | --- | --- | --- |")
    for n, name in enumerate(args.mutants or MUTANTS):
        caught, last = run_one(name, extra or MUTANTS[name].tests, n)
        if not caught:
            survivors.append(name)
        which = ", ".join(f"{t} ({k})" for t, k in sorted(caught.items())) or "**none**"
        print(f"| {name} | {MUTANTS[name].what} | {which} | {last} |", flush=True)
    if survivors:
        print(f"survived: {', '.join(survivors)}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
