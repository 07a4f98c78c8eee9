"""The uncompressed kernel inside a bzImage, for QEMU's PVH entry: a kernel
built with CONFIG_PVH carries an ELF note QEMU's -kernel starts at directly,
without the real-mode set-up and the decompressor. Under TCG Debian's
XZ-compressed kernel spends about 6 s of host time decompressing itself;
started as an ELF, the first kernel message comes after 1.5 s."""
from __future__ import annotations

import lzma
import struct
import zlib
from pathlib import Path

from tcpvar import safe_write

HDR_MAGIC = b"HdrS"                # boot protocol header at 0x202
MAX_ELF = 512 << 20                # a kernel image is a few tens of MiB
XEN_ELFNOTE_PHYS32_ENTRY = 18      # the PVH entry point's note (include/xen/interface/elfnote.h)


def payload(bz: bytes) -> bytes | None:
    """The compressed kernel of a bzImage (boot protocol 2.08 and later:
    setup_sects, payload_offset, payload_length), or None."""
    if len(bz) < 0x250 or bz[0x202:0x206] != HDR_MAGIC:
        return None
    if struct.unpack_from("<H", bz, 0x206)[0] < 0x208:
        return None
    setup_sects = bz[0x1F1] or 4
    offset, length = struct.unpack_from("<II", bz, 0x248)
    start = (setup_sects + 1) * 512 + offset
    if start + length > len(bz):
        return None
    return bz[start:start + length]


def decompress(data: bytes) -> bytes | None:
    """XZ or gzip (the kernel's compressions Python reads), at most MAX_ELF."""
    try:
        if data.startswith(b"\xfd7zXZ\x00"):
            out = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data, MAX_ELF)
        elif data.startswith(b"\x1f\x8b"):
            out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, MAX_ELF)
        else:
            return None
    except (lzma.LZMAError, zlib.error):
        return None
    return out if len(out) < MAX_ELF else None


def has_pvh_entry(elf: bytes) -> bool:
    """Whether a 64-bit little-endian ELF has Xen's PHYS32_ENTRY note."""
    if len(elf) < 64 or elf[:5] != b"\x7fELF\x02" or elf[5] != 1:
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + 56 > len(elf):
            return False
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", elf, at)
        if p_type == 4 and _note_in(elf[p_offset:p_offset + p_filesz]):     # PT_NOTE
            return True
    return False


def _note_in(notes: bytes) -> bool:
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, at)
        name = notes[at + 12:at + 12 + namesz].rstrip(b"\0")
        if name == b"Xen" and kind == XEN_ELFNOTE_PHYS32_ENTRY:
            return True
        at += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def write_elf(bzimage: Path, target: Path) -> bool:
    """Write @bzimage's kernel as an ELF at @target when QEMU can start it
    at its PVH entry; False (and nothing written) otherwise. Never through
    a link (safe_write)."""
    elf = decompress(payload(bzimage.read_bytes()) or b"")
    if elf is None or not has_pvh_entry(elf):
        return False
    safe_write.write_bytes(target, elf)
    return True
