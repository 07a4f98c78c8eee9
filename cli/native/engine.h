/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * engine.h - DuckDB for the native front end: the engine of the duckdb
 * wheel that tcpvar's Python uses (its _duckdb module exports DuckDB's C
 * API), loaded with dlopen, so that both front ends write stores with one
 * DuckDB. Only the functions the front end calls are declared, as DuckDB's
 * duckdb.h declares them.
 */
#ifndef TCPVAR_ENGINE_H
#define TCPVAR_ENGINE_H

#include <stdint.h>

typedef uint64_t idx_t;
typedef void *duckdb_database;
typedef void *duckdb_connection;
typedef void *duckdb_config;
typedef void *duckdb_prepared_statement;
typedef void *duckdb_value;
typedef void *duckdb_logical_type;
typedef void *duckdb_appender;
typedef void *duckdb_data_chunk;
typedef void *duckdb_arrow_converted_schema;
typedef void *duckdb_error_data;
struct ArrowSchema;
struct ArrowArray;

/* duckdb.h's duckdb_result: read only through the API */
typedef struct {
	idx_t words[4];
	char *error;
	void *internal;
} duckdb_result;

/* duckdb.h's DUCKDB_TYPE */
#define DUCKDB_TYPE_INTEGER 4
#define DUCKDB_TYPE_BIGINT 5
#define DUCKDB_TYPE_UTINYINT 6
#define DUCKDB_TYPE_USMALLINT 7
#define DUCKDB_TYPE_UINTEGER 8
#define DUCKDB_TYPE_DOUBLE 11
#define DUCKDB_TYPE_VARCHAR 17

struct tv_engine {
	int (*create_config)(duckdb_config *config);
	int (*set_config)(duckdb_config config, const char *name, const char *value);
	void (*destroy_config)(duckdb_config *config);
	int (*open_ext)(const char *path, duckdb_database *db, duckdb_config config,
			char **error);
	int (*connect)(duckdb_database db, duckdb_connection *con);
	void (*disconnect)(duckdb_connection *con);
	void (*close)(duckdb_database *db);
	int (*query)(duckdb_connection con, const char *sql, duckdb_result *res);
	void (*destroy_result)(duckdb_result *res);
	const char *(*result_error)(duckdb_result *res);
	idx_t (*row_count)(duckdb_result *res);
	int64_t (*value_int64)(duckdb_result *res, idx_t col, idx_t row);
	double (*value_double)(duckdb_result *res, idx_t col, idx_t row);
	char *(*value_varchar)(duckdb_result *res, idx_t col, idx_t row);
	int (*value_is_null)(duckdb_result *res, idx_t col, idx_t row);
	void (*free)(void *p);
	int (*prepare)(duckdb_connection con, const char *sql, duckdb_prepared_statement *st);
	const char *(*prepare_error)(duckdb_prepared_statement st);
	void (*destroy_prepare)(duckdb_prepared_statement *st);
	int (*bind_parameter_index)(duckdb_prepared_statement st, idx_t *i, const char *name);
	int (*bind_int64)(duckdb_prepared_statement st, idx_t i, int64_t v);
	int (*bind_double)(duckdb_prepared_statement st, idx_t i, double v);
	int (*bind_boolean)(duckdb_prepared_statement st, idx_t i, _Bool v);
	int (*bind_varchar)(duckdb_prepared_statement st, idx_t i, const char *v);
	int (*bind_null)(duckdb_prepared_statement st, idx_t i);
	int (*bind_value)(duckdb_prepared_statement st, idx_t i, duckdb_value v);
	int (*execute_prepared)(duckdb_prepared_statement st, duckdb_result *res);
	duckdb_logical_type (*create_logical_type)(int type);
	void (*destroy_logical_type)(duckdb_logical_type *type);
	duckdb_value (*create_int32)(int32_t v);
	duckdb_value (*create_list_value)(duckdb_logical_type type, duckdb_value *items,
					  idx_t n);
	void (*destroy_value)(duckdb_value *v);
	int (*arrow_scan)(duckdb_connection con, const char *name, void *stream);
	duckdb_error_data (*schema_from_arrow)(duckdb_connection con, struct ArrowSchema *schema,
					       duckdb_arrow_converted_schema *out);
	void (*destroy_arrow_converted_schema)(duckdb_arrow_converted_schema *types);
	duckdb_error_data (*data_chunk_from_arrow)(duckdb_connection con, struct ArrowArray *array,
						   duckdb_arrow_converted_schema types,
						   duckdb_data_chunk *out);
	void (*destroy_data_chunk)(duckdb_data_chunk *chunk);
	_Bool (*error_data_has_error)(duckdb_error_data err);
	const char *(*error_data_message)(duckdb_error_data err);
	void (*destroy_error_data)(duckdb_error_data *err);
	int (*appender_create_query)(duckdb_connection con, const char *query, idx_t ncols,
				     duckdb_logical_type *types, const char *name,
				     const char **names, duckdb_appender *out);
	int (*append_data_chunk)(duckdb_appender app, duckdb_data_chunk chunk);
	const char *(*appender_error)(duckdb_appender app);
	int (*appender_close)(duckdb_appender app);
	int (*appender_destroy)(duckdb_appender *app);
	const char *(*library_version)(void);

	duckdb_database db;
	char error[512];	/* the last failure, one line */
};

/*
 * Load the engine at @path, with the Python library at @libpython providing
 * the symbols the module refers to (no interpreter is started), and start
 * an in-memory instance that loads no extension of its own accord. 0, or -1
 * with the reason in e->error.
 */
int tv_engine_open(struct tv_engine *e, const char *libpython, const char *path);
/* A new connection to the instance; NULL with the reason in e->error. */
duckdb_connection tv_engine_connect(struct tv_engine *e);

/* Run @sql, its result in @res (destroy it after); 0, or -1 with DuckDB's words in e->error. */
int tv_query(struct tv_engine *e, duckdb_connection con, const char *sql, duckdb_result *res);
/* Run @sql (one or several statements); 0, or -1 with DuckDB's words in e->error. */
int tv_exec(struct tv_engine *e, duckdb_connection con, const char *sql);
/* The first column of @sql's first row as an integer in @out; 0, or -1. */
int tv_exec_int(struct tv_engine *e, duckdb_connection con, const char *sql, int64_t *out);

/*
 * @sql with each parameter $@names[i] written as the integer @values[i],
 * malloc'd; NULL out of memory. DuckDB plans a prepared statement again each
 * time it runs it: one planned this way is planned once. Only for tcpvar's
 * own SQL and numbers (text goes through tv_bind_text()).
 */
char *tv_sql_ints(const char *sql, const char *const *names, const int64_t *values, int n);

/* A prepared statement with named or numbered parameters bound by name. */
struct tv_stmt {
	struct tv_engine *e;
	duckdb_prepared_statement p;
	int failed;
};

int tv_prepare(struct tv_engine *e, duckdb_connection con, const char *sql,
	       struct tv_stmt *s);
/* Bind @name ("capture_id", or "1" for $1); a failure is kept for tv_run(). */
void tv_bind_int(struct tv_stmt *s, const char *name, int64_t v);
void tv_bind_double(struct tv_stmt *s, const char *name, double v);
void tv_bind_bool(struct tv_stmt *s, const char *name, int v);
void tv_bind_text(struct tv_stmt *s, const char *name, const char *v);
void tv_bind_null(struct tv_stmt *s, const char *name);
void tv_bind_int_list(struct tv_stmt *s, const char *name, const int32_t *v, int n);
/* Execute, the result in @res if given (destroy it after); 0, or -1. */
int tv_execute(struct tv_stmt *s, duckdb_result *res);
/* Free the statement (again: nothing). */
void tv_unprepare(struct tv_stmt *s);
/* tv_execute(), then tv_unprepare(). */
int tv_run(struct tv_stmt *s, duckdb_result *res);

/* Read @stream's table as view @name of @con's default database; 0, or -1. */
int tv_register(struct tv_engine *e, duckdb_connection con, const char *name, void *stream);

#define TV_VECTOR 2048		/* DuckDB's rows a vector */
#define TV_MAX_COLUMNS 128	/* a scanner's table has fewer */
struct tv_arrow_table;

/*
 * @query run over @t's rows, which it reads as table @name (DuckDB's query
 * appender, Arrow arrays as data chunks): 0, or -1 with e->error.
 */
int tv_append(struct tv_engine *e, duckdb_connection con, const char *query,
	      const char *name, struct tv_arrow_table *t);

/* The text of tcpvar's SQL file @rel under @root, malloc'd; NULL if unreadable. */
char *tv_read_file(const char *root, const char *rel, size_t *len);

#endif
