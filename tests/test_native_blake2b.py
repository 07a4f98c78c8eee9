"""BLAKE2b in C (tcpvar/native/blake2b.c) held to Python's hashlib.blake2b,
the independent truth: the RFC 7693 Appendix A vector (and its literal
digest), every message length 0..300 at several digest sizes, messages of
whole blocks (whose last block must wait for the final flag), and the same
message fed in uneven pieces giving the digest of one update. Digest sizes
outside 1..64 are refused."""
from __future__ import annotations

import hashlib
import random
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "tcpvar" / "native"

# Each line of stdin: outlen, the count of piece sizes and the sizes (fed in
# turn, round and round; none: one update), the message's length and its hex.
DRIVER = r"""
#include <stdio.h>
#include "blake2b.h"

static unsigned char data[1 << 20];

int main(void)
{
	size_t outlen, k, pieces[16], len, i, n;
	unsigned int byte;
	struct tv_blake2b s;
	char hex[129];

	while (scanf("%zu %zu", &outlen, &k) == 2) {
		for (i = 0; i < k; i++)
			if (k > 16 || scanf("%zu", &pieces[i]) != 1)
				return 2;
		if (scanf("%zu", &len) != 1 || len > sizeof(data))
			return 2;
		for (i = 0; i < len; i++) {
			if (scanf("%2x", &byte) != 1)
				return 2;
			data[i] = byte;
		}
		if (tv_blake2b_init(&s, outlen) < 0) {
			puts("refused");
			continue;
		}
		for (i = 0, n = 0; i < len || (k && n < k); n++) {
			size_t m = k ? pieces[n % k] : len;

			m = m < len - i ? m : len - i;
			tv_blake2b_update(&s, data + i, m);
			i += m;
		}
		tv_blake2b_hex(&s, hex);
		puts(hex);
	}
	return 0;
}
"""

RFC_ABC = ("ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
           "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """The driver, compiled once against blake2b.c."""
    out = tmp_path_factory.mktemp("blake2b")
    (out / "driver.c").write_text(DRIVER)
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", f"-I{NATIVE}", str(out / "driver.c"),
                    str(NATIVE / "blake2b.c"), "-o", str(out / "driver")],
                   check=True, capture_output=True, text=True)
    return out / "driver"


def digests(driver, cases):
    """The driver's line for each (outlen, pieces, message)."""
    lines = [f"{outlen} {len(pieces)} {' '.join(map(str, pieces))} {len(data)} {data.hex()}"
             for outlen, pieces, data in cases]
    res = subprocess.run([str(driver)], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True)
    out = res.stdout.splitlines()
    assert len(out) == len(cases)
    return out


def message(n, seed=0):
    return random.Random(seed * 1000003 + n).randbytes(n)


def truth(data, outlen):
    return hashlib.blake2b(data, digest_size=outlen).hexdigest()


def test_rfc_vector(driver):
    assert truth(b"abc", 64) == RFC_ABC
    assert digests(driver, [(64, [], b"abc")]) == [RFC_ABC]


def test_every_digest_size(driver):
    cases = [(outlen, [], data) for outlen in range(1, 65) for data in (b"", b"abc")]
    assert digests(driver, cases) == [truth(data, outlen) for outlen, _, data in cases]


def test_lengths(driver):
    cases = [(outlen, [], message(n)) for n in range(301) for outlen in (8, 16, 32, 64)]
    assert digests(driver, cases) == [truth(data, outlen) for outlen, _, data in cases]


def test_whole_blocks(driver):
    cases = [(outlen, [], message(n, 1)) for n in (128, 256, 1 << 16)
             for outlen in (1, 8, 16, 32, 64)]
    assert digests(driver, cases) == [truth(data, outlen) for outlen, _, data in cases]


def test_pieces(driver):
    pieces = [[1], [7], [127], [128], [129], [1, 7, 127, 128, 129], [129, 0, 127, 0]]
    cases = [(32, p, message(n, 2)) for n in (0, 1, 127, 128, 129, 255, 256, 257, 1000, 1 << 16)
             for p in [[]] + pieces]
    out = digests(driver, cases)
    assert out == [truth(data, outlen) for outlen, _, data in cases]
    whole = {len(data): digest for (_, p, data), digest in zip(cases, out) if not p}
    assert all(digest == whole[len(data)] for (_, _, data), digest in zip(cases, out))


def test_refused(driver):
    assert digests(driver, [(0, [], b"abc"), (65, [], b"abc")]) == ["refused", "refused"]
