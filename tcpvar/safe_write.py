"""Writing files where an input may have planted symlinks (docs/security.md).

tcpvar runs as root and writes into run folders, next to `-o` targets and
into folders named by runs from other people. Every file it writes is a new
file made here in the target's folder (O_EXCL and O_NOFOLLOW, as mkstemp
makes one: never an existing file, never through a symlink), then renamed
over the target: a symlink at the target is replaced, not followed. Names
read from inputs are taken only as bare names inside their folder, and
folders tcpvar writes into inside a run folder must be real folders, not
symlinks to elsewhere."""
from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
from pathlib import Path

from tcpvar.errors import InputError


@functools.cache
def _umask() -> int:
    """The process's umask, read without setting it (os.umask would, for
    every thread): _new_file() makes 0600 files, and what tcpvar writes
    gets the mode any new file of the user's gets."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    return 0o022


@contextlib.contextmanager
def replacing(path: str | Path, mode: str = "w", **kwargs):
    """A new file that replaces @path when the block ends without an error
    (and is removed when it does not). Text or binary as @mode says."""
    path = Path(path)
    fd, tmp = _new_file(path)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _new_file(path: Path) -> tuple[int, Path]:
    """A new 0600 file beside @path, open for writing, and its name: what
    tempfile.mkstemp does, without importing tempfile (and shutil and
    random with it), 5 ms of every command."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = path.parent / f".{path.name[:64]}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:     # 48 random bits: another name
            continue
    raise FileExistsError(f"{path.parent}: no new name for a file beside {path.name}")


def write_text(path: str | Path, text: str) -> Path:
    with replacing(path, "w") as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: str | Path, data: bytes) -> Path:
    with replacing(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def bare_name(folder: Path, name, what: str) -> Path:
    """@folder/@name for a @name read from an input: one path component, not
    '.' or '..'; InputError (naming @what) for anything else."""
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name
            or "\0" in name):
        raise InputError(f"{folder}: {what} is not a file name in the folder: {name!r}")
    return Path(folder) / name


def file_name(text: str, default: str = "unnamed") -> str:
    """A bare file name made from an input's @text (a run's name from a
    store): letters, digits and ._+- kept, anything else (a separator, a
    control character) as '_', no leading dot, at most 120 characters."""
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", str(text)).lstrip(".")[:120]
    return name or default


def is_regular_file(path: Path) -> bool:
    """A file, not a symlink to one (lstat)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def inner_folder(folder: Path, name: str) -> Path:
    """@folder/@name as a folder to write into, made when missing; InputError
    when it is a symlink or not a folder (it would lead writes elsewhere)."""
    path = Path(folder) / name
    with contextlib.suppress(FileExistsError):
        path.mkdir()
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise InputError(f"{path}: not a folder of its own (a symlink or a file); "
                         f"tcpvar does not write through it")
    return path
