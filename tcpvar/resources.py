"""The non-Python sources tcpvar builds at run time (the eBPF hook, the
kernel patch series): beside the package folders in a checkout or an
editable install, inside the package once installed with `pip install .`."""
from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# checkout folder -> where setup.cfg puts it in an installed package
_INSTALLED = {"hooks": "hooks", "kernel-patches": "kernel_patches"}


def source_dir(name: str) -> Path:
    """hooks/ or kernel-patches/ of this tcpvar; the checkout's path when
    neither copy exists, so a message can name what is missing."""
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    installed = _PACKAGE / _INSTALLED[name]
    return installed if installed.is_dir() else checkout
