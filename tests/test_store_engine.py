"""DuckDB's engine module without its package (store/engine.py), which
`tcpvar analyze` runs on: checked in processes of their own, since this one
has imported the package."""
from __future__ import annotations

import json
import subprocess
import sys

import peers
from conftest import FIXTURES
from conftest import tcpvar_process as tcpvar

CAPTURE = FIXTURES / "iperf_4flows.pcap"

# the scanner's per-direction table registered on an engine-only connection,
# read whole and through a filter DuckDB offers the scan; then a pyarrow
# table, which goes to the package's own adapter
SCAN = """
import json, sys
from tcpvar.ingest import _pcapscan
from tcpvar.store.engine import duckdb
engine = duckdb()
con = engine.connect(":memory:")
scanner = _pcapscan.Scanner(sys.argv[1], packets=False)
while scanner.step()[0] == "more":
    pass
conns, stats = scanner.connections()
con.register("t", stats)
out = {"module": engine.__name__,
       "every": con.execute("SELECT conn, dir, packets FROM t ORDER BY ALL").fetchall(),
       "over_100": con.execute("SELECT conn, dir FROM t WHERE packets > 100 "
                               "ORDER BY ALL").fetchall(),
       "package_after_scan": "duckdb" in sys.modules}
import pyarrow
con.register("p", pyarrow.table({"x": [1, 2, 3]}))
out["pyarrow"] = con.execute("SELECT sum(x) FROM p WHERE x > 1").fetchall()
out["package_after_pyarrow"] = "duckdb" in sys.modules
print(json.dumps(out))
"""

# `tcpvar analyze` in this process, then which of DuckDB's modules it loaded
ANALYZE = """
import json, sys
from tcpvar.cli.main import main
status = main(["analyze", "-q", "--db", sys.argv[1], sys.argv[2]])
with open(sys.argv[3], "w") as out:
    json.dump({"status": status, "package": "duckdb" in sys.modules,
               "engine": "_duckdb" in sys.modules}, out)
"""


def _tcptrace_packets(path) -> list[list[int]]:
    """[conn, dir, total packets] of each direction, from tcptrace."""
    return [[n, d, int(peers.number(conn[key]["total packets"]))]
            for n, conn in enumerate(peers.tcptrace(str(path)), start=1)
            for d, key in enumerate(("a2b", "b2a"))]


def test_a_scan_table_read_through_the_engine_alone():
    """The scanner's table reads the same through the engine's Arrow scan as
    tcptrace counts it, and a filter over it keeps the rows it should
    (the adapter declines filters; DuckDB applies them). A pyarrow table
    brings in the package, whose adapter reads it."""
    res = subprocess.run([sys.executable, "-c", SCAN, str(CAPTURE)], capture_output=True,
                         text=True, check=True)
    out = json.loads(res.stdout)
    truth = _tcptrace_packets(CAPTURE)
    assert out["module"] == "_duckdb"
    assert out["every"] == truth
    over = [[c, d] for c, d, n in truth if n > 100]
    assert 0 < len(over) < len(truth)       # the filter has something to decide
    assert out["over_100"] == over
    assert not out["package_after_scan"]
    assert out["pyarrow"] == [[5]]
    assert out["package_after_pyarrow"]


def test_analyze_runs_on_the_engine_alone(tmp_path):
    """`tcpvar analyze` stores a capture without importing DuckDB's package,
    every TCP segment tshark counts among its packets."""
    db, flags = tmp_path / "t.duckdb", tmp_path / "modules.json"
    subprocess.run([sys.executable, "-c", ANALYZE, str(db), str(CAPTURE), str(flags)],
                   check=True)
    assert json.loads(flags.read_text()) == {"status": 0, "package": False, "engine": True}
    tshark = subprocess.run(["tshark", "-n", "-r", str(CAPTURE), "-Y", "tcp", "-T", "fields",
                             "-e", "frame.number"], capture_output=True, text=True, check=True)
    stored = tcpvar("query", "--db", db, "--csv", "SELECT count(*) FROM packets")
    assert stored.stdout.splitlines()[1] == str(len(tshark.stdout.split()))


# a Ctrl-C as the engine is imported: a finder sends SIGINT just before
# Python loads `_duckdb`; the import completes and the interrupt comes after
INTERRUPTED_IMPORT = """
import json, os, signal, sys
from tcpvar import signals
from tcpvar.store import engine

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "_duckdb":
            os.kill(os.getpid(), signal.SIGINT)
        return None

signals.unwind_on_signals()
sys.meta_path.insert(0, Interrupt())
try:
    engine.duckdb()
    interrupted = False
except KeyboardInterrupt:
    interrupted = True
print(json.dumps({"interrupted": interrupted, "loaded": "_duckdb" in sys.modules,
                  "then": engine.duckdb().__name__}))
"""


def test_ctrl_c_as_the_engine_is_imported_comes_after_it():
    """Raised inside DuckDB's module set-up, a KeyboardInterrupt aborted the
    process or was lost; it now comes once the module is loaded."""
    res = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT], capture_output=True,
                         text=True, check=True)
    assert json.loads(res.stdout) == {"interrupted": True, "loaded": True, "then": "_duckdb"}
