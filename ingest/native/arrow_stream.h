/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * arrow_stream.h - columns as an Arrow C stream (the Arrow C data and stream
 * interfaces, an ABI both Arrow and DuckDB consume): one struct array whose
 * children point into the columns, so DuckDB reads them without a copy and
 * without pyarrow. Packet batches and the connections' records go this way.
 */
#ifndef TCPVAR_ARROW_STREAM_H
#define TCPVAR_ARROW_STREAM_H

#include <stdatomic.h>
#include <stdint.h>

/* The structures of the Arrow C data and stream interfaces, as specified. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_NULLABLE 2

struct ArrowSchema {
	const char *format;
	const char *name;
	const char *metadata;
	int64_t flags;
	int64_t n_children;
	struct ArrowSchema **children;
	struct ArrowSchema *dictionary;
	void (*release)(struct ArrowSchema *);
	void *private_data;
};

struct ArrowArray {
	int64_t length;
	int64_t null_count;
	int64_t offset;
	int64_t n_buffers;
	int64_t n_children;
	const void **buffers;
	struct ArrowArray **children;
	struct ArrowArray *dictionary;
	void (*release)(struct ArrowArray *);
	void *private_data;
};
#endif

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
	int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
	int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
	const char *(*get_last_error)(struct ArrowArrayStream *);
	void (*release)(struct ArrowArrayStream *);
	void *private_data;
};
#endif

enum tv_arrow_type {
	TV_A_U8, TV_A_U16, TV_A_U32, TV_A_I64, TV_A_F64,
	TV_A_LIST_I64,		/* offsets, items in values */
	TV_A_UTF8,		/* offsets, characters in values */
};

struct tv_arrow_col {
	const char *name;
	enum tv_arrow_type type;
	const void *values;
	const uint8_t *valid;	/* validity bitmap; NULL when none is null */
	const int32_t *offsets;	/* rows + 1, for lists and strings */
	int climbs;		/* a hint for Parquet: delta-encode (parquet.c) */
};

/*
 * Columns to export, shared by whoever holds them: the Python object that
 * made them and every structure exported from them. The last to let go
 * calls @free, which frees the columns' memory and the table.
 */
struct tv_arrow_table {
	int64_t rows;
	size_t ncols;
	struct tv_arrow_col *cols;
	atomic_int refs;
	void (*free)(struct tv_arrow_table *t);
};

void tv_arrow_hold(struct tv_arrow_table *t);
void tv_arrow_put(struct tv_arrow_table *t);

/* Fill @out with the table's schema, a struct of its columns; 0, or -1 out of memory. */
int tv_arrow_schema(const struct tv_arrow_table *t, struct ArrowSchema *out);
/* Fill @out with rows @first..@first + @rows - 1 as a struct array, which
 * holds the table until it is released; 0, or -1 out of memory. */
int tv_arrow_rows(struct tv_arrow_table *t, int64_t first, int64_t rows,
		  struct ArrowArray *out);
/* Fill @out with a stream of one struct array: the table's rows. 0, or -1
 * out of memory. The stream holds the table until it is released. */
int tv_arrow_stream(struct tv_arrow_table *t, struct ArrowArrayStream *out);

#endif
