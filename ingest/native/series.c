// SPDX-License-Identifier: GPL-2.0-only
/* series.c - the throughput series' sums, gathered during the scan. */
#include <stdlib.h>

#include "series.h"

void tv_series_init(struct tv_series *s, uint64_t interval_ns)
{
	*s = (struct tv_series){ .interval_ns = interval_ns, .valid = interval_ns > 0 };
}

void tv_series_record(struct tv_series *s, uint64_t ts_ns)
{
	if (!s->based) {
		s->base_ns = ts_ns;
		s->based = 1;
	} else if (ts_ns < s->base_ns) {
		s->valid = 0;	/* the intervals would start earlier */
	}
}

static int grow(void **p, size_t *cap, size_t want, size_t size)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

int tv_series_add(struct tv_series *s, uint32_t conn, uint8_t dir, uint64_t ts_ns,
		  uint32_t len, int resent)
{
	size_t key = ((size_t)conn - 1) * 2 + dir, old = s->nlatest;
	int64_t bin;
	struct tv_bin *b;

	if (!s->valid || !len)
		return 0;
	bin = (int64_t)((ts_ns - s->base_ns) / s->interval_ns);
	if (grow((void **)&s->latest, &s->nlatest, key + 1, sizeof(*s->latest)) < 0)
		return -1;
	for (; old < s->nlatest; old++)
		s->latest[old] = 0;
	b = s->latest[key] ? &s->bins[s->latest[key] - 1] : NULL;
	if (!b || b->bin != bin) {
		if (grow((void **)&s->bins, &s->cap, s->n + 1, sizeof(*s->bins)) < 0)
			return -1;
		b = &s->bins[s->n++];
		*b = (struct tv_bin){ .conn = conn, .dir = dir, .bin = bin };
		s->latest[key] = s->n;
	}
	b->packets++;
	b->bytes += len;
	if (!resent)
		b->unique_bytes += len;
	return 0;
}

void tv_series_free(struct tv_series *s)
{
	free(s->bins);
	free(s->latest);
	s->bins = NULL;
	s->latest = NULL;
}
