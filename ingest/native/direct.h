/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * direct.h - reading a capture's records where they lie in memory, without
 * libpcap's read loop and its two copies of every record (stdio's, then its
 * own buffer). libpcap opens and checks the file; the common records are
 * then read directly, and anything unusual is handed back to libpcap, from
 * that record on, so errors, truncation and rare formats stay libpcap's.
 */
#ifndef TCPVAR_DIRECT_H
#define TCPVAR_DIRECT_H

#include <stddef.h>
#include <stdint.h>
#include <pcap/pcap.h>

#define TV_DIRECT_IFACES 64	/* pcapng interfaces read directly; more go to libpcap */

struct tv_direct {
	int on;			/* records come from buf, not from libpcap */
	int ng;			/* pcapng; else classic pcap 2.4 */
	int swapped;		/* the file's byte order is not this machine's */
	int nsec;		/* classic pcap: nanosecond time stamps */
	const uint8_t *buf;
	size_t len, off;	/* off: the next record's (or block's) */
	uint32_t snapshot;	/* libpcap's snapshot length for the file */
	uint32_t nifaces;	/* pcapng: interfaces described so far */
	uint32_t units[TV_DIRECT_IFACES];	/* their time stamp units per second; 0: libpcap's */
	struct pcap_pkthdr hdr;
};

/*
 * After libpcap opened @pcap over the bytes @buf, @len long: read directly
 * from there when the format allows (@d->on says whether it does).
 */
void tv_direct_start(struct tv_direct *d, pcap_t *pcap, const void *buf, size_t len);

/*
 * The next record: 1 (in *h and *data), PCAP_ERROR_BREAK at the end of the
 * file, or 0 when libpcap must read on from d->off.
 */
int tv_direct_next(struct tv_direct *d, struct pcap_pkthdr **h, const unsigned char **data);

#endif
