"""Run folders and stores from someone else (docs/security.md): `load`,
`report` and `plot` of a folder planted with traversal names and symlinks
delete, overwrite and create nothing outside tcpvar's own outputs, and
never write through a symlink. The attacker's folder is a real run's,
copied and planted in each test."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from tcpvar.errors import ExitStatus, InputError

from conftest import copy_of, error_lines
from conftest import tcpvar_main as tcpvar

SECRET = "a file of the victim's\n"
# trace_pipe lines as the stock tracepoint prints them
TRACE_LINE = ("          iperf3-412     [001] ..s1.   {t:.6f}: tcp_probe: family=AF_INET "
              "src=10.0.1.1:40000 dest=10.0.3.1:5201 mark=0x0 data_len=0 snd_nxt=0x1 "
              "snd_una=0x1 snd_cwnd={cwnd} ssthresh=2147483647 snd_wnd=64240 srtt=100 "
              "rcv_wnd=64240 sock_cookie=2a\n")


def victim(tmp_path: Path, name: str = "victim.txt") -> Path:
    path = tmp_path / name
    path.write_text(SECRET)
    return path


def pend(folder: Path, trace: str, lines: int = 0) -> None:
    """tcp_probe.json names @trace as a trace left for the host to convert
    (as a micro-VM's killed tcpvar leaves it), of @lines events."""
    doc = json.loads((folder / "tcp_probe.json").read_text())
    doc.update(trace=trace, offset_ns=0, filter={"ports": [], "addrs": [], "cookie": None})
    (folder / "tcp_probe.json").write_text(json.dumps(doc))
    if lines:
        (folder / "tcp_probe.trace").write_text("".join(
            TRACE_LINE.format(t=1 + i / 10, cwnd=10 + i) for i in range(lines)))


def open_folder(command: str, folder: Path, tmp_path: Path):
    """`tcpvar COMMAND` of the folder, its outputs in tmp_path/out."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    db = tmp_path / "mine.duckdb"
    args = {"load": ("load", "-q", "--db", db, folder),
            "report": ("report", "-q", "--db", db, "-o", out / "r.html", folder),
            "plot": ("plot", "-q", "--db", db, "-o", out / "f.png", "throughput", folder)}
    return tcpvar(*args[command])


@pytest.mark.parametrize("command", ["load", "report", "plot"])
@pytest.mark.parametrize("trace", ["ABSOLUTE", "../victim.txt", "sender.pcap"])
def test_a_trace_named_by_the_folder_is_not_deleted(their_run, tmp_path, command, trace):
    """tcp_probe.json names the file to convert and remove: only the name
    a recorder leaves is taken, and the folder is refused in one line."""
    folder = copy_of(their_run, tmp_path)
    target = victim(tmp_path)
    pcap = (folder / "sender.pcap").read_bytes()
    pend(folder, str(target) if trace == "ABSOLUTE" else trace)
    res = open_folder(command, folder, tmp_path)
    assert target.read_text() == SECRET
    assert (folder / "sender.pcap").read_bytes() == pcap
    assert res.returncode == ExitStatus.BAD_INPUT, res.stderr
    (line,) = error_lines(res.stderr)
    assert "tcp_probe.json: names the trace" in line and "tcp_probe.trace" in line


@pytest.mark.parametrize("link", ["tcp_probe.csv", "manifest.json.tmp", "manifest.json",
                                  "tcp_probe.json"])
def test_symlinks_in_the_folder_are_not_written_through(their_run, tmp_path, link):
    """A pending trace is converted into new files that replace the folder's
    names: a symlink planted at one is replaced, its target unchanged."""
    folder = copy_of(their_run, tmp_path)
    target = victim(tmp_path)
    pend(folder, "tcp_probe.trace", lines=5)
    if link.endswith(".json"):
        # the folder's own file is read through the link, then replaced
        target = tmp_path / f"their-{link}"
        shutil.move(folder / link, target)
    before = target.read_bytes()
    (folder / link).unlink(missing_ok=True)
    (folder / link).symlink_to(target)
    res = open_folder("load", folder, tmp_path)
    assert res.returncode == 0, res.stderr
    assert target.read_bytes() == before
    csv = (folder / "tcp_probe.csv").read_text().splitlines()
    assert not (folder / "tcp_probe.csv").is_symlink() and len(csv) == 1 + 5
    assert json.loads((folder / "manifest.json").read_text())["probe"]["events"] == 5
    assert not (folder / "tcp_probe.trace").exists()


@pytest.mark.parametrize("command", ["load", "report", "plot"])
def test_a_trace_that_is_a_symlink_is_left_alone(their_run, tmp_path, command):
    folder = copy_of(their_run, tmp_path)
    target = victim(tmp_path)
    pend(folder, "tcp_probe.trace")
    (folder / "tcp_probe.trace").symlink_to(target)
    res = open_folder(command, folder, tmp_path)
    assert res.returncode == 0, res.stderr
    assert target.read_text() == SECRET and (folder / "tcp_probe.trace").is_symlink()


@pytest.mark.parametrize("command, name", [("report", "r.html"), ("plot", "f.png")])
def test_outputs_replace_a_symlink_never_write_through_it(their_run, tmp_path, command, name):
    """-o's target and the temporary file beside it, planted as symlinks."""
    out = tmp_path / "out"
    out.mkdir()
    targets = [victim(tmp_path, "v1"), victim(tmp_path, "v2")]
    (out / name).symlink_to(targets[0])
    (out / f"{name}.tmp").symlink_to(targets[1])
    res = open_folder(command, their_run, tmp_path)
    assert res.returncode == 0, res.stderr
    assert [t.read_text() for t in targets] == [SECRET, SECRET]
    assert not (out / name).is_symlink()
    head = (out / name).read_bytes()[:16]
    assert head.startswith(b"<!DOCTYPE html>" if command == "report" else b"\x89PNG")


def test_a_run_named_with_a_path_is_drawn_in_the_working_folder(their_run, tmp_path):
    """A run's name from a merged store ('/abs/path/name', '../x') names the
    figure's file, made a bare name in the working folder."""
    db = tmp_path / "s.duckdb"
    assert tcpvar("load", "-q", "--db", db, their_run).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET name = ?", [f"{elsewhere}/deep/../name"])
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    res = tcpvar("plot", "-q", "--db", db, "throughput", "run:1", cwd=cwd)
    assert res.returncode == 0, res.stderr
    assert not elsewhere.exists()
    (made,) = cwd.iterdir()
    assert made.name.endswith("_deep_.._name-throughput.png")
    assert made.read_bytes()[:4] == b"\x89PNG"


def test_a_folder_to_write_into_is_not_a_symlink(tmp_path):
    from tcpvar.safe_write import inner_folder

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "figures").symlink_to(tmp_path)
    with pytest.raises(InputError, match="not a folder of its own"):
        inner_folder(tmp_path / "run", "figures")
    assert inner_folder(tmp_path / "run", "other").is_dir()


def test_a_file_is_written_beside_a_planted_temporary_name(tmp_path, monkeypatch):
    """The temporary file a write starts in is new (O_EXCL, O_NOFOLLOW): a
    symlink or a file already at the name it draws first is left alone, and
    the write takes the next name. It ends with the user's umask applied."""
    from tcpvar import safe_write

    names = iter([b"\x01" * 6, b"\x02" * 6, b"\x03" * 6])
    monkeypatch.setattr(safe_write.os, "urandom", lambda n: next(names))
    target = victim(tmp_path)
    (tmp_path / f".out.txt.{'01' * 6}.tmp").symlink_to(target)
    safe_write.write_text(tmp_path / "out.txt", "written\n")
    assert target.read_text() == SECRET
    assert (tmp_path / "out.txt").read_text() == "written\n"
    assert not (tmp_path / f".out.txt.{'02' * 6}.tmp").exists()     # renamed
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    (tmp_path / f".out.txt.{'03' * 6}.tmp").write_text(SECRET)
    names = iter([b"\x03" * 6] * 100)
    with pytest.raises(FileExistsError):
        safe_write.write_text(tmp_path / "out.txt", "again\n")
    assert (tmp_path / "out.txt").read_text() == "written\n"


def tree_digest(root: Path, outputs: set[Path]) -> dict:
    """Every entry under @root but @outputs: a file's content, a link's target."""
    out = {}
    for path in sorted(root.rglob("*")):
        if any(path == o or o in path.parents for o in outputs):
            continue
        if path.is_symlink():
            out[str(path)] = "-> " + str(path.readlink())
        elif path.is_file():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[str(path)] = "dir"
    return out


@pytest.mark.parametrize("option, status", [("--db", ExitStatus.STORE),
                                            ("--out", ExitStatus.USAGE)])
def test_a_run_whose_outputs_cannot_be_written_fails_before_it_starts(tmp_path, option,
                                                                       status):
    """A store or a folder under /dev/null: refused in one line before the
    micro-VM boots (no run folder is made)."""
    paths = {"--db": tmp_path / "t.duckdb", "--out": tmp_path / "runs",
             option: Path("/dev/null") / "x"}
    res = tcpvar("run", "-q", "--backend", "vm", "--cc", "cubic", "--duration", 3,
                 "--db", paths["--db"], "--out", paths["--out"])
    assert res.returncode == status, res.stderr
    (line,) = error_lines(res.stderr)
    assert "/dev/null" in line
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("params", ['{"rtt_ms": "x", "bw_bps": [1]}', '"text"', "[1, 2]"])
@pytest.mark.parametrize("command", [("compare", "--study", "s"),
                                     ("plot", "-q", "throughput", "run:1"),
                                     ("report", "-q", "run:1")])
def test_a_stored_run_with_malformed_params_is_one_line(their_run, tmp_path, params, command):
    """A store is somebody else's too: a run's params of the wrong shape
    name the run and the field, exit 3 (they were internal errors)."""
    db = tmp_path / "s.duckdb"
    assert tcpvar("load", "-q", "--db", db, their_run).returncode == 0
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET params = ?, study = 's'", [params])
    res = tcpvar(*command, "--db", db, cwd=tmp_path)
    assert res.returncode == ExitStatus.BAD_INPUT, res.stderr
    (line,) = error_lines(res.stderr)
    assert line.startswith("tcpvar: error: run 1 of the store: its params are not") or \
        "params.ccs: missing" in line


def test_planted_folders_and_stores_change_nothing_but_the_outputs(their_run, tmp_path):
    """A scratch tree of a stranger's folders and stores, planted with a
    traversal name, symlinks, a column name that is SQL and a macro named
    like a built-in: load, report, plot, merge and query of them change no
    file of the tree but their own outputs (the --db store, -o files, and
    the pending trace's conversion), write through no link, run no COPY.
    (A --db opened to write is an output: a macro there is dropped.)"""
    victim(tmp_path)
    victim(tmp_path, "victim2.txt")
    traversal = copy_of(their_run, tmp_path, "traversal")
    pend(traversal, "../victim.txt")
    links = copy_of(their_run, tmp_path, "links")
    pend(links, "tcp_probe.trace", lines=5)
    for name in ("tcp_probe.csv", "manifest.json.tmp"):
        (links / name).unlink(missing_ok=True)
        (links / name).symlink_to(tmp_path / "victim2.txt")
    (links / "figures").symlink_to(tmp_path)
    copied = tmp_path / "copied"
    theirs = tmp_path / "theirs.duckdb"
    assert tcpvar("load", "-q", "--db", theirs, their_run).returncode == 0
    column = shutil.copy(theirs, tmp_path / "column.duckdb")
    macro = shutil.copy(theirs, tmp_path / "macro.duckdb")
    for db in (column, macro):
        shutil.copytree(f"{theirs}.packets", f"{db}.packets")
    evil = (f'capture_id" AS reset FROM src.connections s WHERE false; COPY (SELECT 42) TO '
            f"'{copied}' (HEADER false); SELECT \"capture_id").replace('"', '""')
    with duckdb.connect(str(column)) as con:
        con.execute(f'ALTER TABLE connections ADD COLUMN "{evil}" INTEGER')
    with duckdb.connect(str(macro)) as con:
        con.execute("CREATE MACRO sqrt(x) AS 0")
    mine, out = tmp_path / "mine.duckdb", tmp_path / "out"
    out.mkdir()
    outputs = {out, *(Path(f"{mine}{s}") for s in ("", ".wal", ".packets")),
               *(links / n for n in ("tcp_probe.csv", "tcp_probe.json", "manifest.json",
                                     "tcp_probe.trace"))}
    before = tree_digest(tmp_path, outputs)
    statuses = [tcpvar(*args, cwd=out).returncode for args in (
        ("load", "-q", "--db", mine, traversal, links),
        ("report", "-q", "--db", mine, "-o", out / "r.html", links),
        ("plot", "-q", "--db", mine, "-o", out / "f.png", "throughput", links),
        ("plot", "-q", "--db", mine, "throughput", "run:1"),
        ("merge", "--db", mine, column),
        ("merge", "--db", mine, macro),
        ("query", "--db", macro, "SELECT rtt_stdev_ms FROM conn_stats"))]
    assert statuses == [ExitStatus.BAD_INPUT, 0, 0, 0, 0, ExitStatus.STORE, ExitStatus.STORE]
    assert tree_digest(tmp_path, outputs) == before
    assert not copied.exists()
    assert (out / "r.html").is_file() and (out / "f.png").is_file()


@pytest.mark.parametrize("command", ["load", "report", "plot"])
def test_a_folder_named_in_another_encoding_is_one_line(their_run, tmp_path, command):
    """A folder name that is not UTF-8 (bytes from another system): the
    store keeps names as text; one line, exit 3 (was an internal error)."""
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/run\xff"))
    shutil.copytree(their_run, folder)
    res = open_folder(command, folder, tmp_path)
    assert res.returncode == ExitStatus.BAD_INPUT, res.stderr
    (line,) = error_lines(res.stderr)
    assert line.endswith("run\\udcff: its name is not UTF-8, and the store keeps names as "
                         "UTF-8 text; rename it")


def test_a_manifest_that_is_a_folder_is_one_line(their_run, tmp_path):
    folder = copy_of(their_run, tmp_path)
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").mkdir()
    res = open_folder("load", folder, tmp_path)
    assert res.returncode == ExitStatus.BAD_INPUT, res.stderr
    (line,) = error_lines(res.stderr)
    assert line.endswith("manifest.json: not a regular file")


def test_a_parking_lots_hop_captures_planted_as_links(their_run, tmp_path):
    """A folder that says it is a parking lot has its hops' captures read:
    one a symlink to a victim's file, one to a name with ../ in it, one
    missing. The run is stored with a note per capture that is not one,
    its hops without them, and nothing but the store changes. (A hop count
    beyond 8 is refused: test_untrusted_text.)"""
    folder = copy_of(their_run, tmp_path)
    target = victim(tmp_path)
    m = json.loads((folder / "manifest.json").read_text())
    m["params"].update(topology="parking-lot", hops=3)
    (folder / "manifest.json").write_text(json.dumps(m))
    (folder / "hop2-in.pcap").symlink_to(target)
    (folder / "hop2.pcap").symlink_to(Path("..") / target.name)
    shutil.copy(folder / "bottleneck.pcap", folder / "hop1.pcap")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    res = open_folder("load", folder, tmp_path)
    assert res.returncode == 0, res.stderr
    assert target.read_text() == SECRET
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    changed = {p for p in before if after.get(p) != before[p]} | (set(after) - set(before))
    assert all(p.relative_to(tmp_path).parts[0].startswith("mine.duckdb") for p in changed), \
        changed
    con = duckdb.connect(str(tmp_path / "mine.duckdb"), read_only=True)
    (error,) = con.execute("SELECT error FROM runs").fetchone()
    assert "hop2-in.pcap: " in error and "hop2.pcap: " in error, error
    rows = con.execute("SELECT hop, router, arrivals_capture IS NOT NULL, "
                       "departures_capture IS NOT NULL FROM hops ORDER BY hop").fetchall()
    assert rows == [(1, "rl", True, True), (2, "p1", False, False), (3, "p2", False, False)]
