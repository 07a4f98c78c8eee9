/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * table.h - the plain table of a capture's connections, as `tcpvar
 * analyze` prints it into a pipe.
 */
#ifndef TCPVAR_TABLE_H
#define TCPVAR_TABLE_H

#include <stdio.h>

#include "engine.h"

struct tv_table {
	struct tv_engine *e;
	duckdb_connection con;	/* on the store */
	const char *root;	/* tcpvar's SQL files */
	const char *path;	/* the capture's, resolved */
	long capture_id, count;	/* its id, its connections */
	char *brief;		/* the query of the rows laid out here (tv_table_plan()) */
};

/* Read the query of its rows (before the capture is stored); 0, or -1. */
int tv_table_plan(struct tv_table *t);

/* Print it; 0, or -1 with nothing printed yet, or -2 after some of it. */
int tv_table_print(struct tv_table *t, FILE *out);

#endif
