// SPDX-License-Identifier: GPL-2.0-only
/*
 * arrow_stream.c - columns as an Arrow C stream of one struct array.
 *
 * The arrays point into the table's own columns; each exported structure
 * holds a reference to the table, which is freed when the last of them
 * and its Python object are gone. Release callbacks may run on any thread
 * (DuckDB's), so the count is atomic and nothing here touches Python.
 */
#include <stdlib.h>

#include "arrow_stream.h"

void tv_arrow_hold(struct tv_arrow_table *t)
{
	atomic_fetch_add(&t->refs, 1);
}

void tv_arrow_put(struct tv_arrow_table *t)
{
	if (t && atomic_fetch_sub(&t->refs, 1) == 1)
		t->free(t);
}

static const char *format_of(enum tv_arrow_type type)
{
	switch (type) {
	case TV_A_U8:
		return "C";
	case TV_A_U16:
		return "S";
	case TV_A_U32:
		return "I";
	case TV_A_I64:
		return "l";
	case TV_A_F64:
		return "g";
	case TV_A_LIST_I64:
		return "+l";
	case TV_A_UTF8:
		return "u";
	}
	return "n";
}

/*
 * Both trees have the same shape: a struct at the top, a child per column,
 * and under each list column one child of its items. One block holds the
 * nodes below the top; the top's release frees it with the children it has
 * not seen released (a consumer may release a child it moved out itself).
 */
#define NODES(T) struct { T *kids, **kid_ptrs, *items, **item_ptrs; size_t n; }

struct schema_nodes {
	NODES(struct ArrowSchema);
};

struct array_nodes {
	NODES(struct ArrowArray);
	const void **bufs;		/* three per column, two per list's items, one on top */
	struct tv_arrow_table *t;
};

#define ALLOC_NODES(p, count) \
	((p)->n = (count), \
	 (p)->kids = calloc((count), sizeof(*(p)->kids)), \
	 (p)->kid_ptrs = calloc((count), sizeof(*(p)->kid_ptrs)), \
	 (p)->items = calloc((count), sizeof(*(p)->items)), \
	 (p)->item_ptrs = calloc((count), sizeof(*(p)->item_ptrs)), \
	 (p)->kids && (p)->kid_ptrs && (p)->items && (p)->item_ptrs)

#define FREE_NODES(p) \
	do { \
		size_t i_; \
		for (i_ = 0; (p)->kids && i_ < (p)->n; i_++) \
			if ((p)->kids[i_].release) \
				(p)->kids[i_].release(&(p)->kids[i_]); \
		free((p)->kids); \
		free((p)->kid_ptrs); \
		free((p)->items); \
		free((p)->item_ptrs); \
	} while (0)

static void release_schema_child(struct ArrowSchema *s)
{
	int64_t i;

	for (i = 0; i < s->n_children; i++)
		if (s->children[i]->release)
			s->children[i]->release(s->children[i]);
	s->release = NULL;
}

static void release_schema(struct ArrowSchema *s)
{
	struct schema_nodes *p = s->private_data;

	FREE_NODES(p);
	free(p);
	s->release = NULL;
}

static void release_array_child(struct ArrowArray *a)
{
	int64_t i;

	for (i = 0; i < a->n_children; i++)
		if (a->children[i]->release)
			a->children[i]->release(a->children[i]);
	a->release = NULL;
}

static void release_array(struct ArrowArray *a)
{
	struct array_nodes *p = a->private_data;

	FREE_NODES(p);
	free(p->bufs);
	tv_arrow_put(p->t);
	free(p);
	a->release = NULL;
}

int tv_arrow_schema(const struct tv_arrow_table *t, struct ArrowSchema *out)
{
	struct schema_nodes *p = calloc(1, sizeof(*p));
	size_t i;

	if (!p)
		return -1;
	*out = (struct ArrowSchema){
		.format = "+s", .name = "", .n_children = (int64_t)t->ncols,
		.release = release_schema, .private_data = p,
	};
	if (!ALLOC_NODES(p, t->ncols)) {
		release_schema(out);
		return -1;
	}
	for (i = 0; i < t->ncols; i++) {
		struct ArrowSchema *k = &p->kids[i];

		*k = (struct ArrowSchema){
			.format = format_of(t->cols[i].type), .name = t->cols[i].name,
			.flags = ARROW_FLAG_NULLABLE, .release = release_schema_child,
		};
		if (t->cols[i].type == TV_A_LIST_I64) {
			p->items[i] = (struct ArrowSchema){
				.format = "l", .name = "item", .flags = ARROW_FLAG_NULLABLE,
				.release = release_schema_child,
			};
			p->item_ptrs[i] = &p->items[i];
			k->n_children = 1;
			k->children = &p->item_ptrs[i];
		}
		p->kid_ptrs[i] = k;
	}
	out->children = p->kid_ptrs;
	return 0;
}

static int64_t null_count(const uint8_t *bitmap, int64_t rows)
{
	int64_t i, valid = 0;

	for (i = 0; i < rows / 8; i++)
		valid += __builtin_popcount(bitmap[i]);
	for (i = rows / 8 * 8; i < rows; i++)
		valid += bitmap[i >> 3] >> (i & 7) & 1;
	return rows - valid;
}

int tv_arrow_rows(struct tv_arrow_table *t, int64_t first, int64_t rows,
		  struct ArrowArray *out)
{
	struct array_nodes *p = calloc(1, sizeof(*p));
	const void **buf;
	size_t i;

	if (!p)
		return -1;
	tv_arrow_hold(t);
	p->t = t;
	*out = (struct ArrowArray){
		.length = rows, .n_buffers = 1, .n_children = (int64_t)t->ncols,
		.release = release_array, .private_data = p,
	};
	p->bufs = calloc(5 * t->ncols + 1, sizeof(*p->bufs));
	if (!ALLOC_NODES(p, t->ncols) || !p->bufs) {
		release_array(out);
		return -1;
	}
	out->buffers = p->bufs;		/* bufs[0]: the struct's validity, none */
	buf = p->bufs + 1;
	for (i = 0; i < t->ncols; i++, buf += 5) {
		const struct tv_arrow_col *c = &t->cols[i];
		struct ArrowArray *k = &p->kids[i];

		*k = (struct ArrowArray){
			.length = rows, .offset = first, .n_buffers = 2, .buffers = buf,
			.release = release_array_child,
		};
		buf[0] = c->valid;
		if (c->valid)	/* a part's nulls are not counted: -1, unknown */
			k->null_count = first || rows < t->rows ? -1 : null_count(c->valid, rows);
		if (c->type == TV_A_LIST_I64) {
			buf[1] = c->offsets;
			buf[3] = c->values;
			p->items[i] = (struct ArrowArray){
				.length = c->offsets[t->rows], .n_buffers = 2, .buffers = buf + 2,
				.release = release_array_child,
			};
			p->item_ptrs[i] = &p->items[i];
			k->n_children = 1;
			k->children = &p->item_ptrs[i];
		} else if (c->type == TV_A_UTF8) {
			buf[1] = c->offsets;
			buf[2] = c->values;
			k->n_buffers = 3;
		} else {
			buf[1] = c->values;
		}
		p->kid_ptrs[i] = k;
	}
	out->children = p->kid_ptrs;
	return 0;
}

/* ---- the stream: the table's one array, then the end ---- */

struct stream_state {
	struct tv_arrow_table *t;
	int done;
};

static int stream_schema(struct ArrowArrayStream *s, struct ArrowSchema *out)
{
	struct stream_state *st = s->private_data;

	return tv_arrow_schema(st->t, out) ? 12 /* ENOMEM */ : 0;
}

static int stream_next(struct ArrowArrayStream *s, struct ArrowArray *out)
{
	struct stream_state *st = s->private_data;

	if (st->done) {
		out->release = NULL;	/* the end of the stream */
		return 0;
	}
	if (tv_arrow_rows(st->t, 0, st->t->rows, out))
		return 12;
	st->done = 1;
	return 0;
}

static const char *stream_error(struct ArrowArrayStream *s)
{
	return "out of memory";
}

static void stream_release(struct ArrowArrayStream *s)
{
	struct stream_state *st = s->private_data;

	tv_arrow_put(st->t);
	free(st);
	s->release = NULL;
}

int tv_arrow_stream(struct tv_arrow_table *t, struct ArrowArrayStream *out)
{
	struct stream_state *st = calloc(1, sizeof(*st));

	if (!st)
		return -1;
	tv_arrow_hold(t);
	st->t = t;
	*out = (struct ArrowArrayStream){
		.get_schema = stream_schema, .get_next = stream_next,
		.get_last_error = stream_error, .release = stream_release, .private_data = st,
	};
	return 0;
}
