/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * series.h - the throughput series' sums, gathered during the scan: per
 * connection, direction and interval, the data segments, their bytes and
 * the bytes not resent, as the store's `throughput` table sums them from the
 * packets (analyzers/sql/throughput.sql). Intervals count from the first
 * record of the capture; when a later record is older still, the sums are
 * dropped (`valid` is 0) and the series is summed from the packets instead.
 */
#ifndef TCPVAR_SERIES_H
#define TCPVAR_SERIES_H

#include <stddef.h>
#include <stdint.h>

/* One run of a direction's segments in one interval (a direction whose
 * segments go back to an earlier interval has several for it). */
struct tv_bin {
	uint32_t conn;
	uint32_t dir;
	int64_t bin;
	uint64_t packets, bytes, unique_bytes;
};

struct tv_series {
	uint64_t interval_ns;	/* 0: not gathered */
	uint64_t base_ns;	/* the capture's first record */
	int based, valid;
	struct tv_bin *bins;
	size_t n, cap;
	size_t *latest;		/* per (conn, dir): its latest run's index + 1 */
	size_t nlatest;
};

void tv_series_init(struct tv_series *s, uint64_t interval_ns);
/* A record's time: the first sets the base; an older one ends the sums. */
void tv_series_record(struct tv_series *s, uint64_t ts_ns);
/* A data segment of @len bytes; 0, or -1 out of memory. */
int tv_series_add(struct tv_series *s, uint32_t conn, uint8_t dir, uint64_t ts_ns,
		  uint32_t len, int resent);
void tv_series_free(struct tv_series *s);

#endif
