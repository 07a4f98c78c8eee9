// SPDX-License-Identifier: GPL-2.0-only
/*
 * records.c - the scanner's C state as Arrow tables (records.h): a packet
 * batch's columns as they are, and the connections, their directions'
 * statistics, the retransmission episodes and the throughput series' sums
 * copied from their C records into columns of int64, double and text.
 *
 * No Python here, so that a native program driving the scanner gets the
 * same tables as module.c, which only wraps them as Python objects.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "records.h"

/* ---- a packet batch: its own columns, which the table then owns ---- */

struct batch_table {
	struct tv_arrow_table t;
	struct tv_batch *b;
	struct tv_arrow_col cols[];
};

static void batch_table_free(struct tv_arrow_table *t)
{
	struct batch_table *bt = (struct batch_table *)t;

	tv_batch_free(bt->b);
	free(bt);
}

static enum tv_arrow_type arrow_type(enum tv_ctype t)
{
	switch (t) {
	case TV_U8:
		return TV_A_U8;
	case TV_U16:
		return TV_A_U16;
	case TV_U32:
		return TV_A_U32;
	case TV_I64:
		return TV_A_I64;
	case TV_LIST_I64:
		break;
	}
	return TV_A_LIST_I64;
}

struct tv_arrow_table *tv_batch_table(struct tv_batch *b)
{
	struct batch_table *bt = calloc(1, sizeof(*bt) + tv_ncolumns * sizeof(bt->cols[0]));
	size_t i;

	if (!bt) {
		tv_batch_free(b);
		return NULL;
	}
	for (i = 0; i < tv_ncolumns; i++) {
		const struct tv_coldef *c = &tv_columns[i];

		bt->cols[i] = (struct tv_arrow_col){
			.name = c->name, .type = arrow_type(c->type),
			.values = *(void **)((char *)b + c->data),
			.valid = c->valid ? *(uint8_t **)((char *)b + c->valid) : NULL,
			.offsets = c->type == TV_LIST_I64 ? b->sack_off : NULL,
			.climbs = c->climbs,
		};
	}
	bt->b = b;
	bt->t = (struct tv_arrow_table){
		.rows = (int64_t)b->n, .ncols = tv_ncolumns, .cols = bt->cols,
		.free = batch_table_free,
	};
	atomic_init(&bt->t.refs, 1);
	return &bt->t;
}

/* ---- columns of plain C records (connections, stats, events, series) ---- */

enum { F_U64, F_I64, F_U32, F_U16, F_U8, F_INT, F_DBL };

struct field {
	const char *name;
	int type;
	size_t off;
};

/*
 * Records as a table: a column of int64 or double per field (after @nfirst
 * columns the caller fills), in one block with @extra bytes to spare.
 */
struct record_table {
	struct tv_arrow_table t;
	char *block;
	struct tv_arrow_col cols[];
};

static void record_table_free(struct tv_arrow_table *t)
{
	struct record_table *rt = (struct record_table *)t;

	free(rt->block);
	free(rt);
}

static size_t nfields(const struct field *fields)
{
	size_t n = 0;

	while (fields[n].name)
		n++;
	return n;
}

static struct record_table *record_table(const void *const *rows, size_t n,
					 const struct field *fields, size_t nfirst,
					 size_t extra)
{
	size_t k = nfields(fields), i, c;
	struct record_table *rt = calloc(1, sizeof(*rt) + (nfirst + k) * sizeof(rt->cols[0]));
	char *at;

	if (!rt)
		return NULL;
	extra = (extra + 7) & ~(size_t)7;	/* the fields' columns 8-byte aligned */
	rt->block = malloc(k * n * 8 + extra + 8);
	if (!rt->block) {
		free(rt);
		return NULL;
	}
	rt->t = (struct tv_arrow_table){
		.rows = (int64_t)n, .ncols = nfirst + k, .cols = rt->cols,
		.free = record_table_free,
	};
	atomic_init(&rt->t.refs, 1);
	at = rt->block + extra;
	for (c = 0; c < k; c++, at += n * 8) {
		const struct field *f = &fields[c];

		rt->cols[nfirst + c] = (struct tv_arrow_col){
			.name = f->name, .type = f->type == F_DBL ? TV_A_F64 : TV_A_I64, .values = at,
		};
		for (i = 0; i < n; i++) {
			const char *p = (const char *)rows[i] + f->off;
			int64_t iv = 0;

			switch (f->type) {
			case F_U64:
				iv = (int64_t)*(const uint64_t *)p;
				break;
			case F_I64:
				iv = *(const int64_t *)p;
				break;
			case F_U32:
				iv = *(const uint32_t *)p;
				break;
			case F_U16:
				iv = *(const uint16_t *)p;
				break;
			case F_U8:
				iv = *(const uint8_t *)p;
				break;
			case F_INT:
				iv = *(const int *)p;
				break;
			case F_DBL:
				memcpy(at + i * 8, p, 8);
				continue;
			}
			memcpy(at + i * 8, &iv, 8);
		}
	}
	return rt;
}

#define CI(n, t) {#n, t, offsetof(struct tv_conn_info, n)}
static const struct field conn_fields[] = {
	CI(id, F_U32), CI(family, F_U8), CI(a_port, F_U16), CI(b_port, F_U16),
	CI(first_ns, F_U64), CI(last_ns, F_U64), CI(packets, F_U64),
	CI(a_isn, F_U32), CI(b_isn, F_U32), CI(handshake, F_INT),
	CI(closed, F_INT), CI(reset, F_INT),
	{NULL, 0, 0},
};

#define DS(n, t) {#n, t, offsetof(struct tv_dirstats, n)}
static const struct field stat_fields[] = {
	DS(packets, F_U64), DS(ack_packets, F_U64), DS(pure_acks, F_U64),
	DS(data_packets, F_U64), DS(data_bytes, F_U64), DS(unique_bytes, F_U64),
	DS(rexmit_packets, F_U64), DS(rexmit_bytes, F_U64), DS(ooo_packets, F_U64),
	DS(dupacks, F_U64), DS(triple_dupacks, F_U64),
	DS(sack_packets, F_U64), DS(dsack_packets, F_U64), DS(sack_blocks, F_U64),
	DS(max_sack_blocks, F_U64), DS(zero_win_adv, F_U64), DS(zwnd_probes, F_U64),
	DS(zwnd_probe_bytes, F_U64), DS(pushed, F_U64), DS(urgent, F_U64),
	DS(syn, F_U64), DS(fin, F_U64), DS(rst, F_U64), DS(hw_dups, F_U64), DS(hw_copies, F_U64),
	DS(ect_packets, F_U64), DS(ce_packets, F_U64), DS(ece_packets, F_U64),
	DS(cwr_packets, F_U64),
	DS(missed_bytes, F_U64), DS(truncated, F_U64),
	DS(win_min, F_U64), DS(win_max, F_U64), DS(win_n, F_U64), DS(win_sum, F_DBL),
	DS(seg_min, F_U64), DS(seg_max, F_U64),
	DS(rtt_n, F_U64), DS(rtt_min, F_DBL), DS(rtt_max, F_DBL), DS(rtt_sum, F_DBL),
	DS(rtt_sumsq, F_DBL), DS(rtt_3whs, F_DBL),
	DS(rto_events, F_U64), DS(fast_retransmits, F_U64),
	DS(first_ns, F_U64), DS(last_ns, F_U64), DS(data_first_ns, F_U64),
	DS(data_last_ns, F_U64), DS(stream_first, F_I64), DS(stream_last, F_I64),
	DS(mss, F_INT), DS(wscale, F_INT), DS(sack_ok, F_INT), DS(ts_ok, F_INT),
	{NULL, 0, 0},
};

#define EV(n, t) {#n, t, offsetof(struct tv_event, n)}
static const struct field event_fields[] = {
	EV(conn, F_U32), EV(dir, F_U8), EV(kind, F_U8), EV(frame, F_U32),
	EV(len, F_U32), EV(dupacks, F_U32), EV(backoff, F_U32), EV(ts_ns, F_U64),
	EV(silence_ns, F_U64), EV(seq, F_I64),
	{NULL, 0, 0},
};

#define SB(n, t) {#n, t, offsetof(struct tv_bin, n)}
static const struct field bin_fields[] = {
	SB(conn, F_U32), SB(dir, F_U32), SB(bin, F_I64), SB(packets, F_U64), SB(bytes, F_U64),
	SB(unique_bytes, F_U64),
	{NULL, 0, 0},
};

#define ADDR_CHARS INET6_ADDRSTRLEN

/* The endpoints' addresses as two string columns at the front of @rt. */
static void address_columns(struct record_table *rt, const struct tv_conn_info *info,
			    size_t n)
{
	char *chars = rt->block;
	int32_t *offs[2] = {
		(int32_t *)(chars + 2 * n * ADDR_CHARS),
		(int32_t *)(chars + 2 * n * ADDR_CHARS) + n + 1,
	};
	size_t i, side;

	for (side = 0; side < 2; side++) {
		char *text = chars + side * n * ADDR_CHARS;
		int32_t used = 0;

		offs[side][0] = 0;
		for (i = 0; i < n; i++) {
			const uint8_t *addr = side ? info[i].b_addr : info[i].a_addr;

			if (!inet_ntop(info[i].family == 6 ? AF_INET6 : AF_INET, addr,
				       text + used, ADDR_CHARS))
				text[used] = 0;
			used += (int32_t)strlen(text + used);
			offs[side][i + 1] = used;
		}
		rt->cols[side] = (struct tv_arrow_col){
			.name = side ? "b_addr" : "a_addr", .type = TV_A_UTF8,
			.values = text, .offsets = offs[side],
		};
	}
}

/* conn and dir of the stats' @rows (two per connection of @info), at the front of @rt. */
static void direction_columns(struct record_table *rt, const struct tv_conn_info *info,
			      size_t rows)
{
	int64_t *conn = (int64_t *)rt->block, *dir = conn + rows;
	size_t i;

	for (i = 0; i < rows; i++) {
		conn[i] = (int64_t)info[i / 2].id;
		dir[i] = (int64_t)(i % 2);
	}
	rt->cols[0] = (struct tv_arrow_col){.name = "conn", .type = TV_A_I64, .values = conn};
	rt->cols[1] = (struct tv_arrow_col){.name = "dir", .type = TV_A_I64, .values = dir};
}

/* ---- the tables (records.h) ---- */

int tv_conn_tables(const struct tv_conn_info *info, size_t n,
		   struct tv_arrow_table **conns, struct tv_arrow_table **stats)
{
	const void **crow = NULL, **srow = NULL;
	struct record_table *ct = NULL, *dt = NULL;
	size_t i;

	*conns = *stats = NULL;
	crow = calloc(n ? n : 1, sizeof(*crow));
	srow = calloc(n ? 2 * n : 1, sizeof(*srow));
	if (!crow || !srow)
		goto out;
	for (i = 0; i < n; i++) {
		crow[i] = &info[i];
		srow[2 * i] = &info[i].dir[0];
		srow[2 * i + 1] = &info[i].dir[1];
	}
	ct = record_table(crow, n, conn_fields, 2,
			  2 * n * ADDR_CHARS + 2 * (n + 1) * sizeof(int32_t));
	dt = record_table(srow, 2 * n, stat_fields, 2, 2 * 2 * n * sizeof(int64_t));
	if (!ct || !dt)
		goto out;
	address_columns(ct, info, n);
	direction_columns(dt, info, 2 * n);
	*conns = &ct->t;
	*stats = &dt->t;
	ct = dt = NULL;			/* the caller's now */
out:
	free(crow);
	free(srow);
	if (ct)
		tv_arrow_put(&ct->t);
	if (dt)
		tv_arrow_put(&dt->t);
	return *conns ? 0 : -1;
}

int tv_live_tables(struct tv_flows *f, struct tv_arrow_table **conns,
		   struct tv_arrow_table **stats)
{
	size_t n = tv_flows_count(f), i, live = 0;
	struct tv_conn_info *info = calloc(n ? n : 1, sizeof(*info));
	int rc;

	if (!info) {
		*conns = *stats = NULL;
		return -1;
	}
	for (i = 0; i < n; i++)
		live += tv_flows_info(f, i, &info[live]);
	rc = tv_conn_tables(info, live, conns, stats);
	free(info);
	return rc;
}

struct tv_arrow_table *tv_series_table(const struct tv_series *s)
{
	const void **rows = calloc(s->n ? s->n : 1, sizeof(*rows));
	struct record_table *rt;
	size_t i;

	if (!rows)
		return NULL;
	for (i = 0; i < s->n; i++)
		rows[i] = &s->bins[i];
	rt = record_table(rows, s->n, bin_fields, 0, 0);
	free(rows);
	return rt ? &rt->t : NULL;
}

struct tv_arrow_table *tv_events_table(struct tv_flows *f)
{
	size_t n = tv_flows_nevents(f), i;
	const void **rows = calloc(n ? n : 1, sizeof(*rows));
	struct record_table *rt;

	if (!rows)
		return NULL;
	for (i = 0; i < n; i++)
		rows[i] = tv_flows_event(f, i);
	rt = record_table(rows, n, event_fields, 0, 0);
	free(rows);
	return rt ? &rt->t : NULL;
}
