// SPDX-License-Identifier: GPL-2.0-only
/*
 * store.c - a new store from the template (store.h). Each step does what
 * store/db.py, store/segments.py and store/checked.py do for a store that
 * does not exist yet; tests/test_native_analyze.py holds the two to the
 * same files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blake2b.h"
#include "store.h"

#define PAGE 4096		/* the unit of the template's sparse copy */
#define HEADERS (3 * 4096)	/* DuckDB's file header and its two database headers */
#define SLOTS 4096		/* store/checked.py's record slots */

/* store/segments.py's COLUMNS, in order */
static const char *const packet_columns =
	"frame, ts_ns, conn, dir, seq, ack, flags, win, len, wire_len, ev, tsval, tsecr, "
	"rtt_us, inflight, mss, wscale, ngwa_window, sack_l, sack_r";

void tv_hash_hex(const void *data, size_t len, size_t size, char *hex)
{
	struct tv_blake2b h;

	tv_blake2b_init(&h, size);
	tv_blake2b_update(&h, data, len);
	tv_blake2b_hex(&h, hex);
}

static int exists(const char *path)
{
	struct stat st;

	return !lstat(path, &st) || errno != ENOENT;
}

static int regular(const char *path)
{
	struct stat st;

	return !lstat(path, &st) && S_ISREG(st.st_mode);
}

#define FITS(n, call) ((size_t)(call) < (n))

/* resources.cache_dir(): $TCPVAR_CACHE, else the XDG cache's tcpvar */
static int cache_dir(char *out, size_t n)
{
	const char *base = getenv("TCPVAR_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");

	if (base && *base)
		return FITS(n, snprintf(out, n, "%s", base)) ? 0 : -1;
	if (xdg && *xdg)
		return FITS(n, snprintf(out, n, "%s/tcpvar", xdg)) ? 0 : -1;
	if (!home || !*home)
		return -1;
	return FITS(n, snprintf(out, n, "%s/.cache/tcpvar", home)) ? 0 : -1;
}

/* store/db.py's made_of(): DuckDB's version and a digest of the SQL that makes a store */
static int made_of(struct tv_store *s, const char *version)
{
	static const char *const files[] = {"store/schema.sql", "store/views.sql",
					    "store/catalog.sql"};
	struct tv_blake2b h;
	char hex[17];
	size_t i, len;

	tv_blake2b_init(&h, 8);
	tv_blake2b_update(&h, TV_SCHEMA_VERSION "\n", strlen(TV_SCHEMA_VERSION) + 1);
	for (i = 0; i < 3; i++) {
		char *text = tv_read_file(s->root, files[i], &len);

		if (!text)
			return -1;
		tv_blake2b_update(&h, text, len);
		if (i < 2)
			tv_blake2b_update(&h, "\n", 1);
		free(text);
	}
	tv_blake2b_hex(&h, hex);
	return FITS(sizeof(s->made_of), snprintf(s->made_of, sizeof(s->made_of), "%s-%s",
						 version, hex)) ? 0 : -1;
}

static int template_path(struct tv_store *s, const char *suffix, char *out, size_t n)
{
	return FITS(n, snprintf(out, n, "%s/stores/empty-%s%s", s->cache, s->made_of,
				suffix)) ? 0 : -1;
}

int tv_store_plan(struct tv_store *s, const char *root, const char *version, const char *db)
{
	char dir[PATH_MAX], real[PATH_MAX], cwd[PATH_MAX], path[PATH_MAX + 32];
	const char *slash = strrchr(db, '/'), *base = slash ? slash + 1 : db;
	size_t n = strlen(db);

	memset(s, 0, sizeof(*s));
	s->root = root;
	/* a name Python's Path reads otherwise, or one read_parquet would expand */
	if (!n || n >= sizeof(s->given) || !*base || !strcmp(base, ".") ||
	    !strcmp(base, "..") || strpbrk(db, "*?[{"))
		return -1;
	strcpy(s->given, db);
	if (!slash)
		strcpy(dir, ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == db ? 1 : (int)(slash - db), db);
	if (!realpath(dir, real) || strpbrk(real, "*?[{"))
		return -1;
	if (db[0] == '/')
		strcpy(s->absolute, db);
	else if (!getcwd(cwd, sizeof(cwd)) ||
		 !FITS(sizeof(s->absolute), snprintf(s->absolute, sizeof(s->absolute),
						     "%s/%s", cwd, db)))
		return -1;
	if (!FITS(sizeof(s->resolved), snprintf(s->resolved, sizeof(s->resolved), "%s/%s",
						strcmp(real, "/") ? real : "", base)))
		return -1;
	snprintf(s->packets, sizeof(s->packets), "%s.packets", s->resolved);
	snprintf(path, sizeof(path), "%s.wal", db);
	if (exists(db) || exists(path) || exists(s->packets))
		return -1;
	if (cache_dir(s->cache, sizeof(s->cache)) || made_of(s, version))
		return -1;
	if (template_path(s, ".duckdb", path, sizeof(path)) || !regular(path))
		return -1;
	if (template_path(s, ".schema.parquet", path, sizeof(path)) || !regular(path))
		return -1;
	return 0;
}

/* A whole file's bytes, malloc'd */
static char *slurp(const char *path, size_t *len)
{
	return tv_read_file("/", path, len);
}

int tv_store_copy(struct tv_store *s)
{
	char tpl[PATH_MAX];
	size_t len, at;
	char *data;
	int fd;

	if (template_path(s, ".duckdb", tpl, sizeof(tpl)))
		return -1;
	data = slurp(tpl, &len);
	if (!data)
		return -1;
	fd = open(s->given, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0) {
		free(data);
		return -1;
	}
	s->made_file = 1;
	/* sparse, as DuckDB writes its own: most of the file is empty blocks */
	for (at = 0; at < len; at += PAGE) {
		size_t n = len - at < PAGE ? len - at : PAGE, k = 0;

		while (k < n && !data[at + k])
			k++;
		if (k < n && pwrite(fd, data + at, n, (off_t)at) != (ssize_t)n)
			break;
	}
	free(data);
	if (close(fd) | (at < len) || truncate(s->given, (off_t)len)) {
		tv_store_remove(s);
		return -1;
	}
	return 0;
}

int tv_write_beside(const char *path, const void *data, size_t len)
{
	const char *slash = strrchr(path, '/');
	char tmp[PATH_MAX + 96];
	unsigned char r[6];
	int fd = -1, tries;

	for (tries = 0; tries < 100 && fd < 0; tries++) {
		if (getrandom(r, sizeof(r), 0) != sizeof(r))
			return -1;
		snprintf(tmp, sizeof(tmp), "%.*s.%.64s.%02x%02x%02x%02x%02x%02x.tmp",
			 slash ? (int)(slash - path) + 1 : 0, path, slash ? slash + 1 : path,
			 r[0], r[1], r[2], r[3], r[4], r[5]);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd < 0 && errno != EEXIST)
			return -1;
	}
	if (fd < 0)
		return -1;
	if (write(fd, data, len) != (ssize_t)len) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* @in as the text of a SQL string literal: ' doubled */
static int quoted(const char *in, char *out, size_t n)
{
	size_t j = 0;

	for (; *in; in++) {
		if (j + 3 >= n)
			return -1;
		if (*in == '\'')
			out[j++] = '\'';
		out[j++] = *in;
	}
	out[j] = 0;
	return 0;
}

/* segments.prepare(): the folder, and the template's schema segment in it */
static int prepare_packets(struct tv_store *s)
{
	char path[PATH_MAX + 64], tpl[PATH_MAX];
	size_t len;
	char *data;
	int rc;

	if (template_path(s, ".schema.parquet", tpl, sizeof(tpl)) || mkdir(s->packets, 0777))
		return -1;
	s->made_folder = 1;
	if (tv_store_capture_folder(s, 0, path, sizeof(path)))
		return -1;
	strcat(path, "/schema.parquet");
	data = slurp(tpl, &len);
	if (!data)
		return -1;
	rc = tv_write_beside(path, data, len);
	free(data);
	return rc;
}

int tv_store_capture_folder(struct tv_store *s, long capture_id, char *out, size_t n)
{
	struct stat st;

	if (!FITS(n, snprintf(out, n, "%s/capture_id=%ld", s->packets, capture_id)))
		return -1;
	if (mkdir(out, 0777) && errno != EEXIST)
		return -1;
	/* segments.own_folder(): never a link, whoever made it meanwhile */
	return !lstat(out, &st) && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* @con's default database the store, the scanner's tables found where `side` makes them */
static int on_store(struct tv_store *s, duckdb_connection con)
{
	return tv_exec(s->e, con, "SET search_path = 'tcpvar_store.main,memory.main'");
}

duckdb_connection tv_store_connect(struct tv_store *s)
{
	duckdb_connection con = tv_engine_connect(s->e);

	if (con && on_store(s, con))
		s->e->disconnect(&con);
	return con;
}

int tv_store_attach(struct tv_store *s, struct tv_engine *e)
{
	char lit[2 * PATH_MAX + 32], sql[2 * PATH_MAX + 512];

	s->e = e;
	s->con = tv_engine_connect(e);
	s->side = s->con ? tv_engine_connect(e) : NULL;
	if (!s->side || quoted(s->absolute, lit, sizeof(lit)))
		return -1;
	/* under a name of its own: nothing in the store depends on it */
	snprintf(sql, sizeof(sql), "ATTACH '%s' AS tcpvar_store", lit);
	if (tv_exec(e, s->con, sql))
		return -1;
	s->attached = 1;
	if (prepare_packets(s) || quoted(s->packets, lit, sizeof(lit)) || on_store(s, s->con))
		return -1;
	snprintf(sql, sizeof(sql), "CREATE OR REPLACE VIEW packets AS SELECT capture_id, %s "
		 "FROM read_parquet('%s/*/*.parquet', hive_partitioning = true, "
		 "hive_types = {'capture_id': INTEGER})", packet_columns, lit);
	return tv_exec(e, s->con, sql);
}

/* checked.py's _state(): what tells the closed store's file from any later one */
static int state(const char *path, char *out, size_t n)
{
	char head[HEADERS], wal[PATH_MAX + 8], hex[33];
	struct stat st;
	ssize_t got;
	int fd;

	snprintf(wal, sizeof(wal), "%s.wal", path);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	got = fstat(fd, &st) ? -1 : read(fd, head, sizeof(head));
	close(fd);
	if (got < 0 || !S_ISREG(st.st_mode) || exists(wal) || st.st_ctim.tv_nsec == 0)
		return -1;
	tv_hash_hex(head, (size_t)got, 16, hex);
	return FITS(n, snprintf(out, n, "%llu:%llu:%lld:%lld:%lld:%s",
				(unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
				(long long)st.st_size,
				(long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
				(long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec,
				hex)) ? 0 : -1;
}

/* checked.remember(): the store as this tcpvar leaves it, in its slot of the cache */
static void remember(struct tv_store *s)
{
	char record[2 * PATH_MAX + 256], st[256], slot[PATH_MAX + 64], hex[17];
	unsigned int k;

	if (state(s->resolved, st, sizeof(st)))
		return;
	tv_hash_hex(s->resolved, strlen(s->resolved), 8, hex);
	k = (unsigned int)(strtoull(hex + 13, NULL, 16) % SLOTS);	/* the last 12 bits */
	snprintf(slot, sizeof(slot), "%s/stores/checked", s->cache);
	if (mkdir(slot, 0777) && errno != EEXIST)
		return;
	snprintf(slot + strlen(slot), 16, "/%03x", k);
	if (FITS(sizeof(record), snprintf(record, sizeof(record), "%s\n%s\n%s\n", s->resolved,
					  s->made_of, st)))
		tv_write_beside(slot, record, strlen(record));
}

int tv_store_close(struct tv_store *s)
{
	int rc = -1;

	if (!s->attached)
		return -1;
	if (!tv_exec(s->e, s->con, "USE memory; DETACH tcpvar_store")) {
		s->attached = 0;
		rc = 0;
	}
	s->e->disconnect(&s->side);
	s->e->disconnect(&s->con);
	if (!rc)
		remember(s);
	return rc;
}

/* Every file under @dir and @dir itself, one level of folders below it */
static void remove_tree(const char *dir, int depth)
{
	char path[PATH_MAX + 300];
	struct dirent *d;
	DIR *h = opendir(dir);

	while (h && (d = readdir(h))) {
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (d->d_type == DT_DIR && depth)
			remove_tree(path, depth - 1);
		else
			unlink(path);
	}
	if (h)
		closedir(h);
	rmdir(dir);
}

void tv_store_remove(struct tv_store *s)
{
	char wal[PATH_MAX + 8];

	if (s->attached) {
		tv_exec(s->e, s->con, "USE memory; DETACH tcpvar_store");
		s->attached = 0;
		s->e->disconnect(&s->side);
		s->e->disconnect(&s->con);
	}
	if (s->made_folder)
		remove_tree(s->packets, 1);
	if (s->made_file) {
		snprintf(wal, sizeof(wal), "%s.wal", s->given);
		unlink(s->given);
		unlink(wal);
	}
	s->made_folder = s->made_file = 0;
}
