// SPDX-License-Identifier: GPL-2.0-only
/*
 * What a native front end for `tcpvar analyze` would pay before its first
 * packet is stored, with the DuckDB that tcpvar's Python already has: the
 * engine of the duckdb wheel (_duckdb*.so), which exports DuckDB's C API,
 * loaded without starting Python (libpython is loaded only for the symbols
 * the module refers to), one instance, and the statements given, timed
 * one by one (bench/RESULTS.md, "What a native front end would pay").
 *
 *   cc -O2 -o /tmp/native_floor bench/native_floor.c -ldl
 *   /tmp/native_floor LIBPYTHON ENGINE [SQL...]
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* duckdb.h's duckdb_result: six words, read only through the API */
struct duckdb_result {
	uint64_t words[6];
};

typedef void *duckdb_database;
typedef void *duckdb_connection;

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	int (*open_db)(const char *, duckdb_database *);
	int (*connect)(duckdb_database, duckdb_connection *);
	int (*query)(duckdb_connection, const char *, struct duckdb_result *);
	void (*destroy)(struct duckdb_result *);
	const char *(*error)(struct duckdb_result *);
	double t0, t_python, t_engine, t_open, t_end;
	struct duckdb_result res;
	duckdb_connection con;
	duckdb_database db;
	void *engine;
	int i;

	if (argc < 3) {
		fprintf(stderr, "usage: %s LIBPYTHON ENGINE [SQL...]\n", argv[0]);
		return 2;
	}
	t0 = now_ms();
	if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	t_python = now_ms();
	engine = dlopen(argv[2], RTLD_LAZY | RTLD_LOCAL);
	if (!engine) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	t_engine = now_ms();
	open_db = dlsym(engine, "duckdb_open");
	connect = dlsym(engine, "duckdb_connect");
	query = dlsym(engine, "duckdb_query");
	destroy = dlsym(engine, "duckdb_destroy_result");
	error = dlsym(engine, "duckdb_result_error");
	if (!open_db || !connect || !query || !destroy || !error) {
		fprintf(stderr, "%s: no DuckDB C API\n", argv[2]);
		return 1;
	}
	if (open_db(NULL, &db) || connect(db, &con)) {
		fprintf(stderr, "cannot open an in-memory instance\n");
		return 1;
	}
	t_open = now_ms();
	for (i = 3; i < argc; i++) {
		double t = now_ms();

		if (query(con, argv[i], &res))
			fprintf(stderr, "%s: %s\n", argv[i], error(&res));
		destroy(&res);
		printf("%8.2f ms  %s\n", now_ms() - t, argv[i]);
	}
	t_end = now_ms();
	printf("libpython %.1f ms, engine %.1f ms, instance %.1f ms, statements %.1f ms, "
	       "total %.1f ms\n", t_python - t0, t_engine - t_python, t_open - t_engine,
	       t_end - t_open, t_end - t0);
	fflush(stdout);
	_exit(0);	/* as tcpvar's process ends: the kernel frees the instance */
}
