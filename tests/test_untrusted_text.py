"""Malformed inputs and the text in them (docs/security.md): a run folder,
a study file or a store from someone else is one line on stderr naming the
file and the field, with its exit status, never an internal error; what
its texts hold (terminal escapes, Rich markup, mathtext) is shown as text,
in the terminal and in figures; and a study file cannot ask for work
without bounds. Each attacker's file is built here, most from a copy of a
real run's folder."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import duckdb
import pytest

from tcpvar.artefacts.checks import MAX_SCHEDULE_STEPS
from tcpvar.capture.params import MAX_RUNS
from tcpvar.errors import ExitStatus

from conftest import FIXTURES, copy_of, on_a_terminal
from conftest import tcpvar_main as tcpvar

# a terminal's window title set, its screen cleared, Rich markup and a link
ESCAPES = "\x1b]0;pwned\x07[bold]x[/bold]\x1b[2J\x9b31m[link=https://evil.example]y[/link]"
ESCAPES_SHOWN = r"\x1b]0;pwned\x07[bold]x[/bold]\x1b[2J\x9b31m[link=https://evil.example]y[/link]"
MATH = r"$\undefinedcmd{$"          # matplotlib's mathtext fails on it


def with_manifest(folder: Path, change) -> Path:
    m = json.loads((folder / "manifest.json").read_text())
    change(m)
    (folder / "manifest.json").write_text(json.dumps(m))
    return folder


def clean(*texts: str) -> None:
    """No escape, bell or traceback reached the terminal."""
    for text in texts:
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
        assert "Traceback" not in text and "internal error" not in text


def one_error(res, *words: str) -> str:
    """stderr is exactly one error line, holding @words."""
    clean(res.stdout, res.stderr)
    (line,) = res.stderr.splitlines()
    assert line.startswith("tcpvar: error: ")
    for w in words:
        assert w in line, line
    return line


def command(name: str, folder: Path, tmp_path: Path):
    db = tmp_path / "mine.duckdb"
    args = {"load": ("load", "-q", "--db", db, folder),
            "report": ("report", "-q", "--db", db, "-o", tmp_path / "r.html", folder),
            "plot": ("plot", "-q", "--db", db, "-o", tmp_path / "f.png", "throughput", folder)}
    return tcpvar(*args[name])


def deep(folder: Path) -> None:
    (folder / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)


def port(m: dict) -> None:
    m["flows"][0]["src_port"] = "\x1b]0;pwned\x07"


# manifests that ended in "internal error" (the field each message names)
MANIFESTS = {
    "no rtt_ms": (lambda m: m["params"].pop("rtt_ms"), "params.rtt_ms: missing"),
    "probe a text": (lambda m: m.update(probe="x"), "probe: \"x\" is not an object"),
    "schedule a text": (lambda m: m["params"].update(schedule="0:1gbit"),
                        "params.schedule: \"0:1gbit\" is not a list"),
    "rtt NaN": (lambda m: m["params"].update(rtt_ms=float("nan")), "params.rtt_ms"),
    "port with escapes": (port, "flows[0].src_port"),
    "flows twice": (lambda m: m["flows"].append(m["flows"][0]), "flows[1].flow"),
    "nested 100000 deep": (None, "nested too deeply"),
    "clock a list": (lambda m: m.update(clock=[1]), "clock: "),
    "dilation a text": (lambda m: m.update(clock={"kind": "virtual", "dilation": "x"}),
                        "clock.dilation: "),
    "busy fraction NaN": (lambda m: m.update(cpu={"busy_frac": float("nan")}),
                          "cpu.busy_frac: NaN is out of range"),
    "softnet drops a text": (lambda m: m.update(softnet_dropped="x"), "softnet_dropped: "),
    "ecn a text": (lambda m: m["flows"][0].update(ecn="yes"),
                   "flows[0].ecn: \"yes\" is not true or false"),
    "flow RTTs with a text": (lambda m: m["params"].update(flow_rtts_ms=[20, "x"]),
                              "params.flow_rtts_ms[1]: \"x\" is not a number"),
    "ECN per flow a number": (lambda m: m["params"].update(ecn=[1]),
                              "params.ecn[0]: 1 is not true or false"),
    "AQM parameter a list": (lambda m: m["params"].update(aqm_params={"target": [1]}),
                             "params.aqm_params.target: list is not a text"),
    "direction sideways": (lambda m: m["flows"][0].update(direction="sideways\x1b[2J"),
                           "flows[0].direction: \"sideways\\u001b[2J\" is neither forward"),
    "reverse flows negative": (lambda m: m["params"].update(reverse=-1),
                               "params.reverse: -1 is"),
    "reverse rate NaN": (lambda m: m["params"].update(bw_reverse_bps=float("nan")),
                         "params.bw_reverse_bps: NaN is"),
    # each hop's captures would be read: the work a folder can cause is bounded
    "a billion hops": (lambda m: m["params"].update(topology="parking-lot", hops=10 ** 9),
                       "params.hops: 1000000000, more than a parking lot may have (8)"),
    "topology a ring": (lambda m: m["params"].update(topology="ring\x1b[2J"),
                        "params.topology: \"ring\\u001b[2J\" is neither dumbbell"),
    "flow at hop 0": (lambda m: m["flows"][0].update(hop=0), "flows[0].hop: 0 is"),
    "outcome unheard of": (lambda m: m["flows"][0].update(outcome="won\x1b[2J"),
                           "flows[0].outcome: \"won\\u001b[2J\" is not one of complete, cut"),
}


@pytest.mark.parametrize("case", list(MANIFESTS))
@pytest.mark.parametrize("name", ["load", "report", "plot"])
def test_a_malformed_manifest_is_one_line(their_run, tmp_path, case, name):
    change, words = MANIFESTS[case]
    folder = copy_of(their_run, tmp_path)
    deep(folder) if change is None else with_manifest(folder, change)
    res = command(name, folder, tmp_path)
    assert res.returncode == ExitStatus.BAD_INPUT
    one_error(res, f"{folder / 'manifest.json'}: ", words)


def test_the_other_folders_still_load(their_run, tmp_path):
    """One bad manifest, iperf3 report and tc-stats.json among good folders:
    each bad one is its line, the good ones are loaded and printed."""
    bad = [with_manifest(copy_of(their_run, tmp_path, "m"), MANIFESTS["no rtt_ms"][0]),
           copy_of(their_run, tmp_path, "i"), copy_of(their_run, tmp_path, "t")]
    (bad[1] / "iperf-1.json").write_text(json.dumps({"end": {"sum_sent": {"bytes": "lots"}}}))
    (bad[2] / "tc-stats.json").write_text(json.dumps([{"router": "rl", "drops": [1]}]))
    good = copy_of(their_run, tmp_path, "good")
    res = tcpvar("load", "-q", "--json", "--db", tmp_path / "t.duckdb", bad[0], good, *bad[1:])
    assert res.returncode == ExitStatus.BAD_INPUT
    clean(res.stdout, res.stderr)
    assert res.stderr.splitlines() == [
        f"tcpvar: error: {bad[0] / 'manifest.json'}: not the manifest of a tcpvar run "
        f"(params.rtt_ms: missing)",
        f"tcpvar: error: {bad[1] / 'iperf-1.json'}: not an iperf3 report "
        f"(end.sum_sent.bytes: \"lots\" is not a number)",
        f"tcpvar: error: {bad[2] / 'tc-stats.json'}: not the runner's queue statistics "
        f"([0].drops: list is not a number)"]
    assert [r["dir"] for r in json.loads(res.stdout)["runs"]] == [str(good)]


@pytest.mark.parametrize("file, text, words", [
    ("iperf-1-server.json", "[" * 100_000 + "]" * 100_000, "not valid JSON (nested too deeply)"),
    ("iperf-1.json", json.dumps({"intervals": [{"streams": [{"rtt": float("inf")}]}]}),
     "intervals[0].streams[0].rtt: Infinity is out of range"),
    ("iperf-1.json", json.dumps({"end": []}), "end: list is not an object"),
    ("tc-stats.json", json.dumps({"rl": 1}), "not a JSON list"),
    ("tc-stats.json", json.dumps([{"bytes": 1e300}]), "[0].bytes: 1e+300 is out of range"),
    ("tc-stats.json", "FIFO", "not a regular file"),
])
def test_a_malformed_side_file_is_one_line(their_run, tmp_path, file, text, words):
    folder = copy_of(their_run, tmp_path)
    (folder / file).unlink()
    if text == "FIFO":
        os.mkfifo(folder / file)        # a read of it would wait for ever
    else:
        (folder / file).write_text(text)
    res = command("load", folder, tmp_path)
    assert res.returncode == ExitStatus.BAD_INPUT
    one_error(res, f"{folder / file}: ", words)


def test_a_malformed_probe_record_is_a_note(their_run, tmp_path):
    """A tcp_probe.csv that cannot be loaded is noted in the run (what was
    captured stays, docs/run.md), in words, not as a failure."""
    folder = copy_of(their_run, tmp_path)
    with open(folder / "tcp_probe.csv", "a") as f:
        f.write("not,numbers\x1b[2J\n")
    res = command("load", folder, tmp_path)
    assert res.returncode == 0, res.stderr
    clean(res.stdout, res.stderr)
    assert f"note: {folder / 'tcp_probe.csv'}: cannot load the probe record" in res.stdout


# --- texts ---------------------------------------------------------------------------

def escaped(m: dict) -> None:
    m["flows"][0]["role"] = ESCAPES
    m["flows"][0]["cc"] = "[red]cubic[/red]"
    m["kernel"] = m["hostname"] = ESCAPES
    m["error"] = "note\nsecond line" + ESCAPES
    m["params"].update(aqm=ESCAPES, aqm_params={ESCAPES: None})


def test_escapes_and_markup_in_a_run_folder_are_shown_as_text(their_run, tmp_path):
    folder = with_manifest(copy_of(their_run, tmp_path), escaped)
    db = tmp_path / "t.duckdb"
    res = tcpvar("load", "-q", "--db", db, folder)
    assert res.returncode == 0, res.stderr
    clean(res.stdout, res.stderr)
    assert f"kernel {ESCAPES_SHOWN}, RTT" in res.stdout
    assert f"queue {ESCAPES_SHOWN} {ESCAPES_SHOWN}" in res.stdout
    assert "note: note\\nsecond line" + ESCAPES_SHOWN in res.stdout
    res = tcpvar("compare", "--db", db, "--by", "aqm,aqm_params", "--markdown")
    assert res.returncode == 0, res.stderr
    clean(res.stdout, res.stderr)
    assert ESCAPES_SHOWN in res.stdout         # the group's key, as text
    # a query's table is Rich's, piped or not: its markup is not read
    res = tcpvar("query", "--db", db, "SELECT role, cc FROM flows")
    assert res.returncode == 0, res.stderr
    clean(res.stdout, res.stderr)
    assert ESCAPES_SHOWN in res.stdout and "[red]cubic[/red]" in res.stdout
    res = tcpvar("report", "-q", "--db", db, "-o", tmp_path / "r.html", folder)
    assert res.returncode == 0 and (tmp_path / "r.html").is_file()
    clean(res.stdout, res.stderr)


def test_on_a_terminal_the_rich_table_shows_them_as_text(their_run, tmp_path):
    """On a terminal Rich draws the run's table with escapes of its own
    (bold headings): none of the folder's reaches it, nor its markup."""
    folder = with_manifest(copy_of(their_run, tmp_path), escaped)
    rc, out, err = on_a_terminal("load", "-q", "--db", tmp_path / "t.duckdb", folder)
    assert rc == 0, err
    for theirs in ("\x1b]0;", "\x1b[2J", "\x07", "\x9b", "\x1b]8;"):   # 8: a hyperlink
        assert theirs not in out and theirs not in err
    assert "[bold]x[/bold]" in out and "[red]cubic[/red]" in out
    assert r"\x1b]0;pwned\x07" in out


def test_on_a_terminal_analyzes_table_shows_a_stores_text_as_text(tmp_path):
    """A store from somebody else whose addresses hold escapes and markup:
    `tcpvar analyze` of a capture it has reads the connections back from it
    and Rich draws them on the terminal, none of the store's escapes with
    them."""
    db, capture = tmp_path / "theirs.duckdb", FIXTURES / "iperf_4flows.pcap"
    assert tcpvar("analyze", "-q", "--db", db, capture).returncode == 0
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE connections SET a_addr = $1 WHERE conn = 1", [ESCAPES])
    rc, out, err = on_a_terminal("analyze", "--db", db, capture)
    assert rc == 0, err
    for theirs in ("\x1b]0;", "\x1b[2J", "\x07", "\x9b", "\x1b]8;"):
        assert theirs not in out and theirs not in err
    assert r"\x1b]0;pwned\x07" in out and "[bold]x[/bold]" in out


def test_an_error_quoting_a_path_or_field_has_no_escapes(tmp_path):
    folder = tmp_path / "run\x1b]0;pwned\x07\x1b[2J"
    folder.mkdir()
    res = tcpvar("load", "-q", "--db", tmp_path / "t.duckdb", folder)
    assert res.returncode == ExitStatus.BAD_INPUT
    one_error(res, r"run\x1b]0;pwned\x07\x1b[2J: not a tcpvar run folder")
    # Click's own message quotes the arguments (`tcpvar plot KIND runs/*`)
    res = tcpvar("plot", "throughput", folder, folder)
    assert res.returncode == ExitStatus.USAGE
    clean(res.stdout, res.stderr)
    assert "Got unexpected extra argument (" in res.stderr
    assert r"run\x1b]0;pwned\x07" in res.stderr


# --- figures ---------------------------------------------------------------------------

def test_mathtext_in_a_label_is_drawn_as_text(their_run, tmp_path):
    """A flow's role in the legend: `$...$` would be mathtext, and this one
    is an error in matplotlib's parser. The figure is drawn and the legend
    holds the role's characters as they are."""
    import matplotlib

    from tcpvar.report import figures

    folder = with_manifest(copy_of(their_run, tmp_path),
                           lambda m: m["flows"][0].update(role=MATH + ESCAPES))
    png = tmp_path / "f.png"
    res = tcpvar("plot", "-q", "--json", "--db", tmp_path / "t.duckdb", "-o", png,
                 "throughput", folder)
    assert res.returncode == 0, res.stderr
    assert png.stat().st_size > 0
    doc = json.loads(res.stdout)
    fig = figures.draw(doc)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert f"flow 1 cubic ({MATH}{ESCAPES_SHOWN}) (capture)" in labels
    # as text in an SVG: the characters in one <text>, not a formula's glyphs
    svg = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(svg, format="svg")
    assert f"flow 1 cubic ({MATH}" in svg.getvalue()
    res = tcpvar("report", "-q", "--db", tmp_path / "t.duckdb", "-o", tmp_path / "r.html",
                 folder)
    assert res.returncode == 0 and (tmp_path / "r.html").is_file(), res.stderr


# --- study files ---------------------------------------------------------------------

def study(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, words", [
    ("name = 'big'\nrepeat = 1000000000\ncc = ['cubic', 'reno']\n",
     f"2 cells x 1000000000 repeats = 2000000000 runs, more than a study may plan "
     f"({MAX_RUNS})"),
    ("name = 'wide'\nrtt = [" + ", ".join(map(str, range(200))) + "]\nloss = ["
     + ", ".join(map(str, range(100))) + "]\n", f"more than a study may plan ({MAX_RUNS})"),
    ("cc = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    ("name = 5\n", "name: 5 is not a text"),
    ("name = 's'\nrepeat = 'x'\n", "repeat: 'x' is not an integer"),
    ("name = 's'\ncc = {a = 1}\n", "cc: {'a': 1} is not a value or a list of values"),
    ("name = 's'\nrtt = 'x'\n", "rtt = 'x': not a float"),
])
def test_a_study_file_beyond_the_limits_or_malformed_is_one_line(tmp_path, text, words):
    path = study(tmp_path, text)
    res = tcpvar("sweep", "--dry-run", "--db", tmp_path / "t.duckdb", path)
    assert res.returncode == ExitStatus.BAD_INPUT
    one_error(res, f"{path}: ", words)
    assert not (tmp_path / "t.duckdb").exists()


def test_a_study_asked_for_on_the_command_line_has_the_limit_too(tmp_path):
    res = tcpvar("sweep", "--dry-run", "--name", "big", "--cc", "cubic,reno", "--rtt",
                 "10,20,30,40,50,60", "--repeat", 1000, "--db", tmp_path / "t.duckdb")
    assert res.returncode == ExitStatus.USAGE
    one_error(res, f"study big: 12 cells x 1000 repeats = 12000 runs, more than a study may "
                   f"plan ({MAX_RUNS})")


def test_a_bandwidth_schedule_has_at_most_its_steps(tmp_path):
    steps = ",".join(f"{i}:10mbit" for i in range(MAX_SCHEDULE_STEPS + 1))
    path = study(tmp_path, f"name = 's'\nduration = 80000\nbw_schedule = '{steps}'\n")
    res = tcpvar("sweep", "--dry-run", "--db", tmp_path / "t.duckdb", path)
    assert res.returncode == ExitStatus.USAGE
    one_error(res, f"bandwidth schedule of {MAX_SCHEDULE_STEPS + 1} steps: at most "
                   f"{MAX_SCHEDULE_STEPS}")
    steps = ",".join(f"{i}:10mbit" for i in range(MAX_SCHEDULE_STEPS))
    path = study(tmp_path, f"name = 's'\nduration = 80000\nbw_schedule = '{steps}'\n")
    assert tcpvar("sweep", "--dry-run", "--db", tmp_path / "t.duckdb", path).returncode == 0


def test_a_study_name_is_shown_as_text(tmp_path):
    path = study(tmp_path, "name = \"[bold]s[/bold]\\u001b]0;pwned\\u0007\"\ncc = 'cubic,reno'\n")
    res = tcpvar("sweep", "--dry-run", "--db", tmp_path / "t.duckdb", path)
    assert res.returncode == 0, res.stderr
    clean(res.stdout, res.stderr)
    assert r"[bold]s[/bold]\x1b]0;pwned\x07" in res.stdout.replace("\n", "").replace(" ", "")


# --- the run's conditions (the fidelity check's inputs) ------------------------------

# what a stranger's manifest may say of the conditions, of the types the
# manifest's check lets through but none of it a value tcpvar writes: each is
# stored as unknown (NULL), never as a number; with the columns of `runs` it
# leaves unknown
CONDITIONS = {
    "out of range": (lambda m: m.update(
        clock={"kind": ESCAPES, "icount_shift": 99, "dilation": -1.5, "workspace": ESCAPES},
        cpu={"busy_frac": 1.5, "saturated_frac": -0.1}, softnet_dropped=-3,
        capture_drops={"sender": -1}),
        ("capture_drops", "cpu_busy_frac", "cpu_saturated_frac", "icount_shift", "dilation",
         "softnet_dropped")),
    "unchecked kinds": (lambda m: m.update(
        cpu={"busy_frac": 2, "saturated_frac": 1e9},
        capture_drops={ESCAPES: ESCAPES, "bottleneck": [1], "sender": True}),
        ("capture_drops", "cpu_busy_frac", "cpu_saturated_frac")),
    # each count in range, their sum beyond a 64-bit integer
    "counts overflowing": (lambda m: m.update(capture_drops={f"c{i}": (1 << 62) - 1
                                                             for i in range(4)}),
                           ("capture_drops",)),
}


@pytest.mark.parametrize("case", list(CONDITIONS))
def test_conditions_a_manifest_misstates_are_unknown(their_run, tmp_path, case):
    change, unknown = CONDITIONS[case]
    folder = with_manifest(copy_of(their_run, tmp_path), change)
    db = tmp_path / "t.duckdb"
    res = tcpvar("load", "-q", "--json", "--db", db, folder)
    assert res.returncode == 0, res.stderr
    clean(res.stdout, res.stderr)
    (run,) = json.loads(res.stdout)["runs"]
    f = run["fidelity"]
    assert f["capture"] == {"status": "unknown", "drops": None}
    if "cpu_busy_frac" in unknown:
        assert f["cpu"]["status"] == "unknown", f
    with duckdb.connect(str(db), read_only=True) as con:
        cur = con.execute("SELECT * FROM runs")
        row = dict(zip((d[0] for d in cur.description), cur.fetchone()))
    for column in unknown:
        assert row[column] is None, column
    # a host run (netns) ran on the host's clock, whatever its manifest says
    assert row["clock"] == "real"
    res = tcpvar("report", "-q", "--db", db, "-o", tmp_path / "r.html", folder)
    assert res.returncode == 0, res.stderr
    clean(res.stdout, res.stderr)
    assert "\x1b" not in (tmp_path / "r.html").read_text()
