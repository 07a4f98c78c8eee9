"""DuckDB for the store, without the Python layer of its package where
tcpvar can do without it.

Importing the `duckdb` package takes 55-100 ms (its relation and expression
layer, its version read through importlib.metadata); its engine module
`_duckdb` alone takes about 15 ms, and that is all `tcpvar analyze` uses:
connect, execute, fetch, register. The one thing the package adds that the
store needs is the adapter through which DuckDB's Arrow scan reads a
registered Python object; tcpvar registers only objects that export an
Arrow C stream (the native scanner's tables), so it hands the engine an
adapter of its own for those (`_Sources`) and leaves the rest to the
package, imported the first time something else is registered.

A DuckDB without `_duckdb._set_arrow_sources` (before 2.0), or a process
that imported the package already, gets the package.
"""
from __future__ import annotations

import functools
import sys
import types

from tcpvar import signals
from tcpvar.beside import Beside

# an instance's settings: no extension is installed or loaded for what a
# file holds (a SQLite file would load sqlite_scanner)
CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


@functools.cache
def duckdb() -> types.ModuleType:
    """The module to open stores with: `_duckdb` set up with tcpvar's
    adapter, or the `duckdb` package. Either has connect(), Error and the
    other exceptions, and __version__. A Ctrl-C comes once it is imported:
    raised inside the engine's set-up, it aborted the process or was lost."""
    with signals.held():
        if "duckdb" not in sys.modules:
            try:
                import _duckdb
                _duckdb._set_arrow_sources(_Sources("tcpvar.store.engine.sources"))
                return _duckdb
            except (ImportError, AttributeError, TypeError):
                pass
        import duckdb as package
        return package


_early: Beside | None = None
_taken = False              # its connection handed to a store


def start_early() -> None:
    """Set up a DuckDB instance now, on a thread, for the first store the
    command opens (take_early()). An instance fills its catalog of built-in
    functions as it starts: 20-35 ms, which DuckDB does without Python's
    lock, so on a second core it overlaps the imports of Click and the
    command; the store is then attached to it, in about 4 ms."""
    global _early
    if _early is None:
        connect = functools.partial(duckdb().connect, ":memory:", config=CONFIG)
        # not a daemon: Python's exit waits for it rather than tearing the
        # engine down under it
        _early = Beside(connect, name="tcpvar-early-engine", daemon=False).start()


def take_early():
    """A connection of its own to the instance start_early() set up, for the
    first store the command opens; None for the stores after it, or when
    none was started or it failed. The instance lasts until end_early(): a
    store detaches itself as it closes, where freeing an instance would take
    5-15 ms more."""
    global _taken
    if _early is None or _taken:
        return None
    _taken = True
    _early.wait()           # failed: the store connects on its own, and says why
    return _early.value.cursor() if _early.value is not None else None


def end_early() -> None:
    """Free the instance start_early() set up, if any: a process that
    ends whole (cli.start) leaves it to the kernel."""
    global _early, _taken
    early, _early, _taken = _early, None, False
    if early is not None:
        early.wait()
        if early.value is not None:
            early.value.close()


class _Stream:
    """What DuckDB's Arrow scan reads a registered object through: all of
    its columns, from one `__arrow_c_stream__()` per scan. It takes no
    filter (accepts() is false), so DuckDB applies them itself."""

    one_shot = False
    schema_is_stable = False
    pull_under_gil = False

    def __init__(self, obj: object):
        self.obj = obj

    def rows(self) -> None:
        return None                     # unknown without reading the stream

    def accepts(self, predicate: object) -> bool:
        return False

    def stream(self, columns, filters) -> tuple[object, bool]:
        return self.obj.__arrow_c_stream__(), False


class _Predicate:
    """A filter DuckDB offers a source, built from the engine's description
    of it; _Stream.accepts() declines them all, so nothing reads it."""

    def __init__(self, *args, **kwargs):
        pass


class _Nodes(types.ModuleType):
    """The classes the engine builds offered filters from, whatever their
    names (Col, Const, And, ...): each a _Predicate."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Predicate


class _Sources(types.ModuleType):
    """The module the engine asks for a source (`adapt`) when an object is
    registered. Objects of pyarrow, polars or pandas, and anything without
    an Arrow C stream, go to the package's own adapter, which knows their
    schemas, sizes and filters."""

    _LIBRARIES = frozenset({"pyarrow", "polars", "pandas"})

    def __init__(self, name: str):
        super().__init__(name)
        self.nodes = _Nodes(f"{name}.nodes")

    def adapt(self, obj: object):
        if isinstance(obj, _Stream):
            return obj
        libraries = {getattr(cls, "__module__", "").partition(".")[0]
                     for cls in type(obj).__mro__}
        if hasattr(obj, "__arrow_c_stream__") and not libraries & self._LIBRARIES:
            return _Stream(obj)
        # the package sets up its own adapter as it is imported, for the
        # engine's later scans as well
        import duckdb as package
        return package._sources.adapt(obj)

    def __getattr__(self, name: str):
        # what else the engine may look up (to_arrow, to_polars, ...): the
        # package's, imported now
        if name.startswith("__"):
            raise AttributeError(name)
        import duckdb as package
        return getattr(package._sources, name)
