// SPDX-License-Identifier: GPL-2.0-only
/*
 * engine.c - DuckDB's C API from the duckdb wheel's engine module (engine.h).
 */
#include <ctype.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arrow_stream.h"
#include "engine.h"

#define SYM(field, name) { offsetof(struct tv_engine, field), name }

static const struct {
	size_t off;
	const char *name;
} symbols[] = {
	SYM(create_config, "duckdb_create_config"), SYM(set_config, "duckdb_set_config"),
	SYM(destroy_config, "duckdb_destroy_config"), SYM(open_ext, "duckdb_open_ext"),
	SYM(connect, "duckdb_connect"), SYM(disconnect, "duckdb_disconnect"),
	SYM(close, "duckdb_close"), SYM(query, "duckdb_query"),
	SYM(destroy_result, "duckdb_destroy_result"), SYM(result_error, "duckdb_result_error"),
	SYM(row_count, "duckdb_row_count"), SYM(value_int64, "duckdb_value_int64"),
	SYM(value_double, "duckdb_value_double"),
	SYM(value_varchar, "duckdb_value_varchar"), SYM(value_is_null, "duckdb_value_is_null"),
	SYM(free, "duckdb_free"), SYM(prepare, "duckdb_prepare"),
	SYM(prepare_error, "duckdb_prepare_error"), SYM(destroy_prepare, "duckdb_destroy_prepare"),
	SYM(bind_parameter_index, "duckdb_bind_parameter_index"),
	SYM(bind_int64, "duckdb_bind_int64"), SYM(bind_double, "duckdb_bind_double"),
	SYM(bind_boolean, "duckdb_bind_boolean"), SYM(bind_varchar, "duckdb_bind_varchar"),
	SYM(bind_null, "duckdb_bind_null"), SYM(bind_value, "duckdb_bind_value"),
	SYM(execute_prepared, "duckdb_execute_prepared"),
	SYM(create_logical_type, "duckdb_create_logical_type"),
	SYM(destroy_logical_type, "duckdb_destroy_logical_type"),
	SYM(create_int32, "duckdb_create_int32"),
	SYM(create_list_value, "duckdb_create_list_value"),
	SYM(destroy_value, "duckdb_destroy_value"), SYM(arrow_scan, "duckdb_arrow_scan"),
	SYM(library_version, "duckdb_library_version"),
	SYM(schema_from_arrow, "duckdb_schema_from_arrow"),
	SYM(destroy_arrow_converted_schema, "duckdb_destroy_arrow_converted_schema"),
	SYM(data_chunk_from_arrow, "duckdb_data_chunk_from_arrow"),
	SYM(destroy_data_chunk, "duckdb_destroy_data_chunk"),
	SYM(error_data_has_error, "duckdb_error_data_has_error"),
	SYM(error_data_message, "duckdb_error_data_message"),
	SYM(destroy_error_data, "duckdb_destroy_error_data"),
	SYM(appender_create_query, "duckdb_appender_create_query"),
	SYM(append_data_chunk, "duckdb_append_data_chunk"),
	SYM(appender_error, "duckdb_appender_error"), SYM(appender_close, "duckdb_appender_close"),
	SYM(appender_destroy, "duckdb_appender_destroy"),
};

/* DuckDB's words on one line, as the Python front end shows them */
static void set_error(struct tv_engine *e, const char *what, const char *why)
{
	size_t i, j = 0;
	int space = 0;

	j = (size_t)snprintf(e->error, sizeof(e->error), why && *why ? "%s: " : "%s", what);
	for (i = 0; why && why[i] && j + 1 < sizeof(e->error); i++) {
		if (why[i] == ' ' || why[i] == '\n' || why[i] == '\t') {
			space = 1;
			continue;
		}
		if (space && j + 2 < sizeof(e->error))
			e->error[j++] = ' ';
		space = 0;
		e->error[j++] = why[i];
	}
	e->error[j < sizeof(e->error) ? j : sizeof(e->error) - 1] = 0;
}

int tv_engine_open(struct tv_engine *e, const char *libpython, const char *path)
{
	/*
	 * an instance need not know of extensions: a store never loads one; and
	 * one thread, the caller's, while the scanner has the other core (a
	 * capture of many connections gets them all back: load.c)
	 */
	static const char *const settings[][2] = {
		{"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"},
		{"threads", "1"},
	};
	duckdb_config config;
	char *why = NULL;
	void *lib;
	size_t i;

	memset(e, 0, sizeof(*e));
	/* the module's Python symbols, resolved against a library never started */
	if (!dlopen(libpython, RTLD_NOW | RTLD_GLOBAL)) {
		set_error(e, "cannot load Python's library", dlerror());
		return -1;
	}
	lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!lib) {
		set_error(e, "cannot load DuckDB", dlerror());
		return -1;
	}
	for (i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
		void *fn = dlsym(lib, symbols[i].name);

		if (!fn) {
			set_error(e, "DuckDB lacks", symbols[i].name);
			return -1;
		}
		memcpy((char *)e + symbols[i].off, &fn, sizeof(fn));
	}
	if (e->create_config(&config)) {
		set_error(e, "DuckDB", "cannot make a configuration");
		return -1;
	}
	for (i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		e->set_config(config, settings[i][0], settings[i][1]);
	if (e->open_ext(NULL, &e->db, config, &why)) {
		set_error(e, "cannot start DuckDB", why);
		e->free(why);
		e->destroy_config(&config);
		return -1;
	}
	e->destroy_config(&config);
	return 0;
}

duckdb_connection tv_engine_connect(struct tv_engine *e)
{
	duckdb_connection con;

	if (e->connect(e->db, &con)) {
		set_error(e, "DuckDB", "cannot connect");
		return NULL;
	}
	return con;
}

int tv_query(struct tv_engine *e, duckdb_connection con, const char *sql, duckdb_result *res)
{
	if (!e->query(con, sql, res))
		return 0;
	set_error(e, "query failed", e->result_error(res));
	e->destroy_result(res);
	return -1;
}

int tv_exec(struct tv_engine *e, duckdb_connection con, const char *sql)
{
	duckdb_result res;

	if (tv_query(e, con, sql, &res))
		return -1;
	e->destroy_result(&res);
	return 0;
}

int tv_exec_int(struct tv_engine *e, duckdb_connection con, const char *sql, int64_t *out)
{
	duckdb_result res;
	int rc = 0;

	if (e->query(con, sql, &res)) {
		set_error(e, "query failed", e->result_error(&res));
		rc = -1;
	} else {
		*out = e->row_count(&res) && !e->value_is_null(&res, 0, 0) ?
		       e->value_int64(&res, 0, 0) : 0;
	}
	e->destroy_result(&res);
	return rc;
}

int tv_prepare(struct tv_engine *e, duckdb_connection con, const char *sql,
	       struct tv_stmt *s)
{
	s->e = e;
	s->failed = 0;
	if (e->prepare(con, sql, &s->p)) {
		set_error(e, "query failed", e->prepare_error(s->p));
		e->destroy_prepare(&s->p);
		return -1;
	}
	return 0;
}

/* The index of parameter @name, or 0 (none) marking the statement failed */
static idx_t param(struct tv_stmt *s, const char *name)
{
	idx_t i = 0;

	if (*name >= '1' && *name <= '9')	/* $1: by its number */
		i = strtoull(name, NULL, 10);
	else if (s->e->bind_parameter_index(s->p, &i, name))
		i = 0;
	if (!i) {
		set_error(s->e, "no parameter", name);
		s->failed = 1;
		return 0;
	}
	return i;
}

#define BIND(call) do {							\
		idx_t i = param(s, name);				\
		if (i && (call))					\
			s->failed = 1;					\
	} while (0)

void tv_bind_int(struct tv_stmt *s, const char *name, int64_t v)
{
	BIND(s->e->bind_int64(s->p, i, v));
}

void tv_bind_double(struct tv_stmt *s, const char *name, double v)
{
	BIND(s->e->bind_double(s->p, i, v));
}

void tv_bind_bool(struct tv_stmt *s, const char *name, int v)
{
	BIND(s->e->bind_boolean(s->p, i, v != 0));
}

void tv_bind_text(struct tv_stmt *s, const char *name, const char *v)
{
	BIND(v ? s->e->bind_varchar(s->p, i, v) : s->e->bind_null(s->p, i));
}

void tv_bind_null(struct tv_stmt *s, const char *name)
{
	BIND(s->e->bind_null(s->p, i));
}

void tv_bind_int_list(struct tv_stmt *s, const char *name, const int32_t *v, int n)
{
	struct tv_engine *e = s->e;
	duckdb_logical_type type = e->create_logical_type(DUCKDB_TYPE_INTEGER);
	duckdb_value items[32], list;
	int k;

	if (n > 32) {
		s->failed = 1;
		return;
	}
	for (k = 0; k < n; k++)
		items[k] = e->create_int32(v[k]);
	list = e->create_list_value(type, items, (idx_t)n);
	BIND(!list || e->bind_value(s->p, i, list));
	e->destroy_value(&list);
	for (k = 0; k < n; k++)
		e->destroy_value(&items[k]);
	e->destroy_logical_type(&type);
}

int tv_execute(struct tv_stmt *s, duckdb_result *out)
{
	struct tv_engine *e = s->e;
	duckdb_result res;
	int rc = -1;

	if (!s->failed) {
		if (e->execute_prepared(s->p, &res))
			set_error(e, "query failed", e->result_error(&res));
		else
			rc = 0;
		if (out && !rc)
			*out = res;
		else
			e->destroy_result(&res);
	}
	return rc;
}

void tv_unprepare(struct tv_stmt *s)
{
	if (s->e)
		s->e->destroy_prepare(&s->p);
	s->e = NULL;
}

int tv_run(struct tv_stmt *s, duckdb_result *out)
{
	int rc = tv_execute(s, out);

	tv_unprepare(s);
	return rc;
}

int tv_register(struct tv_engine *e, duckdb_connection con, const char *name, void *stream)
{
	if (e->arrow_scan(con, name, stream)) {
		set_error(e, "cannot read the scanner's table", name);
		return -1;
	}
	return 0;
}

char *tv_sql_ints(const char *sql, const char *const *names, const int64_t *values, int n)
{
	size_t size = strlen(sql) + 1, used = 0;
	const char *p;
	char *out;

	for (p = sql; *p; p++)
		size += *p == '$' ? 20 : 0;	/* room for any number in place of any name */
	out = malloc(size);
	for (p = sql; out && *p;) {
		int i = n;

		if (*p == '$')
			for (i = 0; i < n; i++) {
				size_t k = strlen(names[i]);

				if (!strncmp(p + 1, names[i], k) &&
				    !isalnum((unsigned char)p[1 + k]) && p[1 + k] != '_')
					break;
			}
		if (i < n) {
			used += (size_t)snprintf(out + used, size - used, "%lld", (long long)values[i]);
			p += 1 + strlen(names[i]);
		} else {
			out[used++] = *p++;
		}
	}
	if (out)
		out[used] = 0;
	return out;
}

/* DuckDB's words on a failure of its error data, which is destroyed */
static int failed(struct tv_engine *e, duckdb_error_data err, const char *what)
{
	int rc = 0;

	if (err && e->error_data_has_error(err)) {
		set_error(e, what, e->error_data_message(err));
		rc = -1;
	}
	if (err)
		e->destroy_error_data(&err);
	return rc;
}

/* DuckDB's type of a scanner's column (arrow_stream.h) */
static int duckdb_type(enum tv_arrow_type t)
{
	switch (t) {
	case TV_A_U8: return DUCKDB_TYPE_UTINYINT;
	case TV_A_U16: return DUCKDB_TYPE_USMALLINT;
	case TV_A_U32: return DUCKDB_TYPE_UINTEGER;
	case TV_A_I64: return DUCKDB_TYPE_BIGINT;
	case TV_A_F64: return DUCKDB_TYPE_DOUBLE;
	case TV_A_UTF8: return DUCKDB_TYPE_VARCHAR;
	default: return 0;	/* lists: not a table of the capture's */
	}
}

/* The appender of @query over @t's columns as table @name; NULL with e->error. */
static duckdb_appender query_appender(struct tv_engine *e, duckdb_connection con,
				      const char *query, const char *name,
				      const struct tv_arrow_table *t)
{
	duckdb_logical_type types[TV_MAX_COLUMNS];
	const char *names[TV_MAX_COLUMNS];
	duckdb_appender app = NULL;
	size_t i, n = t->ncols;
	int rc = n > TV_MAX_COLUMNS ? -1 : 0;

	for (i = 0; !rc && i < n; i++) {
		int type = duckdb_type(t->cols[i].type);

		names[i] = t->cols[i].name;
		types[i] = type ? e->create_logical_type(type) : NULL;
		if (!types[i]) {
			n = i;
			rc = -1;
		}
	}
	if (!rc && e->appender_create_query(con, query, n, types, name, names, &app)) {
		set_error(e, "cannot append to", app ? e->appender_error(app) : name);
		if (app)
			e->appender_destroy(&app);
		app = NULL;
	} else if (rc) {
		set_error(e, "cannot append", name);
	}
	for (i = 0; i < n; i++)
		e->destroy_logical_type(&types[i]);
	return app;
}

int tv_append(struct tv_engine *e, duckdb_connection con, const char *query,
	      const char *name, struct tv_arrow_table *t)
{
	duckdb_arrow_converted_schema types = NULL;
	duckdb_appender app = NULL;
	struct ArrowSchema schema;
	int64_t first;
	int rc;

	if (tv_arrow_schema(t, &schema)) {
		set_error(e, "out of memory", NULL);
		return -1;
	}
	rc = failed(e, e->schema_from_arrow(con, &schema, &types), "cannot read the scanner's table");
	schema.release(&schema);
	if (!rc) {
		app = query_appender(e, con, query, name, t);
		rc = app ? 0 : -1;
	}
	/* a data chunk holds at most a vector's rows */
	for (first = 0; !rc && first < t->rows; first += TV_VECTOR) {
		int64_t rows = t->rows - first < TV_VECTOR ? t->rows - first : TV_VECTOR;
		duckdb_data_chunk chunk = NULL;
		struct ArrowArray part;

		if (tv_arrow_rows(t, first, rows, &part)) {
			set_error(e, "out of memory", NULL);
			rc = -1;
			break;
		}
		/* the chunk takes the part over, and releases it */
		rc = failed(e, e->data_chunk_from_arrow(con, &part, types, &chunk),
			    "cannot read the scanner's table");
		if (part.release)
			part.release(&part);
		if (!rc && e->append_data_chunk(app, chunk)) {
			set_error(e, "cannot append to", e->appender_error(app));
			rc = -1;
		}
		if (chunk)
			e->destroy_data_chunk(&chunk);
	}
	if (app) {
		if (e->appender_close(app) && !rc) {
			set_error(e, "cannot append to", e->appender_error(app));
			rc = -1;
		}
		e->appender_destroy(&app);
	}
	if (types)
		e->destroy_arrow_converted_schema(&types);
	return rc;
}

char *tv_read_file(const char *root, const char *rel, size_t *len)
{
	char path[4096];
	struct stat st;
	char *text = NULL;
	ssize_t got = 0;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", root, rel) >= sizeof(path))
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size < (1 << 24))
		text = malloc((size_t)st.st_size + 1);
	while (text && got < st.st_size) {
		ssize_t n = read(fd, text + got, (size_t)(st.st_size - got));

		if (n <= 0) {
			free(text);
			text = NULL;
			break;
		}
		got += n;
	}
	close(fd);
	if (text) {
		text[got] = 0;
		if (len)
			*len = (size_t)got;
	}
	return text;
}
