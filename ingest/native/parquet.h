/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * parquet.h - a table of columns (a packet batch) written as a Parquet file
 * by the scanner itself, where DuckDB's COPY spent most of a load's CPU.
 */
#ifndef TCPVAR_PARQUET_H
#define TCPVAR_PARQUET_H

#include <stddef.h>

#include "arrow_stream.h"

/*
 * Write @t's rows to a new file at @path (created, never through a symbolic
 * link, never over an existing file) as one row group of PLAIN pages
 * compressed with zstd, with each column's min, max and null count. The
 * columns may be of the integer types and lists of int64. Returns 0, or a
 * negative errno (-ENOTSUP for another column type, -EFBIG for a page past
 * 2 GiB); a file left half written is the caller's to remove.
 */
int tv_parquet_write(const struct tv_arrow_table *t, const char *path,
		     const char *created_by);

#endif
