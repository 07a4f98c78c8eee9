// SPDX-License-Identifier: GPL-2.0-only
/*
 * load.c - a capture into a new store (load.h). Its statements are the
 * files the Python front end runs (ingest/sql/, analyzers/sql/throughput
 * and its shape and sums); its warnings are ingest/capture.py's words.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arrow_stream.h"
#include "blake2b.h"
#include "load.h"
#include "parquet.h"
#include "records.h"

#define ROWS (1 << 17)			/* packets a batch and a segment (segments.ROWS) */
#define STATS_STEP (1 << 21)		/* segments a step without packets (reader.py) */
#define HEAD_TAIL (1 << 16)		/* bytes hashed at each end (capture.fingerprint) */
#define MAX_CONNECTIONS 100000		/* reader.MAX_CONNECTIONS */
#define RETIRE_ABOVE 50000		/* reader.RETIRE_ABOVE */
#define WRITERS 2			/* segments written at once (writers.WRITERS) */
#define MAX_SPAN 1000000		/* analyzers/series.py */
#define MAX_FILL 2000000

static int fail(struct tv_load *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->error, sizeof(l->error), fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- the scan thread ---- */

static void stop_scan(struct tv_load *l);

static void push(struct tv_load *l, struct tv_handed *it)
{
	pthread_mutex_lock(&l->lock);
	while (l->count == TV_QUEUE_DEPTH && !l->stop)
		pthread_cond_wait(&l->moved, &l->lock);
	if (l->stop) {
		pthread_mutex_unlock(&l->lock);
		if (it->batch)
			tv_arrow_put(it->batch);
		if (it->conns) {
			tv_arrow_put(it->conns);
			tv_arrow_put(it->stats);
		}
		return;
	}
	l->queue[(l->head + l->count++) % TV_QUEUE_DEPTH] = *it;
	pthread_cond_broadcast(&l->moved);
	pthread_mutex_unlock(&l->lock);
}

static void pop(struct tv_load *l, struct tv_handed *it)
{
	pthread_mutex_lock(&l->lock);
	while (!l->count)
		pthread_cond_wait(&l->moved, &l->lock);
	*it = l->queue[l->head];
	l->head = (l->head + 1) % TV_QUEUE_DEPTH;
	l->count--;
	pthread_cond_broadcast(&l->moved);
	pthread_mutex_unlock(&l->lock);
}

/* The hardware copies of @n connections' directions, for the warning */
static void note_copies(struct tv_load *l, const struct tv_conn_info *info, size_t n)
{
	size_t i, d;

	for (i = 0; i < n; i++) {
		for (d = 0; d < 2; d++) {
			const struct tv_dirstats *st = &info[i].dir[d];

			if (!st->hw_copies)
				continue;
			if (l->ncopies == l->copies_cap) {
				size_t cap = l->copies_cap ? 2 * l->copies_cap : 16;
				struct tv_copy *c = realloc(l->copies, cap * sizeof(*c));

				if (!c) {
					l->copies_failed = 1;
					return;
				}
				l->copies = c;
				l->copies_cap = cap;
			}
			l->copies[l->ncopies++] = (struct tv_copy){
				info[i].id, (uint32_t)d, st->hw_copies, st->hw_dups};
		}
	}
}

static void *scan_thread(void *arg)
{
	struct tv_load *l = arg;
	struct tv_flows *f = l->scan.flows;
	struct tv_handed it;

	while (!l->stop) {
		struct tv_batch *b = l->packets ? tv_batch_new(ROWS) : NULL;
		int rc = TV_SCAN_ERROR;

		memset(&it, 0, sizeof(it));
		if (!l->packets || b)
			rc = tv_scan_step(&l->scan, b, l->packets ? ROWS : STATS_STEP);
		if (rc == TV_SCAN_ERROR) {
			tv_batch_free(b);
			it.status = TV_SCAN_ERROR;
			push(l, &it);
			break;
		}
		it.status = rc;
		it.batch = b ? tv_batch_table(b) : NULL;
		if (b && !it.batch)
			it.status = TV_SCAN_ERROR;
		if (tv_flows_ngone(f)) {
			note_copies(l, tv_flows_gone(f), tv_flows_ngone(f));
			if (tv_conn_tables(tv_flows_gone(f), tv_flows_ngone(f), &it.conns,
					   &it.stats))
				it.status = TV_SCAN_ERROR;
			tv_flows_gone_clear(f);
		}
		push(l, &it);
		if (rc != TV_SCAN_MORE)
			break;
	}
	return NULL;
}

int tv_load_start(struct tv_load *l)
{
	struct tv_flow_opts opts = {
		.rto_min_ns = (uint64_t)(l->rto_min_ms * 1e6),
		.hwdup_ns = (uint64_t)(l->hwdup_us * 1e3),
		.interval_ns = l->packets ? (uint64_t)(l->interval_ms * 1e6) : 0,
		.max_conns = MAX_CONNECTIONS,
		.live_soft = RETIRE_ABOVE,
	};

	if (!realpath(l->path, l->resolved))
		return fail(l, "%s: cannot be resolved", l->path);
	if (tv_scan_open(&l->scan, l->path, &opts) < 0)
		return fail(l, "%s", l->scan.errbuf);
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->moved, NULL);
	if (pthread_create(&l->thread, NULL, scan_thread, l)) {
		tv_scan_close(&l->scan);
		return fail(l, "cannot start the scan");
	}
	l->started = 1;
	return 0;
}

void tv_load_end(struct tv_load *l)
{
	struct tv_handed it;
	int i;

	if (!l->started)
		return;
	if (l->started == 1)
		stop_scan(l);
	while (l->count) {
		pop(l, &it);
		if (it.batch)
			tv_arrow_put(it.batch);
		if (it.conns) {
			tv_arrow_put(it.conns);
			tv_arrow_put(it.stats);
		}
	}
	tv_scan_close(&l->scan);
	free(l->copies);
	free(l->warning);
	l->started = 0;
	for (i = 0; i < 3; i++)
		free(l->inserts[i]);
	tv_unprepare(&l->complete);
}

/* ---- the segment writers ---- */

struct writers {
	struct tv_load *l;
	char folder[PATH_MAX + 64];
	pthread_t threads[WRITERS];
	int nthreads, closing, error;
	pthread_mutex_t lock;
	pthread_cond_t moved;
	struct tv_arrow_table *jobs[WRITERS];
	long job_k[WRITERS];
	int njobs, busy;
	long written;
};

static int write_segment(struct writers *w, struct tv_arrow_table *t, long k)
{
	char path[PATH_MAX + 128], tmp[PATH_MAX + 192], by[64];
	int rc;

	snprintf(path, sizeof(path), "%s/part-%ld.parquet", w->folder, k);
	snprintf(tmp, sizeof(tmp), "%s/.part-%ld.parquet.%ld-%ld.tmp", w->folder, k,
		 (long)getpid(), k);
	snprintf(by, sizeof(by), "tcpvar version %s", w->l->version);
	rc = tv_parquet_write(t, tmp, by);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

static void *writer_thread(void *arg)
{
	struct writers *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct tv_arrow_table *t;
		long k;
		int rc;

		while (!w->njobs && !w->closing)
			pthread_cond_wait(&w->moved, &w->lock);
		if (!w->njobs)
			break;
		t = w->jobs[0];
		k = w->job_k[0];
		memmove(w->jobs, w->jobs + 1, --w->njobs * sizeof(w->jobs[0]));
		memmove(w->job_k, w->job_k + 1, w->njobs * sizeof(w->job_k[0]));
		w->busy++;
		pthread_mutex_unlock(&w->lock);
		rc = w->error ? 0 : write_segment(w, t, k);
		tv_arrow_put(t);
		pthread_mutex_lock(&w->lock);
		w->busy--;
		if (rc && !w->error)
			w->error = -rc;
		pthread_cond_broadcast(&w->moved);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Hand a batch to the writers, waiting while WRITERS are submitted and unwritten */
static int submit(struct writers *w, struct tv_store *s, struct tv_arrow_table *t)
{
	if (!w->nthreads) {
		if (tv_store_capture_folder(s, w->l->capture_id, w->folder, sizeof(w->folder))) {
			tv_arrow_put(t);
			return -1;
		}
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->moved, NULL);
		for (; w->nthreads < WRITERS; w->nthreads++)
			if (pthread_create(&w->threads[w->nthreads], NULL, writer_thread, w))
				break;
		if (!w->nthreads) {
			tv_arrow_put(t);
			return -1;
		}
	}
	pthread_mutex_lock(&w->lock);
	while (w->njobs + w->busy >= WRITERS && !w->error)
		pthread_cond_wait(&w->moved, &w->lock);
	if (w->error) {
		pthread_mutex_unlock(&w->lock);
		tv_arrow_put(t);
		return -1;
	}
	w->jobs[w->njobs] = t;
	w->job_k[w->njobs++] = w->written++;
	pthread_cond_broadcast(&w->moved);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

/* Wait for every write; 0, or the first error's errno */
static int writers_close(struct writers *w)
{
	int i;

	if (!w->nthreads)
		return 0;
	pthread_mutex_lock(&w->lock);
	w->closing = 1;
	pthread_cond_broadcast(&w->moved);
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
	w->nthreads = 0;
	return w->error;
}

/* ---- the store's rows ---- */

static char *sql_file(struct tv_load *l, struct tv_store *s, const char *rel)
{
	char *text = tv_read_file(s->root, rel, NULL);

	if (!text)
		fail(l, "%s/%s: cannot be read", s->root, rel);
	return text;
}

/*
 * The scanner's table @t as the temporary table @name of @con, from a view
 * the side connection makes of it. (A query that reads some columns of a
 * stream through DuckDB's Arrow scan of the C API reads the wrong ones: the
 * table is made of all of them.)
 */
static int copy_table(struct tv_load *l, struct tv_store *s, duckdb_connection con,
		      const char *name, struct tv_arrow_table *t)
{
	struct ArrowArrayStream stream = {0};
	char sql[256], view[64];
	int rc = 0;

	snprintf(view, sizeof(view), "%s_arrow", name);
	snprintf(sql, sizeof(sql), "CREATE OR REPLACE TEMP TABLE %s AS FROM memory.main.%s",
		 name, view);
	if (tv_arrow_stream(t, &stream) < 0) {
		rc = fail(l, "out of memory");
	} else {
		if (tv_register(s->e, s->side, view, &stream) || tv_exec(s->e, con, sql))
			rc = fail(l, "%s", s->e->error);
		snprintf(sql, sizeof(sql), "DROP VIEW IF EXISTS %s", view);
		tv_exec(s->e, s->side, sql);
		stream.release(&stream);
	}
	tv_arrow_put(t);
	return rc;
}

/* the statements of the capture's rows, each over a scanner's table by its name */
static const struct {
	const char *file, *table;
} inserts[] = {
	{"ingest/sql/capture_connections.sql", "_tv_conns"},
	{"ingest/sql/capture_counters.sql", "_tv_stats"},
	{"ingest/sql/capture_events.sql", "_tv_events"},
};

int tv_load_plan(struct tv_load *l, struct tv_store *s)
{
	char *sql;
	int i;

	for (i = 0; i < 3; i++) {
		l->inserts[i] = sql_file(l, s, inserts[i].file);
		if (!l->inserts[i])
			return -1;
	}
	/*
	 * DuckDB parses its whole SQL grammar the first time it spells out an
	 * identifier (to name an unnamed column): milliseconds, spent here while
	 * the scan runs rather than by the first statement after it
	 */
	if (tv_exec(s->e, s->con, "SELECT x + 1 FROM (SELECT 1 AS x)"))
		return fail(l, "%s", s->e->error);
	/* its text bound as text: the one statement planned ahead */
	sql = sql_file(l, s, "ingest/sql/capture_complete.sql");
	if (!sql)
		return -1;
	i = tv_prepare(s->e, s->con, sql, &l->complete);
	free(sql);
	return i ? fail(l, "%s", s->e->error) : 0;
}

/* Insert statement @which for the capture over the scanner's table @t, unless @rc: 0, or -1 */
static int insert(struct tv_load *l, struct tv_store *s, int which, struct tv_arrow_table *t,
		  int rc)
{
	static const char *const id[] = {"1"};
	int64_t value = l->capture_id;
	char *sql = rc ? NULL : tv_sql_ints(l->inserts[which], id, &value, 1);

	if (sql && tv_append(s->e, s->con, sql, inserts[which].table, t))
		rc = fail(l, "%s", s->e->error);
	else if (!rc && !sql)
		rc = fail(l, "out of memory");
	free(sql);
	tv_arrow_put(t);
	return rc;
}

/* Connections and their counters, and @events unless NULL, in a transaction begun here */
static int insert_connections(struct tv_load *l, struct tv_store *s,
			      struct tv_arrow_table *conns, struct tv_arrow_table *stats,
			      struct tv_arrow_table *events)
{
	int rc = tv_exec(s->e, s->con, "BEGIN TRANSACTION") ? fail(l, "%s", s->e->error) : 0;

	/* each insert in the transaction: an append of its own would commit */
	l->connections += conns->rows;
	rc = insert(l, s, 0, conns, rc);
	rc = insert(l, s, 1, stats, rc);
	return events ? insert(l, s, 2, events, rc) : rc;
}

/* Connections retired during the scan, in a transaction of their own */
static int store_retired(struct tv_load *l, struct tv_store *s, struct tv_handed *it)
{
	int rc;

	/*
	 * DuckDB keeps the blocks it wrote cached: a long load's memory stays
	 * flat; and a capture this large has its rows written by every core
	 */
	if (!l->limited && tv_exec(s->e, s->con, "SET memory_limit = '512MB'; RESET threads")) {
		tv_arrow_put(it->conns);
		tv_arrow_put(it->stats);
		return fail(l, "%s", s->e->error);
	}
	l->limited = 1;
	rc = insert_connections(l, s, it->conns, it->stats, NULL);

	if (tv_exec(s->e, s->con, rc ? "ROLLBACK" : "COMMIT") && !rc)
		rc = fail(l, "%s", s->e->error);
	return rc;
}

/* capture.fingerprint(): size, mtime and a hash of both ends */
static int fingerprint(struct tv_load *l, const struct stat *st, char *out, size_t n)
{
	static char buf[HEAD_TAIL];
	struct tv_blake2b h;
	char hex[33];
	ssize_t got;
	int fd = open(l->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return fail(l, "%s: cannot be read", l->path);
	tv_blake2b_init(&h, 16);
	got = read(fd, buf, HEAD_TAIL);
	if (got > 0)
		tv_blake2b_update(&h, buf, (size_t)got);
	if (got >= 0 && st->st_size > HEAD_TAIL) {
		off_t at = st->st_size - HEAD_TAIL > HEAD_TAIL ? st->st_size - HEAD_TAIL : HEAD_TAIL;

		got = pread(fd, buf, HEAD_TAIL, at);
		if (got > 0)
			tv_blake2b_update(&h, buf, (size_t)got);
	}
	close(fd);
	if (got < 0)
		return fail(l, "%s: cannot be read", l->path);
	tv_blake2b_hex(&h, hex);
	snprintf(out, n, "%lld:%lld:%s", (long long)st->st_size,
		 (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec, hex);
	return 0;
}

static int capture_row(struct tv_load *l, struct tv_store *s)
{
	char fp[128], *sql;
	duckdb_result res;
	struct tv_stmt st;
	struct stat sb;
	int rc;

	if (stat(l->path, &sb) || fingerprint(l, &sb, fp, sizeof(fp)))
		return fail(l, "%s: cannot be read", l->path);
	sql = sql_file(l, s, "ingest/sql/capture_row.sql");
	if (!sql)
		return -1;
	rc = tv_prepare(s->e, s->con, sql, &st);
	free(sql);
	if (rc)
		return fail(l, "%s", s->e->error);
	tv_bind_text(&st, "1", l->resolved);
	tv_bind_int(&st, "2", (int64_t)sb.st_size);
	tv_bind_int(&st, "3", (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec);
	tv_bind_text(&st, "4", fp);
	tv_bind_bool(&st, "5", l->packets);
	tv_bind_double(&st, "6", l->rto_min_ms);
	tv_bind_double(&st, "7", l->hwdup_us);
	tv_bind_text(&st, "8", l->version);
	if (tv_run(&st, &res))
		return fail(l, "%s", s->e->error);
	l->capture_id = s->e->row_count(&res) ? (long)s->e->value_int64(&res, 0, 0) : -1;
	s->e->destroy_result(&res);
	return l->capture_id < 0 ? fail(l, "no capture id") : 0;
}

/* ---- the throughput series, on a connection and a thread of its own ---- */

struct series {
	struct tv_load *l;
	struct tv_store *s;
	duckdb_connection con;
	int from_scan;		/* the scan's sums; else from the stored packets */
	pthread_t thread;
	int rc;
	char error[640];
};

static int series_sql(struct series *se, const char *rel, int64_t interval_ns)
{
	struct tv_stmt st;
	char *sql = tv_read_file(se->s->root, rel, NULL);
	int rc;

	if (!sql)
		return -1;
	rc = tv_prepare(se->s->e, se->con, sql, &st);
	free(sql);
	if (rc)
		return -1;
	if (strstr(rel, "shape")) {
		tv_bind_int(&st, "max_span", MAX_SPAN);
		tv_bind_int(&st, "max_fill", MAX_FILL);
	} else {
		tv_bind_int(&st, "capture_id", se->l->capture_id);
		tv_bind_int(&st, "interval_ns", interval_ns);
	}
	return tv_run(&st, NULL);
}

static void *series_thread(void *arg)
{
	struct series *se = arg;
	struct tv_engine *e = se->s->e;
	int64_t interval_ns = (int64_t)(se->l->interval_ms * 1e6), words = 0;
	int rc;

	rc = tv_exec(e, se->con, "BEGIN TRANSACTION");
	if (!rc)
		rc = se->from_scan ?
		     0 : series_sql(se, "analyzers/sql/throughput_sums.sql", interval_ns);
	if (!rc)
		rc = series_sql(se, "analyzers/sql/throughput_shape.sql", 0);
	if (!rc)
		rc = series_sql(se, "analyzers/sql/throughput.sql", interval_ns);
	/* a series left sparse or cut has words of its own: the Python front end's */
	if (!rc)
		rc = tv_exec_int(e, se->con, "SELECT count(*) FILTER (WHERE NOT dense) + "
				 "coalesce(sum(beyond), 0) FROM tv_shape", &words);
	if (!rc && words) {
		snprintf(e->error, sizeof(e->error), "the series has words to say");
		rc = -1;
	}
	if (!rc)
		rc = tv_exec(e, se->con, "DROP TABLE tv_shape; DROP TABLE tv_sums; COMMIT");
	if (rc) {
		snprintf(se->error, sizeof(se->error), "throughput series: %s", e->error);
		tv_exec(e, se->con, "ROLLBACK");
	}
	se->rc = rc;
	return NULL;
}

static int series_start(struct tv_load *l, struct tv_store *s, struct series *se)
{
	struct tv_arrow_table *t = NULL;

	memset(se, 0, sizeof(*se));
	se->l = l;
	se->s = s;
	se->from_scan = l->scan.series.valid;
	se->con = tv_store_connect(s);
	if (!se->con)
		return fail(l, "cannot start the throughput series");
	if (se->from_scan) {
		t = tv_series_table(&l->scan.series);
		if (!t || copy_table(l, s, se->con, "tv_sums", t)) {
			s->e->disconnect(&se->con);
			return l->error[0] ? -1 : fail(l, "out of memory");
		}
	}
	if (pthread_create(&se->thread, NULL, series_thread, se)) {
		s->e->disconnect(&se->con);
		return fail(l, "cannot start the throughput series");
	}
	return 0;
}

static int series_end(struct tv_load *l, struct tv_store *s, struct series *se)
{
	pthread_join(se->thread, NULL);
	s->e->disconnect(&se->con);
	return se->rc ? fail(l, "%s", se->error) : 0;
}

/* ---- the capture's warning: ingest/capture.py's words ---- */

static int by_conn(const void *a, const void *b)
{
	const struct tv_copy *x = a, *y = b;

	if (x->conn != y->conn)
		return x->conn < y->conn ? -1 : 1;
	return (int)x->dir - (int)y->dir;
}

static void say(char **w, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *grown;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	grown = realloc(*w, *len + (*len ? 2 : 0) + (size_t)n + 1);
	if (!grown)
		return;
	*w = grown;
	if (*len) {
		memcpy(*w + *len, "; ", 2);
		*len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(*w + *len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	*len += (size_t)n;
}

static void warning(struct tv_load *l, int truncated)
{
	const struct tv_scan *sc = &l->scan;
	size_t len = 0, i;
	char *w = NULL;

	if (truncated)
		say(&w, &len, "the file ends inside a record; the %llu records before it were "
		    "analysed", (unsigned long long)sc->frames);
	if (sc->options_cut)
		say(&w, &len, "%llu TCP %s options cut short (a bad option length, or the "
		    "capture ends inside them); the options after the cut are not read",
		    (unsigned long long)sc->options_cut,
		    sc->options_cut == 1 ? "segment has its" : "segments have their");
	if (sc->ip_len_zero) {
		char capped[64] = "";

		if (sc->ip_len_capped)
			snprintf(capped, sizeof(capped), " (%llu record%s more)",
				 (unsigned long long)sc->ip_len_capped,
				 sc->ip_len_capped == 1 ? " claims" : "s claim");
		say(&w, &len, "%llu TCP %s an IP length of 0 (segmentation offload); the "
		    "record's length stands in for it, at most 65,535 bytes%s",
		    (unsigned long long)sc->ip_len_zero,
		    sc->ip_len_zero == 1 ? "segment has" : "segments have", capped);
	}
	if (sc->bad_time)
		say(&w, &len, "%llu record%s before 1970 or after 2262, left out",
		    (unsigned long long)sc->bad_time,
		    sc->bad_time == 1 ? " has a time" : "s have times");
	qsort(l->copies, l->ncopies, sizeof(l->copies[0]), by_conn);
	for (i = 0; i < l->ncopies; i++) {
		const struct tv_copy *c = &l->copies[i];
		char fate[96];

		if (c->dropped)
			snprintf(fate, sizeof(fate), "--hw-dups dropped %llu",
				 (unsigned long long)c->dropped);
		else
			snprintf(fate, sizeof(fate), "they count as retransmissions; --hw-dups US "
				 "drops copies closer than US \u00b5s");
		say(&w, &len, "connection %u %s: %llu %s the sequence number and IP ID of one of "
		    "the 8 before (hardware duplicates); %s", c->conn, c->dir ? "b2a" : "a2b",
		    (unsigned long long)c->copies,
		    c->copies == 1 ? "segment repeats" : "segments repeat", fate);
	}
	l->warning = w;
}

/* ---- the load ---- */

/* The capture's row complete, in the transaction open on s->con */
static int update_capture(struct tv_load *l, struct tv_store *s, int with_series,
			  int truncated)
{
	const char *link = pcap_datalink_val_to_name(l->scan.dlt);
	struct tv_stmt *st = &l->complete;

	tv_bind_int(st, "2", l->scan.dlt);
	tv_bind_text(st, "3", link ? link : "unknown");
	tv_bind_int(st, "4", (int64_t)l->scan.frames);
	tv_bind_int(st, "5", (int64_t)l->scan.tcp);
	tv_bind_int(st, "6", (int64_t)l->scan.not_tcp);
	tv_bind_int(st, "7", (int64_t)l->scan.fragments);
	tv_bind_int(st, "8", (int64_t)l->scan.too_short);
	tv_bind_int(st, "9", (int64_t)l->scan.malformed);
	tv_bind_int(st, "10", (int64_t)l->scan.first_ns);
	tv_bind_int(st, "11", (int64_t)l->scan.last_ns);
	tv_bind_bool(st, "12", truncated);
	tv_bind_text(st, "13", l->warning);
	if (with_series)
		tv_bind_double(st, "14", l->interval_ms);
	else
		tv_bind_null(st, "14");
	tv_bind_int(st, "1", l->capture_id);
	return tv_execute(st, NULL) ? fail(l, "%s", s->e->error) : 0;
}

/* The live connections, the episodes and the capture's row, in one transaction */
static int complete(struct tv_load *l, struct tv_store *s, struct series *se, int truncated)
{
	struct tv_arrow_table *conns = NULL, *stats = NULL, *events = NULL;
	int rc = 0, series_rc;

	events = tv_events_table(l->scan.flows);
	if (!events || tv_live_tables(l->scan.flows, &conns, &stats)) {
		if (events)
			tv_arrow_put(events);
		rc = fail(l, "out of memory");	/* tv_live_tables() kept none */
	}
	if (!rc)
		rc = insert_connections(l, s, conns, stats, events);
	series_rc = se ? series_end(l, s, se) : 0;
	rc = rc ? rc : series_rc;
	if (!rc)
		rc = update_capture(l, s, se != NULL, truncated);
	/* written to the file at once, not to the WAL first: the checkpoint at close has less to do */
	if (!rc && tv_exec(s->e, s->con, "SET checkpoint_threshold = '0b'"))
		rc = fail(l, "%s", s->e->error);
	if (tv_exec(s->e, s->con, rc ? "ROLLBACK" : "COMMIT") && !rc)
		rc = fail(l, "%s", s->e->error);
	return rc;
}

/* The hardware copies of the connections still live, for the warning */
static void note_live_copies(struct tv_load *l)
{
	size_t i, n = tv_flows_count(l->scan.flows);
	struct tv_conn_info info;

	for (i = 0; i < n; i++)
		if (tv_flows_info(l->scan.flows, i, &info))
			note_copies(l, &info, 1);
}

static void stop_scan(struct tv_load *l)
{
	pthread_mutex_lock(&l->lock);
	l->stop = 1;
	pthread_cond_broadcast(&l->moved);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	l->started = 2;			/* joined */
}

int tv_load_run(struct tv_load *l, struct tv_store *s)
{
	struct writers w = {.l = l};
	struct tv_handed it;
	struct series se;
	int rc = 0, status, werr;

	if (capture_row(l, s))
		return -1;
	do {
		pop(l, &it);
		status = it.status;
		if (it.batch && it.batch->rows && !rc)
			rc = submit(&w, s, it.batch) ? fail(l, "a segment cannot be written") : 0;
		else if (it.batch)
			tv_arrow_put(it.batch);
		if (it.conns && !rc) {
			rc = store_retired(l, s, &it);
		} else if (it.conns) {
			tv_arrow_put(it.conns);
			tv_arrow_put(it.stats);
		}
		if (tv_interrupted)
			rc = fail(l, "interrupted");
	} while (status == TV_SCAN_MORE && !rc);
	stop_scan(l);
	werr = writers_close(&w);
	if (rc)
		return rc;
	if (status == TV_SCAN_ERROR)
		return fail(l, "%s", l->scan.errbuf[0] ? l->scan.errbuf : "out of memory");
	if (werr)
		return fail(l, "a segment cannot be written (%s)", strerror(werr));
	if (!l->scan.tcp)
		return fail(l, "no TCP segments");
	note_live_copies(l);
	if (l->copies_failed)
		return fail(l, "out of memory");
	if (l->limited && tv_exec(s->e, s->con, "RESET memory_limit"))
		return fail(l, "%s", s->e->error);
	warning(l, status == TV_SCAN_TRUNCATED);
	if (l->packets && series_start(l, s, &se))
		return -1;
	return complete(l, s, l->packets ? &se : NULL, status == TV_SCAN_TRUNCATED);
}
