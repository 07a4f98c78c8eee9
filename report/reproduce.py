"""Renderings of `tcpvar reproduce` (pipelines/reproduce.py): each of the
paper's tables with tcpvar's value beside the paper's in every cell, as
terminal tables and as Markdown (docs/reproductions.md)."""
from __future__ import annotations

from rich import box
from rich.table import Table

from .compare import cell as mean_ci
from .compare import unfaithful_mark


def _heads(t: dict) -> list[str]:
    """A heading per (column, measure) of the table: the column's label
    when there are several, then the measure."""
    many = len(t["columns"]) > 1
    return [f"{col}: {m}" if many else m for col in t["columns"] for m in t["measures"]]


def _rows(t: dict) -> list[list[str]]:
    """Per row: its label, then per cell the paper's value and tcpvar's
    (mean ± CI, and n when it differs from the others)."""
    out = []
    for r in t["rows"]:
        line = [r["row"]]
        for c in r["cells"]:
            got = c["tcpvar"]
            # as precise as the paper: Jain's index 3 decimals, counts 1
            digits = 3 if c["metric"] == "jain" else 1 if isinstance(c["paper"], int) else 2
            line += [paper_value(c["paper"]),
                     mean_ci(got["mean"], got["ci95"], digits) + (f" (n={got['n']})"
                                                                   if got["n"] > 1 else "")
                     + unfaithful_mark(c)]
        out.append(line)
    return out


def paper_value(v: float | int) -> str:
    """As the papers print them: counts whole, other values with two
    decimals, more when the value has them."""
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.2f}" if round(v, 2) == v else f"{v:g}"


def title(t: dict) -> str:
    return f"Table {t['id']}: {t['title']}"


def caption(t: dict) -> str | None:
    """The table's note, and why rows have no runs."""
    lines = [t["note"]] if t["note"] else []
    lines += [f"{r['row']}: not run ({r['skip']})" for r in t["rows"] if r["skip"]]
    return "\n".join(lines) or None


def tables(doc: dict) -> list[Table]:
    out = []
    for t in doc["tables"]:
        table = Table(title=title(t), box=box.SIMPLE, title_justify="left",
                      caption=caption(t), caption_justify="left")
        table.add_column(t["row_heading"])
        for h in _heads(t):
            table.add_column(f"{h}\npaper", justify="right")
            table.add_column("tcpvar", justify="right")
        for row in _rows(t):
            table.add_row(*row)
        out.append(table)
    return out


def markdown(doc: dict) -> str:
    parts = [f"**{doc['paper']}**, reproduced at scale `{doc['scale']}` "
             f"(study `{doc['study']}`):", "", *(f"- {n}" for n in doc["scaling"]), ""]
    for t in doc["tables"]:
        head = [t["row_heading"],
                *(f"{h} ({who})" for h in _heads(t) for who in ("paper", "tcpvar"))]
        parts += [f"#### {title(t)}", ""]
        if caption(t):
            parts += [f"_{line}_" for line in caption(t).splitlines()] + [""]
        parts += ["| " + " | ".join(head) + " |",
                  "| --- |" + " ---: |" * (len(head) - 1),
                  *("| " + " | ".join(r) + " |" for r in _rows(t)), ""]
    return "\n".join(parts)


def notes(doc: dict) -> list[str]:
    unfaithful = sorted({r for t in doc["tables"] for row in t["rows"] for c in row["cells"]
                         for r in c.get("unfaithful") or ()})
    flagged = [f"runs whose fidelity check failed (docs/run.md): {len(unfaithful)}, "
               + ("left out (--faithful-only)" if doc.get("faithful_only") else
                  "counted and marked in their cells (--faithful-only leaves them out)")
               ] if unfaithful else []
    return flagged + [f"{doc['paper']}, at scale {doc['scale']} (study {doc['study']}):",
            *(f"  {n}" for n in doc["scaling"]),
            "tcpvar: mean ± half-width of the 95 % confidence interval over the cell's runs "
            "(n when more than one); paper: as printed"
            + (f", the mean of its {doc['paper_repeats']} runs" if doc["paper_repeats"] > 1
               else ", from one run")]
