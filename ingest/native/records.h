/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * records.h - the scanner's state as Arrow tables (arrow_stream.h): a packet
 * batch, the connections and their directions' statistics, the
 * retransmission episodes and the throughput series' sums. module.c
 * hands them to Python; a native program takes them as they are.
 * Each comes back with one reference: tv_arrow_put() frees it.
 */
#ifndef TCPVAR_RECORDS_H
#define TCPVAR_RECORDS_H

#include <stddef.h>

#include "arrow_stream.h"
#include "columns.h"
#include "flows.h"
#include "series.h"

/* A packet batch as a table, which then owns @b (freed on failure too); NULL out of memory. */
struct tv_arrow_table *tv_batch_table(struct tv_batch *b);
/* @n connections' infos as (connections, their directions' statistics); 0, or -1 out of memory. */
int tv_conn_tables(const struct tv_conn_info *info, size_t n,
		   struct tv_arrow_table **conns, struct tv_arrow_table **stats);
/* The connections still live in @f, as tv_conn_tables() makes them. */
int tv_live_tables(struct tv_flows *f, struct tv_arrow_table **conns,
		   struct tv_arrow_table **stats);
/* The throughput series' sums as a table; NULL out of memory (the caller checks s->valid first). */
struct tv_arrow_table *tv_series_table(const struct tv_series *s);
/* The retransmission episodes of @f as a table; NULL out of memory. */
struct tv_arrow_table *tv_events_table(struct tv_flows *f);

#endif
