"""Wireshark support: the NGWA dissector (dissectors/ngwa.lua, shipped in the
package as tcpvar.dissectors) and putting it where Wireshark loads personal
Lua plugins, so Wireshark and tshark decode the NGWA IPv4 option without
`-X lua_script:`."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tcpvar.errors import InstallError

LUA_NAME = "ngwa.lua"
PROTOCOL = "ngwa"
# Wireshark's personal Lua plugin folder on Linux (3.x and 4.x); the folder
# tshark reports (`tshark -G folders`, "Personal Lua Plugins") wins
DEFAULT_DIR = Path("~/.local/lib/wireshark/plugins")
TSHARK_TIMEOUT_S = 60


def dissector_text() -> bytes:
    """The bytes of dissectors/ngwa.lua as installed with tcpvar."""
    return resources.files("tcpvar.dissectors").joinpath(LUA_NAME).read_bytes()


def _tshark(*args: str) -> str | None:
    """tshark's stdout for @args, or None without a working tshark."""
    exe = shutil.which("tshark")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True,
                              timeout=TSHARK_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def personal_plugin_dir() -> Path:
    """The folder Wireshark and tshark load personal Lua plugins from."""
    text = _tshark("-G", "folders") or ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "Personal Lua Plugins" and value.strip():
            return Path(value.strip())
    return DEFAULT_DIR.expanduser()


def tshark_loads_ngwa() -> bool | None:
    """Whether tshark, started now, has the `ngwa` protocol (None: no tshark)."""
    text = _tshark("-G", "protocols")
    if text is None:
        return None
    return any(line.split("\t")[2:3] == [PROTOCOL] for line in text.splitlines())


@dataclass
class Installed:
    path: Path              # where the dissector now is
    changed: bool           # False: an identical copy was there already
    wireshark_dir: Path     # the folder Wireshark loads personal Lua plugins from
    in_wireshark_dir: bool  # path is in that folder
    loaded: bool | None     # tshark lists the ngwa protocol (None: no tshark, or another folder)


def install(target: str | Path | None = None) -> Installed:
    """Copy ngwa.lua into @target (default: Wireshark's personal Lua plugin
    folder, created if needed); replace an older copy atomically."""
    wireshark_dir = personal_plugin_dir()
    folder = Path(target).expanduser() if target is not None else wireshark_dir
    text = dissector_text()
    if folder.exists() and not folder.is_dir():
        raise InstallError(f"{folder}: not a folder")
    dest = folder / LUA_NAME
    try:
        folder.mkdir(parents=True, exist_ok=True)
        changed = not (dest.is_file() and dest.read_bytes() == text)
        if changed:
            fd, tmp = tempfile.mkstemp(prefix=".ngwa-", suffix=".lua", dir=folder)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(text)
                os.chmod(tmp, 0o644)
                os.replace(tmp, dest)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise InstallError(f"cannot install {LUA_NAME} into {folder}: "
                           f"{exc.strerror or exc}") from None
    same = _same_dir(folder, wireshark_dir)
    return Installed(dest, changed, wireshark_dir, same, tshark_loads_ngwa() if same else None)


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
