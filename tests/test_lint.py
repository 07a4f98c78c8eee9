"""The Python code passes ruff (rules in pyproject.toml)."""
import subprocess
import sys

from conftest import ROOT


def test_ruff_clean():
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise",
                          "cli", "analyzers", "capture", "ingest", "store", "report", "tcpvar",
                          "pipelines", "tests", "bench/testbed.py", "bench/probe_bench.py",
                          "bench/many_files.py", "bench/spark.py", "bench/levers.py",
                          "bench/critical_path.py",
                          "studies"],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
