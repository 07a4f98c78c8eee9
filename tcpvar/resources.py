"""Where tcpvar's own files are: the non-Python sources it builds at run
time (the eBPF hook, the kernel patch series) and its study files (the
papers' reproductions) — beside the package folders in a checkout or an
editable install, inside the package once installed with `pip install .` —
and the cache of what it builds and fetches."""
from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# checkout folder -> where setup.cfg puts it in an installed package
_INSTALLED = {"hooks": "hooks", "kernel-patches": "kernel_patches", "studies": "studies"}


def source_dir(name: str) -> Path:
    """hooks/, kernel-patches/ or studies/ of this tcpvar; the checkout's path when
    neither copy exists, so a message can name what is missing."""
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    installed = _PACKAGE / _INSTALLED[name]
    return installed if installed.is_dir() else checkout


def cache_dir() -> Path:
    """$TCPVAR_CACHE, else ~/.cache/tcpvar (kernel-patches/build.sh agrees)."""
    base = os.environ.get("TCPVAR_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tcpvar"
