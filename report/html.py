"""report.html: one self-contained page per set of runs and captures. For
each, a header (parameters, host, kernel, tools), its summary table, the
bottleneck and probe accounting, and its figures embedded as PNG data:
nothing is fetched from the network, so the file can be mailed or archived."""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from tcpvar import safe_write

from . import compare, figures
from .runs import FIDELITY_NAMES, RUN_COLUMNS, fidelity_parts, flow_row, run_title, summary_lines
from .tables import CONN_COLUMNS, conn_rows
from .untrusted import printable

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1em;
       max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0 1em; }
td, th { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em; }
dt { color: #666; } figure { margin: 1em 0; } img { max-width: 100%; }
ul.notes { font-size: 0.9em; } div.wide { overflow-x: auto; }
"""


def _table(columns, rows) -> str:
    head = "".join(f"<th>{_text(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_text(v)}</td>" for v in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _facts(facts: dict) -> str:
    return "<dl>" + "".join(f"<dt>{_text(k)}</dt><dd>{_text(v)}</dd>"
                            for k, v in facts.items() if v not in (None, "", {})) + "</dl>"


def _text(value) -> str:
    """@value (an input may have written it) as HTML text: its control
    characters escaped (report/untrusted.py), then its markup."""
    return html.escape(printable(value))


def _png(doc: dict) -> bytes:
    """The figure's PNG: the file already drawn for it, else drawn now."""
    path = doc.get("path")
    if path and Path(path).suffix == ".png" and Path(path).is_file():
        return Path(path).read_bytes()
    fig = figures.draw(doc)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _figure(doc: dict) -> str:
    data = base64.b64encode(_png(doc)).decode()
    alt = _text(f"{doc['kind']} figure of {doc['name']}")
    return f'<figure><img alt="{alt}" src="data:image/png;base64,{data}"></figure>'


def _run_section(part: dict) -> str:
    s = part["summary"]
    out = [f"<h2>{_text(run_title(s))}</h2>", _facts(part["facts"]),
           _table(RUN_COLUMNS, [flow_row(f) for f in s["flows"]]),
           "<ul class=notes>" + "".join(f"<li>{_text(x)}</li>" for x in summary_lines(s))
           + "</ul>"]
    if s.get("fidelity"):
        out.append(_fidelity(s["fidelity"], s["backend"]))
    return "\n".join(out)


def _fidelity(f: dict, backend) -> str:
    """The fidelity check: the verdict, and per item its status and what
    it measured (text of a store: escaped, as all of it)."""
    statuses = [f[k]["status"] for k in FIDELITY_NAMES]
    rows = zip(FIDELITY_NAMES.values(), statuses, fidelity_parts(f, backend))
    return (f"<h3>Fidelity: {_text(f['verdict'])}</h3>"
            + _table(("item", "status", "measured"), rows))


def _capture_section(part: dict) -> str:
    cap = part["summary"]
    return "\n".join([f"<h2>{_text(cap['path'])}</h2>", _facts(part["facts"]),
                      _table([c for c, _ in CONN_COLUMNS], conn_rows(cap))])


def _study_section(part: dict) -> str:
    """A study: its facts, the comparison table of its groups, the tests of
    every pair of groups on each chosen metric, what was left out, and its
    runs."""
    doc = part["compare"]
    head, body, _ = compare.rows(doc)
    out = [f"<h2>study {_text(part['name'])}</h2>", _facts(part["facts"]),
           f"<div class=wide>{_table(head, body)}</div>"]
    for tests in part["tests"]:
        out += [f"<h3>{_text(compare.HEADINGS[tests['metric']][0])}: does a pair differ?</h3>",
                _table(compare.TEST_HEAD, compare.test_rows(tests))]
    out.append("<ul class=notes>" + "".join(f"<li>{_text(x)}</li>"
                                            for x in compare.notes(doc)) + "</ul>")
    out += ["<h3>Runs</h3>", _table(*part["runs"])]
    return "\n".join(out)


SECTIONS = {"run": _run_section, "capture": _capture_section, "study": _study_section}


def render(title: str, parts: list[dict]) -> str:
    """The page of @parts: each {'kind': 'run'|'capture'|'study', 'facts',
    'figures', ...}."""
    body = []
    for part in parts:
        body.append(SECTIONS[part["kind"]](part))
        body.extend(_figure(doc) for doc in part["figures"])
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{_text(title)}</title><style>{STYLE}</style></head>"
            f"<body><h1>{_text(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n")


def write(title: str, parts: list[dict], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return safe_write.write_text(path, render(title, parts))


def write_run_folder(title: str, parts: list[dict], path: str | Path) -> Path:
    """What `tcpvar run` (and sweep, reproduce) leave in a run folder: each
    figure as its own file (the path its data names) and report.html."""
    for doc in parts[0]["figures"]:
        figures.save(doc, doc["path"])
    return write(title, parts, path)
