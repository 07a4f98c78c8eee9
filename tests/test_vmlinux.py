"""How the micro-VM boots: Debian's kernel started at its PVH entry from the
ELF inside its bzImage, without the drivers and modules no run uses.
Truth: binutils' readelf and strings on the files, the guest's own
/proc/modules and /sys."""
from __future__ import annotations

import os
import re
import signal
import subprocess

import pytest

from tcpvar.capture import vm, vmlinux
from tcpvar.capture.kernel_build import patched_kernel
from tcpvar.capture.kernels import stock_kernel


def _banner(path) -> str:
    out = subprocess.run(["strings", "-n", "20", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return re.search(r"^Linux version \S+", out, re.M).group(0)


def test_debians_kernel_boots_from_its_elf():
    """The file QEMU is given is the ELF of Debian's bzImage: readelf finds
    Xen's PHYS32_ENTRY note (type 0x12), and it is the same kernel."""
    kernel = stock_kernel()
    elf = kernel.boot_image()
    assert elf != kernel.image and elf.name == f"vmlinux-{kernel.release}"
    notes = subprocess.run(["readelf", "-n", str(elf)], capture_output=True, text=True,
                           check=True).stdout
    assert re.search(r"^\s+Xen\s+0x[0-9a-f]+\s+Unknown note type: \(0x00000012\)", notes, re.M)
    # the banner sits in the compressed payload; `file` reads the setup header's
    file_says = subprocess.run(["file", "-b", str(kernel.image)], capture_output=True,
                               text=True, check=True).stdout
    assert _banner(elf).split()[2] == re.search(r"version (\S+)", file_says).group(1)


def test_a_kernel_without_a_pvh_entry_is_left_as_it_is(tmp_path):
    """tcpvar's own kernel is built without CONFIG_PVH (readelf: no 0x12
    note in its ELF), so nothing is written for it; nor for a file that is
    no bzImage."""
    image = patched_kernel(build=True)
    assert not vmlinux.write_elf(image, tmp_path / "vmlinux")
    junk = tmp_path / "junk"
    junk.write_bytes(b"MZ" + bytes(4096))
    assert not vmlinux.write_elf(junk, tmp_path / "vmlinux")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk"]


def test_the_elf_is_not_written_through_a_link(tmp_path):
    """A link where the ELF goes is replaced, not followed."""
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "vmlinux").symlink_to(victim)
    assert vmlinux.write_elf(stock_kernel().image, tmp_path / "vmlinux")
    assert victim.read_text() == "keep"
    assert not (tmp_path / "vmlinux").is_symlink()


@pytest.mark.slow
def test_a_guest_has_no_unused_drivers(tmp_path):
    """One boot as the vm backend boots: the guest's kernel loaded none of
    the modules udev would load for QEMU's CPU, and has no SATA, SMBus or
    PS/2 controller."""
    kernel = stock_kernel()
    script = ("cut -d' ' -f1 /proc/modules | sort; echo ---; "
              "find /sys/class/ata_port /sys/bus/serio/devices /sys/bus/i2c/devices "
              "-mindepth 1 2>/dev/null; true")
    cmd = vm.vng_args(kernel.boot_image(), ["sh", "-c", script], kvm=False,
                      name=f"tcpvar-test-{tmp_path.name[-6:]}", rw_dir=tmp_path, clock="virtual")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=vm.guest_env(cmd))
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    modules, devices = (part.split() for part in out.split("---"))
    assert "virtio_pci" in modules             # the listing is the guest's
    assert not set(vm.UNUSED_MODULES) & set(modules)
    assert devices == []
