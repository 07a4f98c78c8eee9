// SPDX-License-Identifier: GPL-2.0-only
/* columns.c - allocation of packet batches and the column catalogue. */
#include <stdlib.h>

#include "columns.h"

#define COL(name, type) { #name, type, offsetof(struct tv_batch, name), 0, 0 }
#define CLIMBING(name, type) { #name, type, offsetof(struct tv_batch, name), 0, 1 }
#define NCOL(name, type) { #name, type, offsetof(struct tv_batch, name), \
			   offsetof(struct tv_batch, valid_##name), 0 }

/* The order here is the order of the packets table (store/schema.sql). */
const struct tv_coldef tv_columns[] = {
	CLIMBING(frame, TV_U32),
	CLIMBING(ts_ns, TV_I64),
	COL(conn, TV_U32),
	COL(dir, TV_U8),
	COL(seq, TV_I64),
	COL(ack, TV_I64),
	COL(flags, TV_U8),
	COL(win, TV_U32),
	COL(len, TV_U32),
	COL(wire_len, TV_U32),
	COL(ev, TV_U16),
	NCOL(tsval, TV_U32),
	NCOL(tsecr, TV_U32),
	NCOL(rtt_us, TV_U32),
	NCOL(inflight, TV_U32),
	NCOL(mss, TV_U16),
	NCOL(wscale, TV_U8),
	NCOL(ngwa_window, TV_U32),
	{ "sack_l", TV_LIST_I64, offsetof(struct tv_batch, sack_l), 0, 0 },
	{ "sack_r", TV_LIST_I64, offsetof(struct tv_batch, sack_r), 0, 0 },
};
const size_t tv_ncolumns = sizeof(tv_columns) / sizeof(tv_columns[0]);

size_t tv_ctype_size(enum tv_ctype t)
{
	switch (t) {
	case TV_U8:
		return 1;
	case TV_U16:
		return 2;
	case TV_U32:
		return 4;
	case TV_I64:
	case TV_LIST_I64:
		return 8;
	}
	return 0;
}

static void **slot(struct tv_batch *b, size_t off)
{
	return (void **)((char *)b + off);
}

struct tv_batch *tv_batch_new(size_t cap)
{
	struct tv_batch *b = calloc(1, sizeof(*b));
	size_t i;

	if (!b)
		return NULL;
	b->cap = cap;
	b->sack_cap = 64;
	b->sack_off = calloc(cap + 1, sizeof(int32_t));
	if (!b->sack_off)
		goto fail;
	for (i = 0; i < tv_ncolumns; i++) {
		const struct tv_coldef *c = &tv_columns[i];
		size_t rows = c->type == TV_LIST_I64 ? b->sack_cap : cap;

		*slot(b, c->data) = malloc(rows * tv_ctype_size(c->type) + 8);
		if (!*slot(b, c->data))
			goto fail;
		if (c->valid) {
			*slot(b, c->valid) = calloc(cap / 8 + 1, 1);
			if (!*slot(b, c->valid))
				goto fail;
		}
	}
	return b;
fail:
	tv_batch_free(b);
	return NULL;
}

void tv_batch_free(struct tv_batch *b)
{
	size_t i;

	if (!b)
		return;
	for (i = 0; i < tv_ncolumns; i++) {
		free(*slot(b, tv_columns[i].data));
		if (tv_columns[i].valid)
			free(*slot(b, tv_columns[i].valid));
	}
	free(b->sack_off);
	free(b);
}

int tv_batch_reserve_sack(struct tv_batch *b, size_t more)
{
	size_t used = (size_t)b->sack_off[b->n], want = used + more;
	int64_t *l, *r;

	if (want <= b->sack_cap)
		return 1;
	while (b->sack_cap < want)
		b->sack_cap *= 2;
	l = realloc(b->sack_l, b->sack_cap * sizeof(int64_t));
	if (!l)
		return 0;
	b->sack_l = l;
	r = realloc(b->sack_r, b->sack_cap * sizeof(int64_t));
	if (!r)
		return 0;
	b->sack_r = r;
	return 1;
}
