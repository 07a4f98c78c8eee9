"""Options that several commands share, defined once."""
from __future__ import annotations

import math

import click


class Finite(click.FloatRange):
    """click.FloatRange that also refuses nan and infinities: nan passes
    every range check, and neither has a place on a time axis or in C."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number", param, ctx)
        return number


def db_option(purpose: str = "to write into"):
    """--db: the store a command reads or writes. A folder given is refused
    by the store itself, in one line (exit 5), for every command alike."""
    return click.option("--db", "db_path", default="tcpvar.duckdb", show_default=True,
                        type=click.Path(), help=f"DuckDB store {purpose}.")


def json_option(what: str = "Print JSON instead of tables.", *, format_choice: bool = False):
    """--json. @format_choice: one of the command's other output formats
    (--csv, --markdown), all of them flags into its `fmt` parameter."""
    if format_choice:
        return click.option("--json", "fmt", flag_value="json", help=what)
    return click.option("--json", "as_json", is_flag=True, help=what)


def quiet_option(what: str = "No progress display."):
    return click.option("-q", "--quiet", is_flag=True, help=what)


# Where a session's runs are captured (tcpvar run, sweep and reproduce).
backend_option = click.option(
    "--backend", default="auto", show_default=True, type=click.Choice(["auto", "netns", "vm"]),
    help="netns: the host kernel; vm: a QEMU micro-VM; auto: netns when the host kernel has "
         "what the run needs.")

# The micro-VM's clock (capture/clock.py), for run, sweep and reproduce.
clock_option = click.option(
    "--clock", type=click.Choice(["auto", "real", "virtual"]),
    help="The micro-VM's clock. virtual: QEMU's instruction counting (TCG), so results do "
         "not depend on the host's speed or load, at the cost of wall time; real: the "
         "host's; auto: real under KVM, else virtual  [default: auto]")

# Micro-VMs side by side (tcpvar sweep and reproduce).
jobs_option = click.option(
    "--jobs", "-j", type=click.IntRange(1, 64), metavar="N",
    help="Sessions (micro-VMs) side by side. Runs on virtual time cannot disturb each "
         "other  [default: the host's cores on virtual time, else 1]")

# One set of choices wherever a kernel is taken: capture/kernels.resolve reads them.
kernel_option = click.option(
    "--kernel", metavar="stock|patched|patched-debug|PATH",
    help="Kernel the vm backend boots: Debian's stock package, the one built from "
         "kernel-patches/ (patched-debug: with KASAN, UBSAN, lockdep and kmemleak), or a "
         "bzImage  [default: patched for runs with --ngwa or --wbrto, else stock]")


def session_options(command):
    """Where a capture session's runs go: the boot limit of the micro-VM,
    the folder of the run folders and the store (tcpvar run, sweep and
    reproduce)."""
    for option in reversed((
        click.option("--boot-timeout", default=180.0, show_default=True,
                     type=Finite(min=0, min_open=True), metavar="S",
                     help="Give up on a micro-VM that has not booted by then (seconds of "
                          "its own clock)."),
        click.option("--out", "out_dir", default="runs", show_default=True,
                     type=click.Path(file_okay=False), help="Folder the run folders go into."),
        db_option(),
    )):
        command = option(command)
    return command
