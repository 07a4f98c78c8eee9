/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * store.h - a new store for the native front end, as store/db.py makes
 * one: a copy of the template in tcpvar's cache, attached to the engine's
 * instance, its packets' folder beside it with the template's schema
 * segment, and its record in the cache (store/checked.py) once closed.
 */
#ifndef TCPVAR_STORE_H
#define TCPVAR_STORE_H

#include <limits.h>

#include "engine.h"

#define TV_SCHEMA_VERSION "2"	/* store/db.py's SCHEMA_VERSION */

struct tv_store {
	struct tv_engine *e;
	const char *root;		/* tcpvar's package: its SQL files */
	duckdb_connection con;		/* on the store */
	duckdb_connection side;		/* on the instance's memory: the scanner's tables */
	char given[PATH_MAX];		/* --db as given */
	char absolute[PATH_MAX];	/* made absolute, not resolved (what DuckDB attaches) */
	char resolved[PATH_MAX];	/* links and .. resolved */
	char packets[PATH_MAX + 16];	/* resolved + ".packets" */
	char cache[PATH_MAX];		/* tcpvar's cache */
	char made_of[96];		/* store/db.py's made_of() */
	int made_file, made_folder, attached;
};

/*
 * Whether a new store can be made at @db from the template of DuckDB
 * @version: it, its WAL and its packets' folder do not exist, the template does. 0 with s filled
 * but nothing made, or -1: the Python front end is left to do it.
 */
int tv_store_plan(struct tv_store *s, const char *root, const char *version,
		  const char *db);
/* Copy the template (before the engine is up); 0, or -1 with nothing left. */
int tv_store_copy(struct tv_store *s);
/* Attach it to @e's instance, its packets' view made; 0, or -1. */
int tv_store_attach(struct tv_store *s, struct tv_engine *e);
/* Another connection on the store (for another thread); NULL if none. */
duckdb_connection tv_store_connect(struct tv_store *s);
/* Detach it (its checkpoint), then record it in the cache; 0, or -1. */
int tv_store_close(struct tv_store *s);
/* Remove what tv_store_copy() and tv_store_attach() made (a failed command). */
void tv_store_remove(struct tv_store *s);

/* @path's capture folder for @capture_id under the packets' folder, made. */
int tv_store_capture_folder(struct tv_store *s, long capture_id, char *out, size_t n);

/* @len bytes as the new file @path: a temporary name beside it, renamed. */
int tv_write_beside(const char *path, const void *data, size_t len);
/* BLAKE2b of @data as hex, @size bytes (2 * size digits and a NUL in @hex). */
void tv_hash_hex(const void *data, size_t len, size_t size, char *hex);

#endif
