"""The kernels the vm backend boots: Debian's stock kernel package (every
congestion-control variant as a module, netem), fetched and unpacked by
tcpvar into its cache without installing it on the host; the kernel built
from kernel-patches/; or any bzImage the user names."""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tcpvar.errors import VmError
from tcpvar.progress import Progress
from tcpvar.resources import cache_dir

from . import vmlinux

STOCK_META = "linux-image-amd64"      # Debian's package that points at the current kernel
# names that look like variants in module files or the config but are not
NOT_VARIANTS = {"diag", "advanced"}


@dataclass
class Kernel:
    kind: str                  # 'stock', 'patched', 'patched-debug' or 'custom'
    image: Path
    release: str | None        # uname -r, when known before boot
    root: Path | None = None   # where its /lib/modules lives, for module kernels

    def elf(self) -> Path:
        """Where the uncompressed ELF of its bzImage goes (capture/vmlinux.py)."""
        return self.image.parent / f"vmlinux-{self.release}"

    def boot_image(self) -> Path:
        """What QEMU is given: the ELF of Debian's kernel where it was
        written, else the image."""
        if self.kind == "stock" and self.release is not None:
            elf = self.elf()
            if elf.is_file() and not elf.is_symlink():
                return elf
        return self.image

    def variants(self) -> set[str] | None:
        """Congestion controls the kernel offers (built in or as modules), or
        None when that is only known once it runs."""
        found = self._offered("net/ipv4", "tcp_", "TCP_CONG")
        if found is None:
            return None
        names = {"highspeed" if n == "hstcp" else n for n in found}    # CONFIG_TCP_CONG_HSTCP
        return ({"reno"} | names) - NOT_VARIANTS

    def qdiscs(self) -> set[str] | None:
        """Queue disciplines the kernel offers (built in or as modules), or
        None when that is only known once it runs."""
        found = self._offered("net/sched", "sch_", "NET_SCH")
        if found is None:
            return None
        # pfifo and bfifo are the kernel's own (sch_fifo.c, always built);
        # the config's DEFAULT and FIFO are not qdiscs of their own
        return (found - {"default", "fifo"}) | {"pfifo", "bfifo"}

    def _offered(self, folder: str, prefix: str, option: str) -> set[str] | None:
        """The names of its modules kernel/@folder/@prefix<name>.ko* and of
        its built-in CONFIG_@option_<NAME>=y, lower case."""
        if self.root is None or self.release is None:
            return None
        found = module_names(self.root / "lib" / "modules" / self.release, folder, prefix)
        config = self.root / "boot" / f"config-{self.release}"
        if config.exists():
            found |= {m.group(1).lower() for m in
                      re.finditer(rf"^CONFIG_{option}_(\w+)=y", config.read_text(), re.M)}
        return found


def module_names(moddir: Path, folder: str, prefix: str) -> set[str]:
    """<name> of a kernel's modules kernel/@folder/@prefix<name>.ko*."""
    return {f.name.split(".")[0][len(prefix):]
            for f in (moddir / "kernel" / folder).glob(f"{prefix}*.ko*")}


def module_variants(moddir: Path) -> set[str]:
    """Congestion controls a kernel's module folder offers (tcp_<name>.ko*)."""
    return module_names(moddir, "net/ipv4", "tcp_") - NOT_VARIANTS


def loaded_variants() -> set[str]:
    """The congestion controls the running kernel (the host's, or the
    guest's inside the micro-VM) has loaded: the one reader of
    tcp_available_congestion_control."""
    return set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split())


def resolve(spec: str, progress=None) -> Kernel:
    """--kernel: 'stock' (default), 'patched', 'patched-debug' (with the
    sanitizers), or a path to a bzImage."""
    if spec == "stock":
        return stock_kernel(progress)
    if spec in ("patched", "patched-debug"):
        from .kernel_build import patched_kernel

        image = patched_kernel(build=True, progress=progress, debug=spec == "patched-debug")
        return Kernel(spec, image, None)
    path = Path(spec)
    if not path.is_file():
        raise VmError(f"--kernel {spec}: no such kernel image (use stock, patched, "
                      f"patched-debug, or the path of a bzImage)")
    return Kernel("custom", path.resolve(), None)


def _unpacked() -> list[Path]:
    root = cache_dir() / "kernels"
    return sorted(root.glob("debian-*/boot/vmlinuz-*")) if root.exists() else []


def cached_stock_kernel() -> Kernel | None:
    """Debian's kernel package if it is unpacked in the cache already."""
    images = _unpacked()
    if not images:
        return None
    image = images[-1]
    return Kernel("stock", image, image.name[len("vmlinuz-"):], root=image.parent.parent)


def stock_kernel(progress=None) -> Kernel:
    """Debian's kernel package, unpacked once into the cache."""
    kernel = cached_stock_kernel()
    if kernel is None:
        _fetch_stock(progress)
        kernel = cached_stock_kernel()
        if kernel is None:
            raise VmError("the unpacked Debian kernel package has no /boot/vmlinuz")
    if kernel.boot_image() == kernel.image:
        if progress:
            progress(Progress("uncompressing Debian's kernel for a faster boot, once"))
        # a kernel without a PVH entry is booted as it is
        vmlinux.write_elf(kernel.image, kernel.elf())
    return kernel


def stock_package() -> str:
    """The versioned package behind linux-image-amd64 (linux-image-6.1.0-NN-amd64)."""
    try:
        out = subprocess.run(["apt-cache", "depends", STOCK_META], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise VmError(f"cannot find Debian's {STOCK_META} package (is apt available, "
                      f"and `apt-get update` done?)") from None
    m = re.search(r"Depends:\s*(linux-image-[0-9][^\s]*)", out)
    if not m:
        raise VmError(f"{STOCK_META} names no kernel package in apt's lists")
    return m.group(1)


def _fetch_stock(progress=None) -> None:
    package = stock_package()
    if progress:
        progress(Progress(f"fetching Debian's kernel ({package}), once"))
    root = cache_dir() / "kernels"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        _checked(["apt-get", "download", "-q", package], cwd=tmp,
                 what=f"apt-get download {package}")
        debs = list(Path(tmp).glob("*.deb"))
        unpack = Path(tmp) / "root"
        _checked(["dpkg-deb", "-x", str(debs[0]), str(unpack)], what="dpkg-deb -x")
        release = package[len("linux-image-"):]
        # virtme-ng finds the modules from the image's path; modules.dep lets modprobe work
        _checked(["depmod", "-b", str(unpack), release], what="depmod")
        target = root / f"debian-{release}"
        if target.exists():
            shutil.rmtree(target)
        unpack.rename(target)


def _checked(args: list[str], what: str, cwd: str | None = None) -> None:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        why = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")
        raise VmError(f"{what} failed: {why.splitlines()[-1]}")
