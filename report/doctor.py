"""`tcpvar doctor` for people: one section per group, a ✓ or ✗ line per part,
and under each missing part what it disables and how to install it. Drawn
from the doctor pipeline's document (its --json, docs/doctor.md)."""
from __future__ import annotations

from rich.console import Group
from rich.text import Text

# fixes that ./bootstrap.sh also applies, all at once
_BOOTSTRAP_FIXES = ("apt-get install ", "pip install ")


def doctor_report(doc: dict) -> Group:
    checks = doc["checks"]
    # one layout for every section: name and version columns as wide as the widest
    name_w = max(len(_name(c)) for c in checks)
    version_w = max(len(c["version"] or "") for c in checks)
    parts: list = []
    for g in doc["groups"]:
        head = Text()
        head.append(g["title"], style="bold")
        head.append(f" — {g['needed_by']}: ")
        head.append("ready" if g["ready"] else "not ready",
                    style="green" if g["ready"] else "bold red")
        parts.append(head)
        for c in checks:
            if c["group"] == g["id"]:
                parts += _check_lines(c, name_w, version_w)
        parts.append(Text())
    if any(not c["ok"] and c["install"] and c["install"].startswith(_BOOTSTRAP_FIXES)
           for c in checks):
        parts.append(Text("In a checkout, ./bootstrap.sh installs every missing package at once."))
    parts.append(_verdict_line(doc["main_job"]))      # the last line: the answer
    return Group(*parts)


def _name(c: dict) -> str:
    return c["name"] + ("" if c["required"] or c["ok"] else " (optional)")


def _check_lines(c: dict, name_w: int, version_w: int) -> list[Text]:
    line = Text("  ")
    if c["ok"]:
        line.append("✓", style="green")
    else:
        line.append("✗", style="bold red" if c["required"] else "yellow")
    line.append(f" {_name(c):<{name_w}} ")
    line.append(f"{c['version'] or '':<{version_w}}", style="dim")
    line.append(f" {c['detail']}".rstrip())
    lines = [line]
    if not c["ok"]:
        indent = " " * 6
        lines.append(Text(f"{indent}disables: {c['disables']}"))
        if c["install"]:
            lines.append(Text(f"{indent}install: {c['install']}"))
        elif c["hint"]:
            lines.append(Text(f"{indent}instead: {c['hint']}"))
    return lines


def _verdict_line(job: dict) -> Text:
    line = Text()
    line.append(f"main job ({job['command']}): ", style="bold")
    if job["ready"]:
        line.append(f"can run here, on the {job['backend']} backend", style="bold green")
    else:
        line.append("cannot run here", style="bold red")
    line.append(f" — {job['reason']}")
    return line
