// SPDX-License-Identifier: GPL-2.0-only
/* blake2b.c - BLAKE2b (RFC 7693), unkeyed, written from the RFC. */
#include <string.h>

#include "blake2b.h"

/* The IV is SHA-512's (RFC 7693 section 2.6). */
static const uint64_t iv[8] = {
	0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL,
	0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
	0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
	0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

/* The message word permutations (section 2.7); rounds 10 and 11 reuse 0 and 1. */
static const uint8_t sigma[10][16] = {
	{ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
	{ 14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3 },
	{ 11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4 },
	{ 7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8 },
	{ 9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13 },
	{ 2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9 },
	{ 12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11 },
	{ 13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10 },
	{ 6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5 },
	{ 10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0 },
};

static uint64_t ror64(uint64_t x, unsigned int n)
{
	return (x >> n) | (x << (64 - n));
}

/* Words are little-endian whatever the host's byte order. */
static uint64_t load64(const uint8_t *p)
{
	uint64_t x = 0;
	int i;

	for (i = 7; i >= 0; i--)
		x = (x << 8) | p[i];
	return x;
}

/* The mixing function G (section 3.1). */
static void mix(uint64_t *v, int a, int b, int c, int d, uint64_t x, uint64_t y)
{
	v[a] = v[a] + v[b] + x;
	v[d] = ror64(v[d] ^ v[a], 32);
	v[c] = v[c] + v[d];
	v[b] = ror64(v[b] ^ v[c], 24);
	v[a] = v[a] + v[b] + y;
	v[d] = ror64(v[d] ^ v[a], 16);
	v[c] = v[c] + v[d];
	v[b] = ror64(v[b] ^ v[c], 63);
}

/* The compression function F (section 3.2) on the block in s->buf. */
static void compress(struct tv_blake2b *s, int last)
{
	uint64_t v[16], m[16];
	int i;

	for (i = 0; i < 8; i++) {
		v[i] = s->h[i];
		v[i + 8] = iv[i];
	}
	v[12] ^= s->t[0];
	v[13] ^= s->t[1];
	if (last)
		v[14] = ~v[14];
	for (i = 0; i < 16; i++)
		m[i] = load64(s->buf + 8 * i);
	for (i = 0; i < 12; i++) {
		const uint8_t *z = sigma[i % 10];

		mix(v, 0, 4, 8, 12, m[z[0]], m[z[1]]);
		mix(v, 1, 5, 9, 13, m[z[2]], m[z[3]]);
		mix(v, 2, 6, 10, 14, m[z[4]], m[z[5]]);
		mix(v, 3, 7, 11, 15, m[z[6]], m[z[7]]);
		mix(v, 0, 5, 10, 15, m[z[8]], m[z[9]]);
		mix(v, 1, 6, 11, 12, m[z[10]], m[z[11]]);
		mix(v, 2, 7, 8, 13, m[z[12]], m[z[13]]);
		mix(v, 3, 4, 9, 14, m[z[14]], m[z[15]]);
	}
	for (i = 0; i < 8; i++)
		s->h[i] ^= v[i] ^ v[i + 8];
}

/* The 128-bit count of bytes, carried into the high word. */
static void count(struct tv_blake2b *s, size_t n)
{
	s->t[0] += n;
	if (s->t[0] < n)
		s->t[1]++;
}

int tv_blake2b_init(struct tv_blake2b *s, size_t outlen)
{
	int i;

	if (outlen < 1 || outlen > 64)
		return -1;
	memset(s, 0, sizeof(*s));
	for (i = 0; i < 8; i++)
		s->h[i] = iv[i];
	/* The parameter block: digest length, no key, fanout and depth 1. */
	s->h[0] ^= 0x01010000ULL ^ outlen;
	s->outlen = outlen;
	return 0;
}

void tv_blake2b_update(struct tv_blake2b *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t n;

	/*
	 * A full block is compressed only once more data follows: the last
	 * block, full or not, must wait for the final flag.
	 */
	while (len) {
		if (s->fill == sizeof(s->buf)) {
			count(s, s->fill);
			compress(s, 0);
			s->fill = 0;
		}
		n = sizeof(s->buf) - s->fill;
		if (n > len)
			n = len;
		memcpy(s->buf + s->fill, p, n);
		s->fill += n;
		p += n;
		len -= n;
	}
}

void tv_blake2b_hex(struct tv_blake2b *s, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;
	uint8_t b;

	count(s, s->fill);
	memset(s->buf + s->fill, 0, sizeof(s->buf) - s->fill);
	compress(s, 1);
	/* The digest is the first outlen bytes of h, little-endian. */
	for (i = 0; i < s->outlen; i++) {
		b = (uint8_t)(s->h[i / 8] >> (8 * (i % 8)));
		hex[2 * i] = digits[b >> 4];
		hex[2 * i + 1] = digits[b & 15];
	}
	hex[2 * s->outlen] = '\0';
}
