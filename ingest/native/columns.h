/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * columns.h - a batch of packets as columns, laid out the way Apache Arrow
 * lays out primitive arrays (values + validity bitmap, list offsets), so the
 * Python side wraps the buffers without copying and DuckDB scans them.
 */
#ifndef TCPVAR_COLUMNS_H
#define TCPVAR_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

enum tv_ctype {
	TV_U8, TV_U16, TV_U32, TV_I64,
	TV_LIST_I64,		/* list<int64>: offsets in sack_off */
};

struct tv_batch {
	size_t cap;		/* rows allocated */
	size_t n;		/* rows filled */

	uint32_t *frame;	/* frame number in the file, from 1 */
	int64_t  *ts_ns;	/* capture time, ns since the epoch */
	uint32_t *conn;		/* connection id within the capture */
	uint8_t  *dir;		/* 0: a->b, 1: b->a */
	int64_t  *seq;		/* relative to the direction's ISN, unwrapped */
	int64_t  *ack;		/* relative to the peer's ISN, unwrapped */
	uint8_t  *flags;
	uint32_t *win;		/* advertised window in bytes (scaled if known) */
	uint32_t *len;		/* TCP payload bytes */
	uint32_t *wire_len;	/* frame length on the wire */
	uint16_t *ev;		/* TV_EV_* analysis marks */
	uint32_t *tsval, *tsecr;
	uint32_t *rtt_us;	/* RTT sample this ACK produced (Karn) */
	uint32_t *inflight;	/* peer's bytes in flight after this ACK */
	uint16_t *mss;
	uint8_t  *wscale;
	uint32_t *ngwa_window;	/* NGWA window from the IPv4 option */
	int64_t  *sack_l, *sack_r;	/* SACK blocks, relative, per packet */

	uint8_t *valid_tsval, *valid_tsecr, *valid_rtt_us, *valid_inflight,
		*valid_mss, *valid_wscale, *valid_ngwa_window;
	int32_t *sack_off;	/* n + 1 offsets into sack_l / sack_r */
	size_t sack_cap;
};

struct tv_coldef {
	const char *name;
	enum tv_ctype type;
	size_t data;		/* offsetof the values pointer in tv_batch */
	size_t valid;		/* offsetof the bitmap pointer, 0 if never null */
	int climbs;		/* values mostly climb in small steps (parquet.c) */
};

extern const struct tv_coldef tv_columns[];
extern const size_t tv_ncolumns;

struct tv_batch *tv_batch_new(size_t cap);
void tv_batch_free(struct tv_batch *b);
/* Room for @more SACK edges; 0 when out of memory. */
int tv_batch_reserve_sack(struct tv_batch *b, size_t more);
size_t tv_ctype_size(enum tv_ctype t);

static inline void tv_set_valid(uint8_t *bitmap, size_t row)
{
	bitmap[row >> 3] |= (uint8_t)(1u << (row & 7));
}

#endif
