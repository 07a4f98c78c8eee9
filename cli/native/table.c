// SPDX-License-Identifier: GPL-2.0-only
/*
 * table.c - the plain table of a capture's connections that `tcpvar
 * analyze` prints into a pipe (table.h): report/tables.py's
 * connections_lines(), a batch at a time, each column as wide as its
 * widest cell so far: laid out here from the rows the Python front end
 * reads for it (analyzers/connections.py, brief) as report/tables.py lays
 * them out, or by DuckDB (analyzers/sql/connection_lines.sql) for many.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

#define BATCH 50000		/* connections a query (analyzers/connections.py) */
/*
 * Fewer are laid out here, from the rows DuckDB returns one value at a
 * time; DuckDB lays out more (in Python the line is at 500: its layout is
 * slower than DuckDB's beyond; here, reading the values is).
 */
#define LAID_OUT_HERE 10000
#define COLUMNS 14
#define CELL 64

/* report/tables.py's CONN_COLUMNS: heading, its width in characters, left-aligned */
static const struct {
	const char *text;
	int width, left;
} heading[COLUMNS] = {
	{"#", 1, 0}, {"from \u2192 to", 9, 1}, {"pkts", 4, 0}, {"data pkts", 9, 0},
	{"data bytes", 10, 0}, {"unique", 6, 0}, {"rexmit pkts", 11, 0},
	{"rexmit bytes", 12, 0}, {"ooo", 3, 0}, {"dupacks", 7, 0}, {"RTO/fast", 8, 0},
	{"RTT avg ms (n)", 14, 0}, {"throughput", 10, 0}, {"goodput", 7, 0},
};

/* the columns of analyzers/sql/connection_brief.sql's rows, in its order */
enum { B_CONN, B_DIR, B_VER, B_A, B_APORT, B_B, B_BPORT, B_PKTS, B_DPKTS, B_DBYTES,
	B_UNIQUE, B_RPKTS, B_RBYTES, B_OOO, B_DUPACKS, B_RTTN, B_RTT, B_RTO, B_FAST,
	B_TPUT, B_GPUT };

/* characters, not bytes: "→" is one */
static int chars(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += (*s & 0xc0) != 0x80;
	return n;
}

static void print_heading(FILE *out, const char *path, long count, const int32_t *w)
{
	char line[1024];
	int i, n = 0, end = 0;

	fprintf(out, "%s: %ld TCP connections\n\n", path, count);
	for (i = 0; i < COLUMNS; i++) {
		int pad = w[i] - heading[i].width;

		n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%*s%s%*s", i ? "  " : "",
			      heading[i].left ? 0 : pad, "", heading[i].text,
			      heading[i].left ? pad : 0, "");
		if (!heading[i].left || !pad)
			end = n;	/* the line ends without spaces (rstrip) */
	}
	fprintf(out, "%.*s\n", end, line);
	for (i = 0; i < COLUMNS; i++) {
		fputs(i ? "  " : "", out);
		for (n = 0; n < w[i]; n++)
			fputc('-', out);
	}
	fputc('\n', out);
}

/* report.tables.si(): 3 significant digits with an SI prefix; "-" for NULL */
static void si(duckdb_result *res, struct tv_engine *e, idx_t col, idx_t row, const char *unit,
	       char *out)
{
	double v, size;

	if (e->value_is_null(res, col, row)) {
		strcpy(out, "-");
		return;
	}
	v = e->value_double(res, col, row);
	size = fabs(v);
	if (size >= 1e9)
		snprintf(out, CELL, "%.3g G%s", v / 1e9, unit);
	else if (size >= 1e6)
		snprintf(out, CELL, "%.3g M%s", v / 1e6, unit);
	else if (size >= 1e3)
		snprintf(out, CELL, "%.3g k%s", v / 1e3, unit);
	else if (*unit)
		snprintf(out, CELL, "%.3g %s", v, unit);
	else
		snprintf(out, CELL, "%.3g", v);
}

/* report.tables.integer(): a count as it is; "-" for NULL */
static void integer(duckdb_result *res, struct tv_engine *e, idx_t col, idx_t row, char *out)
{
	char *v = e->value_is_null(res, col, row) ? NULL : e->value_varchar(res, col, row);

	snprintf(out, CELL, "%s", v ? v : "-");
	e->free(v);
}

/* analyzers.connections.endpoint() */
static void endpoint(duckdb_result *res, struct tv_engine *e, idx_t addr, idx_t port, idx_t row,
		     char *out)
{
	char *a = e->value_varchar(res, addr, row);

	if (e->value_int64(res, B_VER, row) == 6)
		snprintf(out, CELL, "[%s]:%lld", a ? a : "", (long long)e->value_int64(res, port, row));
	else
		snprintf(out, CELL, "%s:%lld", a ? a : "", (long long)e->value_int64(res, port, row));
	e->free(a);
}

static void cells(duckdb_result *res, struct tv_engine *e, idx_t row, char c[COLUMNS][3 * CELL])
{
	char a[CELL], b[CELL], x[CELL], y[CELL];
	int a2b = e->value_int64(res, B_DIR, row) == 0;

	if (a2b)
		snprintf(c[0], CELL, "%lld", (long long)e->value_int64(res, B_CONN, row));
	else
		c[0][0] = 0;
	endpoint(res, e, B_A, B_APORT, row, a);
	endpoint(res, e, B_B, B_BPORT, row, b);
	snprintf(c[1], 3 * CELL, "%s \u2192 %s", a2b ? a : b, a2b ? b : a);
	integer(res, e, B_PKTS, row, c[2]);
	integer(res, e, B_DPKTS, row, c[3]);
	si(res, e, B_DBYTES, row, "B", c[4]);
	si(res, e, B_UNIQUE, row, "B", c[5]);
	integer(res, e, B_RPKTS, row, c[6]);
	si(res, e, B_RBYTES, row, "B", c[7]);
	integer(res, e, B_OOO, row, c[8]);
	integer(res, e, B_DUPACKS, row, c[9]);
	integer(res, e, B_RTO, row, x);
	integer(res, e, B_FAST, row, y);
	snprintf(c[10], 3 * CELL, "%s/%s", x, y);
	if (e->value_is_null(res, B_RTT, row))
		strcpy(x, "-");
	else
		snprintf(x, CELL, "%.1f", e->value_double(res, B_RTT, row));
	integer(res, e, B_RTTN, row, y);
	snprintf(c[11], 3 * CELL, "%s (%s)", x, y);
	si(res, e, B_TPUT, row, "bit/s", c[12]);
	si(res, e, B_GPUT, row, "bit/s", c[13]);
}

/* One line of cells, each column padded to its width, no spaces at the end */
static void print_line(FILE *out, char *const *c, const int32_t *w)
{
	char line[COLUMNS * (3 * CELL + 64)];
	int i, at = 0;

	for (i = 0; i < COLUMNS; i++) {
		int pad = w[i] - chars(c[i]);

		at += snprintf(line + at, sizeof(line) - (size_t)at, "%s%*s%s%*s", i ? "  " : "",
			       heading[i].left ? 0 : pad, "", c[i], heading[i].left ? pad : 0, "");
	}
	while (at > 0 && line[at - 1] == ' ')
		at--;
	fprintf(out, "%.*s\n", at, line);
}

/* Before a batch's lines: the heading for the first, a blank line for the others */
static void begin_batch(FILE *out, struct tv_table *t, int batch, const int32_t *w)
{
	if (!batch)
		print_heading(out, t->path, t->count, w);
	else
		fputc('\n', out);
}

static const char *const range[] = {"capture_id", "first_conn", "last_conn"};

/* @sql's rows for connections @first..@last in @res (destroy it after); 0, or -1 */
static int rows_of(struct tv_table *t, const char *sql, int64_t first, int64_t last,
		   duckdb_result *res)
{
	int64_t values[] = {t->capture_id, first, last};
	char *text = tv_sql_ints(sql, range, values, 3);
	int rc = text ? tv_query(t->e, t->con, text, res) : -1;

	if (!text)
		snprintf(t->e->error, sizeof(t->e->error), "out of memory");
	free(text);
	return rc;
}

/*
 * Connections @first..@last laid out here from the brief rows, each column
 * at least @w wide (widened): each row's cells made once, kept one after
 * another as text (DuckDB hands its values over one call each, which costs
 * more than laying the line out).
 */
static int laid_out_here(struct tv_table *t, int64_t first, int64_t last, int32_t *w,
			 int *batches, FILE *out)
{
	struct tv_engine *e = t->e;
	char c[COLUMNS][3 * CELL], *text = NULL, *row[COLUMNS];
	size_t used = 0, size = 0;
	duckdb_result res;
	idx_t r, n;
	int i, rc = -1;

	if (rows_of(t, t->brief, first, last, &res))
		return -1;
	n = e->row_count(&res);
	for (r = 0; r < n; r++) {
		cells(&res, e, r, c);
		for (i = 0; i < COLUMNS; i++) {
			size_t len = strlen(c[i]) + 1;

			if (used + len > size) {
				char *grown = realloc(text, size = 2 * size + (1 << 16));

				if (!grown)
					goto out;
				text = grown;
			}
			memcpy(text + used, c[i], len);
			used += len;
			if (chars(c[i]) > w[i])
				w[i] = chars(c[i]);
		}
	}
	if (n)
		begin_batch(out, t, (*batches)++, w);
	for (r = 0, used = 0; r < n; r++) {
		for (i = 0; i < COLUMNS; i++) {
			row[i] = text + used;
			used += strlen(row[i]) + 1;
		}
		print_line(out, row, w);
		if (r % 2 && r + 1 < n)
			fputc('\n', out);
	}
	rc = 0;
out:
	free(text);
	e->destroy_result(&res);
	return rc;
}

/* The same laid out by DuckDB (analyzers/sql/connection_lines.sql) */
static int laid_out_by_duckdb(struct tv_table *t, const char *sql, int64_t first,
			      int64_t last, int32_t *w, int *batches, FILE *out)
{
	struct tv_engine *e = t->e;
	duckdb_result res;
	struct tv_stmt st;
	idx_t r, n;
	int i;

	if (tv_prepare(e, t->con, sql, &st))
		return -1;
	tv_bind_int(&st, "capture_id", t->capture_id);
	tv_bind_int(&st, "first_conn", first);
	tv_bind_int(&st, "last_conn", last);
	tv_bind_int_list(&st, "widths", w, COLUMNS);
	if (tv_run(&st, &res))
		return -1;
	n = e->row_count(&res);
	for (i = 0; n && i < COLUMNS; i++)
		w[i] = (int32_t)e->value_int64(&res, (idx_t)i + 1, 0);
	if (n)
		begin_batch(out, t, (*batches)++, w);
	for (r = 0; r < n; r++) {
		char *line = e->value_varchar(&res, 0, r);

		fprintf(out, "%s\n%s", line ? line : "", r % 2 && r + 1 < n ? "\n" : "");
		e->free(line);
	}
	e->destroy_result(&res);
	return 0;
}

int tv_table_plan(struct tv_table *t)
{
	t->brief = tv_read_file(t->root, "analyzers/sql/connection_brief.sql", NULL);
	return t->brief ? 0 : -1;
}

/* The SQL of the lines DuckDB lays out, its macros made */
static char *lines_sql(struct tv_table *t)
{
	char *macros = tv_read_file(t->root, "analyzers/sql/text_macros.sql", NULL);
	int rc = macros ? tv_exec(t->e, t->con, macros) : -1;

	free(macros);
	return rc ? NULL : tv_read_file(t->root, "analyzers/sql/connection_lines.sql", NULL);
}

int tv_table_print(struct tv_table *t, FILE *out)
{
	int here = t->count <= LAID_OUT_HERE;
	char *sql = here ? NULL : lines_sql(t);
	/* the scanner numbers the connections 1, 2, ... as it meets them (flows.c) */
	int64_t top = t->count, first;
	int32_t w[COLUMNS];
	int i, batches = 0, rc = 0;

	/*
	 * DuckDB's optimizer takes longer over a few thousand rows than their
	 * join does (a query without it gives the same rows)
	 */
	if ((!here && !sql) || (here && tv_exec(t->e, t->con, "SET enable_optimizer = false"))) {
		free(sql);
		return -1;
	}
	for (i = 0; i < COLUMNS; i++)
		w[i] = heading[i].width;
	/* a batch at a time, as analyzers/connections.py reads them: memory stays flat */
	for (first = 1; first <= top && !rc; first += BATCH) {
		int64_t last = first + BATCH - 1;

		if (here ? laid_out_here(t, first, last, w, &batches, out) :
		    laid_out_by_duckdb(t, sql, first, last, w, &batches, out))
			rc = batches ? -2 : -1;
	}
	free(sql);
	return rc;
}
