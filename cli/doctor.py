"""tcpvar doctor: what is installed, what is missing, how to install it."""
from __future__ import annotations

import click

from .options import json_option


@click.command(short_help="Check what tcpvar needs; say how to install what is missing.")
@json_option("Print the findings as one JSON document (fields in docs/doctor.md).")
def doctor(as_json):
    """Check every part tcpvar uses, grouped by what needs it (analyze, run on
    the host kernel, run in the micro-VM, probe, kernel build, Wireshark,
    the peer tools). For each missing part, say what that disables and the
    command that installs it; ./bootstrap.sh installs them all.

    First it removes what a tcpvar killed with SIGKILL left running (its
    network namespaces and processes), as `tcpvar run` also does.

    Exits 0 when the README's main job (`tcpvar run --cc cubic --rtt 100`)
    can run here, on the host kernel or in the micro-VM, and 7 when it
    cannot; the last line says which backend it would use, or why not.

    \b
    Examples:
      tcpvar doctor
      tcpvar doctor --json | jq '.checks[] | select(.ok | not)'
    """
    from tcpvar.capture import owners
    from tcpvar.errors import ExitStatus
    from tcpvar.pipelines import doctor as checkup
    from tcpvar.report import terminal

    for r in owners.reap():             # a killed run's namespaces and processes
        terminal.note(str(r))
    checks = checkup.run_checks()
    verdict = checkup.main_job(checks)
    doc = checkup.to_json(checks, verdict)
    if as_json:
        import json

        terminal.data(json.dumps(doc, indent=1))
    else:
        from tcpvar.report.doctor import doctor_report

        terminal.show(doctor_report(doc))
    return ExitStatus.OK if verdict.ready else ExitStatus.TESTBED
