/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scan.h - one pass over a capture file with libpcap: decode every frame,
 * run the per-connection analysis, and append the TCP segments to batches.
 */
#ifndef TCPVAR_SCAN_H
#define TCPVAR_SCAN_H

#include <stdint.h>
#include <stdio.h>
#include <pcap/pcap.h>

#include "columns.h"
#include "direct.h"
#include "flows.h"
#include "series.h"

enum tv_scan_status {
	TV_SCAN_MORE = 0,	/* call again */
	TV_SCAN_EOF,		/* the whole file was read */
	TV_SCAN_TRUNCATED,	/* the file ends inside a record: all before it was read */
	TV_SCAN_ERROR,		/* a read error; message in errbuf */
};

/* A decoded TCP segment with what the record said about it. */
struct tv_item {
	struct tv_segment seg;
	uint64_t ts;
	uint32_t wire_len;
	uint32_t frame;
};

struct tv_scan {
	pcap_t *pcap;
	int dlt;
	struct tv_flows *flows;
	uint64_t max_conns;	/* the connection limit it was opened with */
	struct tv_series series;	/* the throughput series' sums */
	int status;
	void *map;		/* the file, when it is read through a mapping */
	size_t map_len, map_released;
	struct tv_direct direct;	/* records read in place (direct.c) */

	/* what the frames were */
	uint64_t frames, tcp, not_tcp, fragments, too_short, malformed;
	uint64_t options_cut;		/* TCP segments whose options are cut */
	uint64_t ip_len_zero;		/* TCP segments whose IP length field was 0 */
	uint64_t ip_len_capped;		/* of those, how many were capped (decode.h) */
	uint64_t bad_time;		/* records before 1970 or after 2262: left out */
	uint64_t first_ns, last_ns;
	uint64_t captured_bytes;	/* sum of captured lengths */
	char errbuf[PCAP_ERRBUF_SIZE + 128];
};

/* Open @path; on failure return -1 with a message in s->errbuf. */
int tv_scan_open(struct tv_scan *s, const char *path, const struct tv_flow_opts *opts);
/* The same over an open stream, which it takes: closed with the scan or on failure. */
int tv_scan_open_fp(struct tv_scan *s, FILE *fp, const struct tv_flow_opts *opts);
/* The same over a file's bytes in memory, which must outlive the scan. */
int tv_scan_open_buffer(struct tv_scan *s, const void *data, size_t len,
			const struct tv_flow_opts *opts);

/*
 * Analyse segments until @b is full (or, without a batch, @max_segments
 * were analysed) or the file ends. Returns a tv_scan_status.
 */
int tv_scan_step(struct tv_scan *s, struct tv_batch *b, uint64_t max_segments);

/* Bytes of the file read so far; -1 on a stream. */
long tv_scan_position(struct tv_scan *s);

void tv_scan_close(struct tv_scan *s);

#endif
