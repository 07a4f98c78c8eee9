// SPDX-License-Identifier: GPL-2.0-only
/*
 * parquet.c - a packet batch as a Parquet file, written by the scanner.
 *
 * DuckDB's COPY took about 0.25 s of CPU per million packets to write the
 * packets' segments, most of a load's CPU on two cores. The columns are
 * already laid out as Arrow lays them out, so a Parquet file is little more
 * than their bytes: one row group, one data page (version 1) per column,
 * its levels and values compressed with zstd at level 1. Values are PLAIN,
 * but for the columns that climb in small steps (frame numbers, times),
 * which are DELTA_BINARY_PACKED: files a quarter to two thirds the size of
 * DuckDB's, at a fraction of the time. Each column chunk carries its min,
 * max and null count, so readers skip a segment by its values as they do
 * DuckDB's.
 *
 * The layout is the Parquet format's (parquet.thrift of parquet-format):
 * "PAR1", the column chunks, the FileMetaData in Thrift's compact protocol,
 * its length (4 bytes, little endian) and "PAR1". The schema is the one
 * DuckDB writes for these types: every column OPTIONAL; unsigned integers
 * as INT32 with their converted type; a list as the three-level LIST group.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "parquet.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "Parquet's PLAIN values are little endian: this writer copies them as they are"
#endif

#define ZSTD_LEVEL	1

/* parquet.thrift's enumerations, as far as used here */
enum { PQ_INT32 = 1, PQ_INT64 = 2 };				/* Type */
enum { PQ_REQUIRED = 0, PQ_OPTIONAL = 1, PQ_REPEATED = 2 };	/* FieldRepetitionType */
/* ConvertedType */
enum { PQ_LIST = 3, PQ_UINT_8 = 11, PQ_UINT_16 = 12, PQ_UINT_32 = 13, PQ_INT_64 = 18 };
enum { PQ_PLAIN = 0, PQ_RLE = 3, PQ_DELTA_BINARY_PACKED = 5 };	/* Encoding */
enum { PQ_ZSTD = 6 };						/* CompressionCodec */
enum { PQ_DATA_PAGE = 0 };					/* PageType */

/* Thrift compact protocol types */
enum { CT_I16 = 4, CT_I32 = 5, CT_I64 = 6, CT_BINARY = 8, CT_LIST = 9, CT_STRUCT = 12 };

struct buf {
	uint8_t *p;
	size_t n, cap;
	int oom;
};

static uint8_t *room(struct buf *b, size_t len)
{
	size_t cap = b->cap ? b->cap : 4096;
	uint8_t *p;

	if (b->oom)
		return NULL;
	if (b->n + len > b->cap) {
		while (cap < b->n + len)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return NULL;
		}
		b->p = p;
		b->cap = cap;
	}
	return b->p + b->n;
}

static void put(struct buf *b, const void *src, size_t len)
{
	uint8_t *p = room(b, len);

	if (p) {
		memcpy(p, src, len);
		b->n += len;
	}
}

static void put_byte(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void put_varint(struct buf *b, uint64_t v)
{
	uint8_t out[10];
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	put(b, out, n);
}

static void put_le32(struct buf *b, uint32_t v)
{
	put(b, &v, 4);
}

/* ---- Thrift's compact protocol: structs, lists, integers, binary ---- */

struct thrift {
	struct buf *b;
	int16_t last[8];	/* the last field id of each open struct */
	int depth;
};

static void t_field(struct thrift *t, int16_t id, uint8_t type)
{
	int delta = id - t->last[t->depth];

	if (delta > 0 && delta <= 15) {
		put_byte(t->b, (uint8_t)(delta << 4 | type));
	} else {
		put_byte(t->b, type);
		put_varint(t->b, (uint16_t)((id << 1) ^ (id >> 15)));
	}
	t->last[t->depth] = id;
}

static void t_i32(struct thrift *t, int16_t id, int32_t v)
{
	t_field(t, id, CT_I32);
	put_varint(t->b, (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31)));
}

static void t_i64(struct thrift *t, int16_t id, int64_t v)
{
	t_field(t, id, CT_I64);
	put_varint(t->b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void t_i16(struct thrift *t, int16_t id, int16_t v)
{
	t_field(t, id, CT_I16);
	put_varint(t->b, (uint16_t)(((uint16_t)v << 1) ^ (uint16_t)(v >> 15)));
}

static void t_binary(struct thrift *t, int16_t id, const void *p, size_t len)
{
	t_field(t, id, CT_BINARY);
	put_varint(t->b, len);
	put(t->b, p, len);
}

static void t_list(struct thrift *t, int16_t id, uint8_t type, size_t n)
{
	t_field(t, id, CT_LIST);
	if (n < 15) {
		put_byte(t->b, (uint8_t)(n << 4 | type));
	} else {
		put_byte(t->b, 0xf0 | type);
		put_varint(t->b, n);
	}
}

/* A struct: as field @id of the open one, or (id 0) as an element of a list. */
static void t_begin(struct thrift *t, int16_t id)
{
	if (id)
		t_field(t, id, CT_STRUCT);
	t->last[++t->depth] = 0;
}

static void t_end(struct thrift *t)
{
	put_byte(t->b, 0);
	t->depth--;
}

/* ---- a column chunk: one data page ---- */

struct chunk {
	int64_t offset;			/* of its page header in the file */
	int64_t compressed, uncompressed;	/* header included */
	int64_t levels;			/* num_values: one per row, or per list item */
	int64_t nulls;
	int encoding;			/* of the values: PLAIN or DELTA_BINARY_PACKED */
	int has_stats;
	uint8_t min[8], max[8];		/* PLAIN values */
};

static int physical(enum tv_arrow_type type)
{
	return type == TV_A_I64 || type == TV_A_LIST_I64 ? PQ_INT64 : PQ_INT32;
}

static int converted(enum tv_arrow_type type)
{
	switch (type) {
	case TV_A_U8:
		return PQ_UINT_8;
	case TV_A_U16:
		return PQ_UINT_16;
	case TV_A_U32:
		return PQ_UINT_32;
	default:
		return PQ_INT_64;
	}
}

/*
 * Levels as RLE runs of the hybrid encoding (a run: its length << 1, then
 * the value in a byte), with the 4-byte length page version 1 puts first.
 */
struct runs {
	struct buf *b;
	size_t start;
	unsigned int value;
	uint64_t count;
};

static void runs_begin(struct runs *r, struct buf *b)
{
	r->b = b;
	r->start = b->n;
	r->count = 0;
	put_le32(b, 0);
}

static void runs_flush(struct runs *r)
{
	if (r->count) {
		put_varint(r->b, r->count << 1);
		put_byte(r->b, (uint8_t)r->value);
	}
}

static void runs_add(struct runs *r, unsigned int value, uint64_t n)
{
	if (r->count && value != r->value) {
		runs_flush(r);
		r->count = 0;
	}
	r->value = value;
	r->count += n;
}

static void runs_end(struct runs *r)
{
	uint32_t len;

	runs_flush(r);
	if (r->b->oom)
		return;
	len = (uint32_t)(r->b->n - r->start - 4);
	memcpy(r->b->p + r->start, &len, 4);
}

/*
 * The non-null values of a column of C type T as PLAIN values of type W
 * (unsigned integers widen to INT32), their count, min and max. A copy and
 * a loop the compiler vectorises where no value is null; where some are,
 * the bitmap a byte at a time (whole bytes of values are the common case).
 */
#define MINMAX(T, from, count)						\
	do {								\
		int64_t j;						\
									\
		for (j = 0; j < (count); j++) {			\
			T x = (from)[j];				\
									\
			mn = x < mn ? x : mn;				\
			mx = x > mx ? x : mx;				\
		}							\
	} while (0)

#define PLAIN_VALUES(T, W)						\
	do {								\
		const T *v = c->values;					\
		T mn = 0, mx = 0;					\
		int64_t i, k;						\
									\
		for (i = 0; i < rows; i += 8) {				\
			unsigned int bits = c->valid ? c->valid[i >> 3] : 0xff;	\
			int64_t m = rows - i < 8 ? rows - i : 8;	\
									\
			if (!n && bits)					\
				mn = mx = v[i + __builtin_ctz(bits)];	\
			if (bits == 0xff && m == 8 && sizeof(T) == sizeof(W)) {	\
				memcpy(out + n * sizeof(W), v + i, 8 * sizeof(W));	\
				MINMAX(T, v + i, 8);			\
				n += 8;					\
				continue;				\
			}						\
			for (k = 0; k < m; k++) {			\
				W w = v[i + k];				\
									\
				if (!(bits >> k & 1))			\
					continue;			\
				MINMAX(T, v + i + k, 1);		\
				memcpy(out + n * sizeof(W), &w, sizeof(W));	\
				n++;					\
			}						\
		}							\
		lo = (W)mn;						\
		hi = (W)mx;						\
	} while (0)

/* Definition levels: 0 a null, 1 a value. */
static void def_levels(const struct tv_arrow_col *c, int64_t rows, struct buf *page)
{
	if (!c->valid) {		/* all there: one run of 1s */
		struct runs r;

		runs_begin(&r, page);
		runs_add(&r, 1, (uint64_t)rows);
		runs_end(&r);
	} else {			/* the validity bitmap is the bit-packed run */
		uint64_t groups = ((uint64_t)rows + 7) / 8;
		struct buf head = { 0 };

		put_varint(&head, groups << 1 | 1);
		put_le32(page, (uint32_t)(head.n + groups));
		put(page, head.p, head.n);
		put(page, c->valid, groups);
		free(head.p);
		if (head.oom)
			page->oom = 1;
	}
}

/*
 * DELTA_BINARY_PACKED, for columns whose values mostly climb in small steps
 * (frame numbers, times): blocks of 128 differences from the value before,
 * each less the block's least, in 4 miniblocks of 32 packed in as few bits
 * as the miniblock's largest needs. Frame numbers shrink to nothing, times
 * to a quarter, and zstd has that much less to do. Differences wrap, as
 * readers add them. A column of unsigned INT32s takes it only below 2^31
 * (readers compute INT32 differences in 32 bits).
 */
#define DELTA_BLOCK	128
#define DELTA_MINIS	4
#define DELTA_MINI	(DELTA_BLOCK / DELTA_MINIS)

static inline int64_t climbing_value(const struct tv_arrow_col *c, int64_t i)
{
	return c->type == TV_A_U32 ? (int64_t)((const uint32_t *)c->values)[i]
				   : ((const int64_t *)c->values)[i];
}

/* Whether @c is delta-encoded; its min and max in @lo and @hi if so. */
static int delta_fits(const struct tv_arrow_col *c, int64_t rows, uint64_t *lo, uint64_t *hi)
{
	int64_t mn, mx, i;

	if (!c->climbs || c->valid || !rows || (c->type != TV_A_U32 && c->type != TV_A_I64))
		return 0;
	mn = mx = climbing_value(c, 0);
	for (i = 1; i < rows; i++) {
		int64_t v = climbing_value(c, i);

		mn = v < mn ? v : mn;
		mx = v > mx ? v : mx;
	}
	if (c->type == TV_A_U32 && mx > INT32_MAX)
		return 0;
	*lo = (uint64_t)mn;
	*hi = (uint64_t)mx;
	return 1;
}

static void put_zigzag(struct buf *b, int64_t v)
{
	put_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* @n values of @width bits each, least significant bit first. */
static void pack(struct buf *b, const uint64_t *v, int n, int width)
{
	size_t len = (size_t)n * (size_t)width / 8;
	uint8_t *out = room(b, len);
	__uint128_t acc = 0;
	int bits = 0, i;

	if (!out)
		return;
	for (i = 0; i < n; i++) {
		acc |= (__uint128_t)v[i] << bits;
		for (bits += width; bits >= 8; bits -= 8) {
			*out++ = (uint8_t)acc;
			acc >>= 8;
		}
	}
	b->n += len;
}

static void delta_values(const struct tv_arrow_col *c, int64_t rows, struct buf *page)
{
	int64_t at, k;

	put_varint(page, DELTA_BLOCK);
	put_varint(page, DELTA_MINIS);
	put_varint(page, (uint64_t)rows);
	put_zigzag(page, climbing_value(c, 0));
	for (at = 1; at < rows; at += DELTA_BLOCK) {
		int64_t m = rows - at < DELTA_BLOCK ? rows - at : DELTA_BLOCK;
		uint64_t u[DELTA_BLOCK] = { 0 }, prev = (uint64_t)climbing_value(c, at - 1);
		uint8_t widths[DELTA_MINIS] = { 0 };
		int64_t least = INT64_MAX;

		for (k = 0; k < m; k++) {
			uint64_t v = (uint64_t)climbing_value(c, at + k);

			u[k] = v - prev;
			prev = v;
			least = (int64_t)u[k] < least ? (int64_t)u[k] : least;
		}
		for (k = 0; k < m; k++) {
			uint8_t *w = &widths[k / DELTA_MINI];
			uint64_t x = u[k] -= (uint64_t)least;
			int bits = x ? 64 - __builtin_clzll(x) : 0;

			*w = bits > *w ? (uint8_t)bits : *w;
		}
		put_zigzag(page, least);
		put(page, widths, DELTA_MINIS);
		for (k = 0; k < m; k += DELTA_MINI)	/* a last one padded with 0s */
			pack(page, u + k, DELTA_MINI, widths[k / DELTA_MINI]);
	}
}

/* Definition levels and the values, with their stats. */
static void scalar_page(const struct tv_arrow_col *c, int64_t rows, struct buf *page,
			struct chunk *ck)
{
	size_t width = physical(c->type) == PQ_INT64 ? 8 : 4;
	uint64_t lo = 0, hi = 0;
	int64_t n = 0;
	uint8_t *out;

	def_levels(c, rows, page);
	ck->levels = rows;
	if (delta_fits(c, rows, &lo, &hi)) {
		delta_values(c, rows, page);
		ck->encoding = PQ_DELTA_BINARY_PACKED;
		ck->has_stats = 1;
		memcpy(ck->min, &lo, width);
		memcpy(ck->max, &hi, width);
		return;
	}
	out = room(page, (size_t)rows * width);
	if (!out || !rows)
		return;
	switch (c->type) {
	case TV_A_U8:
		PLAIN_VALUES(uint8_t, uint32_t);
		break;
	case TV_A_U16:
		PLAIN_VALUES(uint16_t, uint32_t);
		break;
	case TV_A_U32:
		PLAIN_VALUES(uint32_t, uint32_t);
		break;
	default:
		PLAIN_VALUES(int64_t, int64_t);
		break;
	}
	page->n += (size_t)n * width;
	ck->nulls = rows - n;
	ck->has_stats = n > 0;
	memcpy(ck->min, &lo, width);
	memcpy(ck->max, &hi, width);
}

/*
 * A list<int64> in the three-level LIST layout: repetition levels (0 a new
 * row, 1 the next item of it), definition levels (1 an empty list, 3 an
 * item; lists and items are never null here), then the items.
 */
static void list_page(const struct tv_arrow_col *c, int64_t rows, struct buf *page,
		      struct chunk *ck)
{
	const int32_t *off = c->offsets;
	struct runs r;
	int64_t i, items = off[rows] - off[0];

	runs_begin(&r, page);
	for (i = 0; i < rows; i++) {
		int32_t k = off[i + 1] - off[i];

		runs_add(&r, 0, 1);
		if (k > 1)
			runs_add(&r, 1, (uint64_t)k - 1);
	}
	runs_end(&r);
	runs_begin(&r, page);
	ck->levels = items;
	for (i = 0; i < rows; i++) {
		int32_t k = off[i + 1] - off[i];

		runs_add(&r, k ? 3 : 1, k ? (uint64_t)k : 1);
		ck->levels += !k;		/* an empty list is a level too */
	}
	runs_end(&r);
	put(page, (const int64_t *)c->values + off[0], (size_t)items * 8);
	ck->nulls = ck->levels - items;
	ck->has_stats = 0;
}

static void page_header(struct thrift *t, const struct chunk *ck, size_t raw, size_t packed)
{
	t->depth = 0;
	t->last[0] = 0;
	t_i32(t, 1, PQ_DATA_PAGE);
	t_i32(t, 2, (int32_t)raw);
	t_i32(t, 3, (int32_t)packed);
	t_begin(t, 5);				/* DataPageHeader */
	t_i32(t, 1, (int32_t)ck->levels);
	t_i32(t, 2, ck->encoding);
	t_i32(t, 3, PQ_RLE);
	t_i32(t, 4, PQ_RLE);
	t_end(t);
	put_byte(t->b, 0);
}

static int write_chunk(const struct tv_arrow_col *c, int64_t rows, struct buf *file,
		       struct buf *page, struct buf *packed, ZSTD_CCtx *zc, struct chunk *ck)
{
	struct buf head = { 0 };
	struct thrift t = { .b = &head };
	size_t bound, n;

	page->n = 0;
	if (c->type == TV_A_LIST_I64)
		list_page(c, rows, page, ck);
	else
		scalar_page(c, rows, page, ck);
	if (page->oom)
		return -ENOMEM;
	if (page->n > INT32_MAX || ck->levels > INT32_MAX)
		return -EFBIG;
	bound = ZSTD_compressBound(page->n);
	packed->n = 0;
	if (!room(packed, bound))
		return -ENOMEM;
	n = ZSTD_compressCCtx(zc, packed->p, bound, page->p, page->n, ZSTD_LEVEL);
	if (ZSTD_isError(n))
		return -ENOMEM;		/* the only way it fails with a bound's room */
	page_header(&t, ck, page->n, n);
	ck->offset = (int64_t)file->n;
	ck->compressed = (int64_t)(head.n + n);
	ck->uncompressed = (int64_t)(head.n + page->n);
	put(file, head.p, head.n);
	put(file, packed->p, n);
	free(head.p);
	return head.oom || file->oom ? -ENOMEM : 0;
}

/* ---- the footer ---- */

static void schema_element(struct thrift *t, int type, int repetition, const char *name,
			   int children, int conv)
{
	t_begin(t, 0);
	if (type)
		t_i32(t, 1, type);
	t_i32(t, 3, repetition);
	t_binary(t, 4, name, strlen(name));
	if (children)
		t_i32(t, 5, children);
	if (conv >= 0)
		t_i32(t, 6, conv);
	t_end(t);
}

static void column_meta(struct thrift *t, const struct tv_arrow_col *c, const struct chunk *ck)
{
	int list = c->type == TV_A_LIST_I64;
	size_t width = physical(c->type) == PQ_INT64 ? 8 : 4;

	t_begin(t, 0);				/* ColumnChunk */
	t_i64(t, 2, ck->offset);
	t_begin(t, 3);				/* ColumnMetaData */
	t_i32(t, 1, physical(c->type));
	t_list(t, 2, CT_I32, 2);
	put_varint(t->b, (uint64_t)ck->encoding << 1);
	put_varint(t->b, PQ_RLE << 1);
	t_list(t, 3, CT_BINARY, list ? 3 : 1);
	put_varint(t->b, strlen(c->name));
	put(t->b, c->name, strlen(c->name));
	if (list) {
		put_varint(t->b, 4);
		put(t->b, "list", 4);
		put_varint(t->b, 7);
		put(t->b, "element", 7);
	}
	t_i32(t, 4, PQ_ZSTD);
	t_i64(t, 5, ck->levels);
	t_i64(t, 6, ck->uncompressed);
	t_i64(t, 7, ck->compressed);
	t_i64(t, 9, ck->offset);
	if (!list) {
		t_begin(t, 12);			/* Statistics */
		t_i64(t, 3, ck->nulls);
		if (ck->has_stats) {
			t_binary(t, 5, ck->max, width);
			t_binary(t, 6, ck->min, width);
		}
		t_end(t);
	}
	t_end(t);
	t_end(t);
}

static void footer(struct buf *file, const struct tv_arrow_table *tb, const struct chunk *cks,
		   const char *created_by)
{
	struct thrift t = { .b = file };
	int64_t raw = 0, packed = 0;
	size_t i, start = file->n, elements = 1;

	for (i = 0; i < tb->ncols; i++)		/* a list is three elements */
		elements += tb->cols[i].type == TV_A_LIST_I64 ? 3 : 1;
	t_i32(&t, 1, 1);			/* version */
	t_list(&t, 2, CT_STRUCT, elements);
	schema_element(&t, 0, PQ_REQUIRED, "tcpvar_segment", (int)tb->ncols, -1);
	for (i = 0; i < tb->ncols; i++) {
		const struct tv_arrow_col *c = &tb->cols[i];

		if (c->type == TV_A_LIST_I64) {
			schema_element(&t, 0, PQ_OPTIONAL, c->name, 1, PQ_LIST);
			schema_element(&t, 0, PQ_REPEATED, "list", 1, -1);
			schema_element(&t, PQ_INT64, PQ_OPTIONAL, "element", 0, PQ_INT_64);
		} else {
			schema_element(&t, physical(c->type), PQ_OPTIONAL, c->name, 0,
				       converted(c->type));
		}
	}
	t_i64(&t, 3, tb->rows);
	t_list(&t, 4, CT_STRUCT, 1);
	t_begin(&t, 0);				/* RowGroup */
	t_list(&t, 1, CT_STRUCT, tb->ncols);
	for (i = 0; i < tb->ncols; i++) {
		column_meta(&t, &tb->cols[i], &cks[i]);
		raw += cks[i].uncompressed;
		packed += cks[i].compressed;
	}
	t_i64(&t, 2, raw);
	t_i64(&t, 3, tb->rows);
	t_i64(&t, 5, cks[0].offset);
	t_i64(&t, 6, packed);
	t_i16(&t, 7, 0);
	t_end(&t);
	t_binary(&t, 6, created_by, strlen(created_by));
	t_list(&t, 7, CT_STRUCT, tb->ncols);	/* ColumnOrder: TypeDefinedOrder each */
	for (i = 0; i < tb->ncols; i++) {
		t_begin(&t, 0);
		t_begin(&t, 1);
		t_end(&t);
		t_end(&t);
	}
	put_byte(file, 0);
	put_le32(file, (uint32_t)(file->n - start));
	put(file, "PAR1", 4);
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int tv_parquet_write(const struct tv_arrow_table *t, const char *path,
		     const char *created_by)
{
	struct buf file = { 0 }, page = { 0 }, packed = { 0 };
	struct chunk *cks = calloc(t->ncols ? t->ncols : 1, sizeof(*cks));
	ZSTD_CCtx *zc = ZSTD_createCCtx();
	size_t i;
	int rc = -ENOMEM, fd;

	for (i = 0; i < t->ncols; i++) {
		enum tv_arrow_type type = t->cols[i].type;

		if (type == TV_A_F64 || type == TV_A_UTF8) {
			rc = -ENOTSUP;
			goto out;
		}
	}
	if (!cks || !zc)
		goto out;
	/*
	 * sized once for the widest column: growing them page by page cost
	 * more than encoding (copies, and the kernel's fresh pages)
	 */
	room(&page, (size_t)t->rows * 9 + 64);
	room(&packed, ZSTD_compressBound(page.cap));
	room(&file, page.cap);
	put(&file, "PAR1", 4);
	for (i = 0; i < t->ncols; i++) {
		rc = write_chunk(&t->cols[i], t->rows, &file, &page, &packed, zc, &cks[i]);
		if (rc < 0)
			goto out;
	}
	footer(&file, t, cks, created_by);
	rc = -ENOMEM;
	if (file.oom)
		goto out;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = write_all(fd, file.p, file.n);
	if (close(fd) < 0 && !rc)
		rc = -errno;
out:
	ZSTD_freeCCtx(zc);
	free(cks);
	free(file.p);
	free(page.p);
	free(packed.p);
	return rc;
}
