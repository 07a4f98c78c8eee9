"""The vm backend's program inside the guest: carry out the session's runs
one after another and report to the host on stdout, one line per message
(`TCPVAR <json>`), since the console is the only channel that needs no
setup. Run as `python3 -m tcpvar.capture.guest SPEC.json`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tcpvar.artefacts import run_folder as layout
from tcpvar.errors import TcpvarError

from .session import run_of

TRACEFS = "/sys/kernel/tracing"


def say(kind: str, **payload) -> None:
    sys.stdout.write("TCPVAR " + json.dumps({"kind": kind, **payload}) + "\n")
    sys.stdout.flush()


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    if not os.path.ismount(TRACEFS):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True)
    # a kernel booted with tcp:tcp_probe on (vm.py) fills the top-level
    # buffer: off until the recorder starts it with its filter
    try:
        Path(TRACEFS, "tracing_on").write_text("0")
    except OSError:
        pass
    if spec.get("path"):
        os.environ["PATH"] = os.pathsep.join([*spec["path"], os.environ.get("PATH", "")])
    say("ready", kernel=os.uname().release)
    for run in spec["runs"]:
        run_dir = Path(run["dir"])
        if (run_dir / layout.STOP_FILE).exists():
            break
        exp = run_of({**run, "clock": spec.get("clock"), "tools": spec.get("tools")}, "vm",
                     lambda event: say("progress", **event.to_json()))
        try:
            manifest = exp.execute()
        except TcpvarError as exc:      # refused before anything was set up
            say("error", message=str(exc))
            return 1
        say("done", dir=str(run_dir), status=manifest["status"], error=manifest.get("error"))
        if manifest["status"] != "complete":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
