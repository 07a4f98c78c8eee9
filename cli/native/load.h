/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * load.h - a capture into a new store, as ingest/capture.py loads one: the
 * native scanner on a thread of its own from the command's start, its
 * packet batches written as segments by two writer threads, the
 * connections' rows through DuckDB's Arrow scan, the throughput series on
 * a connection of its own, and the capture's row completed last.
 */
#ifndef TCPVAR_LOAD_H
#define TCPVAR_LOAD_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>

#include "scan.h"
#include "store.h"

#define TV_QUEUE_DEPTH 4

struct tv_handed {
	int status;				/* a tv_scan_status */
	struct tv_arrow_table *batch;		/* packets, or NULL */
	struct tv_arrow_table *conns, *stats;	/* connections retired, or NULL */
};

/* a direction whose segments repeat an earlier one's (hardware duplicates) */
struct tv_copy {
	uint32_t conn, dir;
	uint64_t copies, dropped;
};

struct tv_load {
	const char *path;		/* the capture, as given */
	char resolved[PATH_MAX];
	int packets;			/* every packet stored (not --stats-only) */
	double rto_min_ms, hwdup_us, interval_ms;
	const char *version;		/* tcpvar's */

	struct tv_scan scan;
	pthread_t thread;
	int started, stop;	/* started: 1 running, 2 joined */
	pthread_mutex_t lock;
	pthread_cond_t moved;
	struct tv_handed queue[TV_QUEUE_DEPTH];
	int head, count;
	struct tv_copy *copies;		/* the scan thread's, then the caller's */
	size_t ncopies, copies_cap;
	int copies_failed;

	int limited;			/* DuckDB's memory held down for the retired */
	char *inserts[3];		/* the statements of its rows (ingest/sql) */
	struct tv_stmt complete;	/* its row completed, planned while it is read */
	long capture_id;
	long connections;		/* stored */
	char *warning;			/* the capture's, malloc'd; NULL when none */
	char error[640];
};

/* Set by a signal: the load stops between two batches. */
extern volatile sig_atomic_t tv_interrupted;

/* Open the capture and start reading it; 0, or -1 with l->error. */
int tv_load_start(struct tv_load *l);
/* Ready its statements in @s (attached), while the scan goes on; 0, or -1 with l->error. */
int tv_load_plan(struct tv_load *l, struct tv_store *s);
/* Store it in @s (readied); 0, or -1 with l->error (the caller removes the store). */
int tv_load_run(struct tv_load *l, struct tv_store *s);
/* Stop reading, free what is left. */
void tv_load_end(struct tv_load *l);

#endif
