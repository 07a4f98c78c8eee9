"""`tcpvar plot`, all stages but the drawing: find what TARGET names (a
stored run, a run folder, or a capture file), bring it into the store if it
is not there yet, and gather one figure's data. Plotting reads the store;
it never changes what a run holds (its series keep their bin width)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tcpvar import safe_write
from tcpvar.analyzers import figures
from tcpvar.errors import InputError, UsageError
from tcpvar.store import Store


@dataclass
class PlotOptions:
    conns: list[int] | None = None     # connections of a capture, or flows of a run
    from_s: float | None = None
    to_s: float | None = None
    bin_s: float | None = None         # throughput and fairness bins (default: from RTT)


def is_run_folder(path: Path) -> bool:
    from tcpvar.artefacts.run_folder import MANIFEST

    return path.is_dir() and (path / MANIFEST).is_file()


def run_id_of(target: str) -> int | None:
    """N of 'run:N', None for anything else."""
    if not target.startswith("run:"):
        return None
    try:
        return int(target[4:])
    except ValueError:
        raise UsageError(f"{target}: a stored run is run:N, N its run_id "
                         "(`tcpvar query \"SELECT run_id, name FROM runs\"`)") from None


def subject(store, target: str, conns: list[int] | None, progress):
    """The figures' subject for TARGET, stored first when it is not yet (a
    run folder the way `tcpvar load` loads it)."""
    run_id = run_id_of(target)
    if run_id is not None:
        return figures.run_subject(store.con, run_id, conns)
    path = Path(target)
    if path.is_dir():
        return figures.run_subject(store.con, _stored_folder(store, path, progress), conns)
    return figures.capture_subject(store.con, _stored_capture(store, path, progress),
                                   path.name, conns)


def _stored_folder(store, path: Path, progress) -> int:
    from tcpvar.ingest.run import stored_run

    if not is_run_folder(path):
        raise InputError(f"{path}: not a run folder (no manifest.json) and not a capture")
    run_id = stored_run(store.con, path)
    if run_id is None:
        from tcpvar.pipelines.load import store_into

        run_id = store_into(store, path, progress)
    return run_id


def _stored_capture(store, path: Path, progress) -> int:
    """The capture as the store holds it (read with whatever options), or read now."""
    from tcpvar.ingest.capture import ScanOptions, ingest, stored_capture

    return stored_capture(store, path) or ingest(store, path, ScanOptions(),
                                                 progress=progress).capture_id


def plot(db_path: str, target: str, kind: str, options: PlotOptions,
         progress) -> tuple[dict, Path]:
    """`tcpvar plot`: one figure's data for TARGET, stored first when the
    store lacks it, and the file it goes to when the user names none."""
    with Store(db_path) as store:
        subj = subject(store, target, options.conns, progress)
        return figure(store, subj, kind, options), default_output(subj, kind)


def figure(store, subj, kind: str, options: PlotOptions) -> dict:
    """One figure's data (report.figures draws it)."""
    w = figures.window(subj, options.from_s, options.to_s)
    return figures.figure(store.con, kind, subj, w, options.bin_s)


def default_output(subj, kind: str) -> Path:
    """NAME-KIND.png in the working folder: NAME comes from the store (a
    merged one may be anyone's), so it is made a bare file name."""
    return Path(f"{safe_write.file_name(subj.name)}-{kind}.png")


def capture_figures(store, capture_id: int, path: Path, out_dir: Path,
                    taken: set[str]) -> list[dict]:
    """Every kind of figure of an analysed capture but a run's own, each
    with its file in @out_dir: NAME-KIND.png, NAME the file's name, or with
    its folder's name in front when another capture of the command has that
    name."""
    name = path.name if path.name not in taken else f"{path.parent.name}-{path.name}"
    taken.add(name)
    subj = figures.capture_subject(store.con, capture_id, name, None)
    docs = []
    for kind in (k for k in figures.KINDS if k not in figures.RUN_KINDS):
        doc = figure(store, subj, kind, PlotOptions())
        doc["path"] = out_dir / f"{name}-{kind}.png"
        docs.append(doc)
    return docs
