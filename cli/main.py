"""The `tcpvar` command group and its error handling.

main() maps every outcome to an exit status (tcpvar.errors.ExitStatus): a
TcpvarError prints its one-line message, Ctrl-C (and, through cli.start,
SIGTERM and SIGHUP) exits 130, and anything
unexpected is reported as an internal error (--traceback shows it).
"""
from __future__ import annotations

import errno
import importlib
import sys

import click

from tcpvar import __version__, signals
from tcpvar.errors import ExitStatus, TcpvarError

# Each command's module, imported only when the command runs: `tcpvar
# analyze` starts reading its capture sooner without the others' imports.
COMMANDS = ("analyze", "compare", "doctor", "export", "kernel", "load", "merge", "plot",
            "probe", "query", "report", "reproduce", "run", "spark", "sweep", "wireshark")


class LazyGroup(click.Group):
    """A group whose commands are tcpvar.cli.NAME.NAME, imported on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return getattr(importlib.import_module(f"tcpvar.cli.{name}"), name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="tcpvar",
                      message="%(prog)s %(version)s")
@click.option("--traceback", is_flag=True, help="Show the Python traceback of an internal error.")
@click.pass_context
def cli(ctx: click.Context, traceback: bool) -> None:
    """Compare TCP congestion-control variants.

    Analyse captures the way tcptrace does, keep every packet and statistic in
    a DuckDB store, and measure fairness and friendliness between flows.

    \b
    Examples:
      tcpvar doctor
      tcpvar run --cc cubic --rtt 100
      tcpvar sweep --name rtts --cc cubic,reno --rtt 50,100 --repeat 3
      tcpvar compare --study rtts --by cc,rtt
      tcpvar reproduce callegari2011 --scale smoke
      tcpvar load runs/20261121-130245-single-cubic-eeae5b-r1
      tcpvar analyze capture.pcapng
      tcpvar analyze --fairness --json run1.pcap
      tcpvar spark captures/ --out tables/ --master local[4]
      tcpvar plot cwnd run:1
      tcpvar report run:1 -o run1.html
      tcpvar query "SELECT conn, dir, rtt_avg_ms FROM conn_stats"
      tcpvar wireshark install
    """
    ctx.obj = {"traceback": traceback}


def main(argv: list[str] | None = None) -> int:
    from tcpvar.report import terminal

    want_traceback = "--traceback" in (argv if argv is not None else sys.argv[1:])
    try:
        status = cli.main(args=argv, prog_name="tcpvar", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        return _interrupted(terminal)
    except click.ClickException as exc:
        _show_usage_error(exc)
        return ExitStatus.USAGE
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except TcpvarError as exc:
        terminal.error(str(exc))
        return exc.status
    except BrokenPipeError:
        return ExitStatus.OK
    except Exception as exc:  # a bug: say so in one line unless asked for more
        if signals.received is not None:   # a library's own words for the interrupt
            return _interrupted(terminal)
        if want_traceback:
            raise
        if _no_space(exc):
            terminal.error(f"no space left on device: {' '.join(str(exc).split())}; what was "
                           f"complete before is kept")
            return ExitStatus.NO_SPACE
        terminal.error(f"internal error: {type(exc).__name__}: {exc} "
                       f"(run again with --traceback and report it)")
        return ExitStatus.ERROR
    return int(status or 0)


def _show_usage_error(exc: click.ClickException) -> None:
    """Click's message, with the control characters of the arguments it
    quotes escaped (`tcpvar load runs/*` passes the names of somebody's folders)."""
    import io

    from tcpvar.report.untrusted import printable_lines

    text = io.StringIO()
    exc.show(file=text)
    sys.stderr.write(printable_lines(text.getvalue()))


def _no_space(exc: Exception) -> bool:
    """A full disk, in an OSError of ours or in DuckDB's own words."""
    return (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or \
        "No space left on device" in str(exc)


def _interrupted(terminal) -> int:
    terminal.error("interrupted; the store keeps what was complete before")
    return ExitStatus.INTERRUPTED
