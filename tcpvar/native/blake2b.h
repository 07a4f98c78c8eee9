/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * blake2b.h - BLAKE2b (RFC 7693), unkeyed, with a digest of 1 to 64 bytes:
 * the same digest as Python's hashlib.blake2b(data, digest_size=outlen).
 */
#ifndef TCPVAR_BLAKE2B_H
#define TCPVAR_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>

struct tv_blake2b {
	uint64_t h[8];
	uint64_t t[2];		/* bytes hashed so far */
	uint8_t buf[128];
	size_t fill;		/* bytes in buf */
	size_t outlen;
};

/* Start an unkeyed hash of @outlen bytes (1..64); -1 if out of range. */
int tv_blake2b_init(struct tv_blake2b *s, size_t outlen);
void tv_blake2b_update(struct tv_blake2b *s, const void *data, size_t len);
/* The digest as 2 * outlen lowercase hex digits and a NUL in @hex. */
void tv_blake2b_hex(struct tv_blake2b *s, char *hex);

#endif
