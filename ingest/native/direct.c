// SPDX-License-Identifier: GPL-2.0-only
/*
 * direct.c - records read where they lie: classic pcap 2.4 and pcapng.
 *
 * Only what is common is read here: pcap records no longer than the
 * snapshot length; pcapng Enhanced Packet Blocks of interfaces whose time
 * stamps are in micro- or nanoseconds without an offset, and the blocks
 * libpcap skips. Anything else (a record cut short, a new section or
 * interface, a Simple Packet Block, a malformed block) is libpcap's from
 * there on, so its errors and its handling of rarer cases are unchanged.
 * The time stamps are formed as libpcap forms them for nanosecond reading.
 */
#include <byteswap.h>
#include <stdio.h>
#include <string.h>

#include "direct.h"

#define PCAP_MAGIC_US	0xa1b2c3d4u
#define PCAP_MAGIC_NS	0xa1b23c4du
#define PCAP_FILE_HDR	24
#define PCAP_REC_HDR	16

#define NG_SHB		0x0A0D0D0Au
#define NG_IDB		1u
#define NG_PB		2u	/* obsolete Packet Block */
#define NG_SPB		3u
#define NG_EPB		6u
#define NG_BOM		0x1A2B3C4Du
#define NG_EPB_HDR	28	/* type, length, interface, time stamp (2), caplen, len */
#define NG_SKIP_MAX	(1u << 20)	/* larger blocks to skip: libpcap's limits decide */
#define OPT_TSRESOL	9
#define OPT_TSOFFSET	14

static uint32_t u32(const struct tv_direct *d, const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return d->swapped ? bswap_32(v) : v;
}

static uint16_t u16(const struct tv_direct *d, const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return d->swapped ? bswap_16(v) : v;
}

/* ---- classic pcap ---- */

static int classic_start(struct tv_direct *d)
{
	uint32_t magic;
	uint16_t major, minor;

	if (d->len < PCAP_FILE_HDR)
		return 0;
	memcpy(&magic, d->buf, 4);
	d->swapped = magic != PCAP_MAGIC_US && magic != PCAP_MAGIC_NS;
	magic = u32(d, d->buf);
	if (magic != PCAP_MAGIC_US && magic != PCAP_MAGIC_NS)
		return 0;
	major = u16(d, d->buf + 4);
	minor = u16(d, d->buf + 6);
	if (major != 2 || minor != 4)
		return 0;		/* older: libpcap swaps caplen and len */
	d->nsec = magic == PCAP_MAGIC_NS;
	d->off = PCAP_FILE_HDR;
	return 1;
}

static int classic_next(struct tv_direct *d, struct pcap_pkthdr *h, const unsigned char **data)
{
	const uint8_t *p = d->buf + d->off;
	size_t left = d->len - d->off;
	long frac;

	if (left == 0)
		return PCAP_ERROR_BREAK;
	if (left < PCAP_REC_HDR)
		return 0;
	h->caplen = u32(d, p + 8);
	if (h->caplen > d->snapshot || h->caplen > left - PCAP_REC_HDR)
		return 0;
	/* signed in a file of this machine's byte order, unsigned in a swapped one */
	h->ts.tv_sec = d->swapped ? (long)u32(d, p) : (long)(int32_t)u32(d, p);
	frac = d->swapped ? (long)u32(d, p + 4) : (long)(int32_t)u32(d, p + 4);
	h->ts.tv_usec = d->nsec ? frac : frac * 1000;
	h->len = u32(d, p + 12);
	*data = p + PCAP_REC_HDR;
	d->off += PCAP_REC_HDR + h->caplen;
	return 1;
}

/* ---- pcapng ---- */

/* The block at @off: its type and length, 0 when it is not well formed. */
static uint32_t ng_block(const struct tv_direct *d, size_t off, uint32_t *type)
{
	size_t left = d->len - off;
	uint32_t total;

	if (left < 12)
		return 0;
	*type = u32(d, d->buf + off);
	total = u32(d, d->buf + off + 4);
	if (total < 12 || total % 4 || total > left || u32(d, d->buf + off + total - 4) != total)
		return 0;
	return total;
}

/* An Interface Description Block's time stamp units per second, 0 when
 * libpcap must read its packets (another resolution, an offset). */
static uint32_t ng_units(const struct tv_direct *d, const uint8_t *b, uint32_t total)
{
	uint32_t units = 1000000, at = 16;
	int64_t offset;

	while (at + 4 <= total - 4) {
		uint16_t code = u16(d, b + at), len = u16(d, b + at + 2);

		if (code == 0)
			break;
		if (at + 4 + len > total - 4)
			return 0;
		if (code == OPT_TSRESOL && len == 1)
			units = b[at + 4] == 6 ? 1000000 : b[at + 4] == 9 ? 1000000000 : 0;
		if (code == OPT_TSOFFSET && len == 8) {
			memcpy(&offset, b + at + 4, 8);
			if (offset)
				return 0;
		}
		at += 4 + ((len + 3u) & ~3u);
	}
	return units;
}

/* The section's byte order and interfaces, from the blocks libpcap read as
 * it opened the file (up to @start). */
static int ng_start(struct tv_direct *d, size_t start)
{
	size_t off = 0;
	uint32_t type, total;

	if (d->len < 12 || u32(d, d->buf) != NG_SHB)
		return 0;
	memcpy(&total, d->buf + 8, 4);
	d->swapped = total != NG_BOM;
	if (u32(d, d->buf + 8) != NG_BOM)
		return 0;
	while (off < start) {
		total = ng_block(d, off, &type);
		if (!total || (type == NG_SHB && off) || type == NG_PB || type == NG_SPB ||
		    type == NG_EPB)
			return 0;
		if (type == NG_IDB) {
			if (d->nifaces == TV_DIRECT_IFACES || total < 20)
				return 0;
			d->units[d->nifaces++] = ng_units(d, d->buf + off, total);
		}
		off += total;
	}
	if (off != start)
		return 0;
	d->ng = 1;
	d->off = start;
	return 1;
}

static int ng_next(struct tv_direct *d, struct pcap_pkthdr *h, const unsigned char **data)
{
	for (;;) {
		const uint8_t *b = d->buf + d->off;
		uint32_t type, total, iface, units;
		uint64_t t;

		if (d->off == d->len)
			return PCAP_ERROR_BREAK;
		total = ng_block(d, d->off, &type);
		if (!total)
			return 0;
		if (type == NG_EPB) {
			if (total < NG_EPB_HDR + 4)
				return 0;
			iface = u32(d, b + 8);
			units = iface < d->nifaces ? d->units[iface] : 0;
			h->caplen = u32(d, b + 20);
			if (!units || h->caplen > d->snapshot || h->caplen > total - NG_EPB_HDR - 4)
				return 0;
			t = (uint64_t)u32(d, b + 12) << 32 | u32(d, b + 16);
			h->ts.tv_sec = (long)(t / units);
			h->ts.tv_usec = (long)(t % units * (1000000000 / units));
			h->len = u32(d, b + 24);
			*data = b + NG_EPB_HDR;
			d->off += total;
			return 1;
		}
		if (type == NG_SHB || type == NG_IDB || type == NG_PB || type == NG_SPB ||
		    total > NG_SKIP_MAX)
			return 0;
		d->off += total;	/* a block libpcap skips too */
	}
}

void tv_direct_start(struct tv_direct *d, pcap_t *pcap, const void *buf, size_t len)
{
	long start = ftell(pcap_file(pcap));	/* where libpcap's opening stopped */

	memset(d, 0, sizeof(*d));
	d->buf = buf;
	d->len = len;
	d->snapshot = (uint32_t)pcap_snapshot(pcap);
	d->on = start > 0 && (size_t)start <= len &&
		(classic_start(d) ? (size_t)start == PCAP_FILE_HDR : ng_start(d, (size_t)start));
}

int tv_direct_next(struct tv_direct *d, struct pcap_pkthdr **h, const unsigned char **data)
{
	*h = &d->hdr;
	return d->ng ? ng_next(d, &d->hdr, data) : classic_next(d, &d->hdr, data);
}
