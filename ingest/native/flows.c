// SPDX-License-Identifier: GPL-2.0-only
/*
 * flows.c - the per-connection state machine behind tcpvar's statistics.
 *
 * Each connection has two halves, one per direction. A half is both a sender
 * (its sequence space, the segments it has outstanding, its retransmissions)
 * and a receiver (the ACKs, windows and SACK blocks it sends about the
 * peer's data). Sequence numbers are unwrapped to 64 bits relative to the
 * half's initial sequence number, so nothing breaks when a long flow wraps
 * the 32-bit space.
 *
 * Memory per connection is bounded: at most MAX_HOLES gaps and RING_MAX
 * outstanding segments are remembered per direction (older ones are dropped,
 * which only costs RTT samples). Both are allocated as they are needed, from
 * small: a connection that is only a SYN (a scan, a flood) costs about 1.5 kB.
 * The number of connections is bounded by opts->max_conns.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flows.h"

#define MAX_HOLES	16
#define RING_MIN	4	/* a SYN-only connection's ring stays this small */
#define RING_MAX	65536	/* a power of two, as every size of the ring */
#define WSCALE_MAX	14	/* RFC 7323: larger shifts are treated as 14 */
#define COPIES_KEPT	8	/* tcptrace's SEGS_TO_REMEMBER */

struct seg_rec {
	int64_t start, end;
	uint64_t ts;
	int no_sample;		/* sent again, or acked part-way: Karn says no RTT */
};

struct half {
	struct tv_dirstats st;

	/* this half's sequence space */
	int have_base;
	uint32_t base;		/* raw sequence number of relative 0 */
	int64_t ref;		/* highest relative value seen: unwrap reference */
	int have_seq;
	int64_t snd_max;	/* highest sequence sent, SYN and FIN included */
	int nholes;
	int64_t (*holes)[2];	/* never-seen [l, r): MAX_HOLES from the first */

	/* sender: segments awaiting their ACK, in sequence order, in a
	 * circular array (a one-way capture keeps it full: O(1) a packet) */
	struct seg_rec *ring;
	uint32_t rhead, rlen, rcap;
	/* the last resend not yet written into the ring: segments overlapping
	 * [mk_from, mk_limit) count as sent again at mk_ts (ring_mark_rexmit) */
	int mk_on;
	int64_t mk_from, mk_limit;
	uint64_t mk_ts;
	double srtt_us;
	uint64_t last_rx_ns;	/* when this side last received from the peer */
	uint64_t last_rto_ns;	/* when it last resent after a timeout */
	uint32_t backoff;
	int in_recovery;
	int64_t recovery_point;

	/* receiver: the ACKs this half sends about the peer's data */
	int have_ack;
	int64_t last_ack;
	uint32_t win_last;	/* window of the last non-RST packet (0 without ACK/SYN) */
	uint32_t dup_run;	/* duplicate ACKs in a row for last_ack */
	int64_t sacked_hi;	/* highest SACKed edge since the ACK last moved */
	int win_scaled_seen;	/* window stats restarted at the first scaled window */

	/* the previous segment, to spot copies made by the capture hardware */
	int have_prev;
	uint32_t prev_seq, prev_ack, prev_len;
	uint16_t prev_ipid, prev_win;
	uint8_t prev_flags;
	uint64_t prev_ts;
	/* the last segments' sequence numbers and IP IDs, as tcptrace keeps them */
	uint32_t copy_seq[COPIES_KEPT];
	uint16_t copy_id[COPIES_KEPT];
	unsigned int copy_ix;

	int syn_seen, fin_seen;
	uint32_t isn;
};

struct key {
	uint8_t lo[16], hi[16];
	uint16_t lo_port, hi_port;
	uint8_t family;
	uint8_t pad[3];
};

struct conn {
	struct key key;
	uint32_t id;
	uint8_t a_addr[16], b_addr[16];
	uint16_t a_port, b_port;
	uint64_t first_ns, last_ns, packets;
	int reset;
	struct half h[2];
};

struct tv_flows {
	struct tv_flow_opts opts;
	struct conn *last;	/* the previous packet's connection: often the next's */
	struct conn **conns;
	size_t nconns, capconns;
	uint32_t *slots;	/* open addressing: conn index + 1, 0 empty */
	size_t nslots;
	struct tv_event *events;
	size_t nevents, capevents;
	int full;		/* a connection beyond opts.max_conns was refused */
	size_t live;		/* connections not retired */
	size_t ended;		/* of those, how many ended (ended()) */
	size_t oldest;		/* no live connection below this index */
	uint64_t next_sweep;	/* capture time of the next look for ended ones */
	struct tv_conn_info *gone;	/* retired, not yet taken */
	size_t ngone, capgone;
};

static uint64_t hash_key(const struct key *k)
{
	uint64_t w[5], h;

	memcpy(w, k, sizeof(w));
	h = (w[0] ^ w[1] * 0x9E3779B97F4A7C15ull) + (w[2] ^ w[3] * 0xC2B2AE3D27D4EB4Full);
	h = (h ^ w[4]) * 0xBF58476D1CE4E5B9ull;
	return h ^ (h >> 31);
}

static int addr_port_cmp(const uint8_t *a, uint16_t ap, const uint8_t *b, uint16_t bp)
{
	int c = memcmp(a, b, 16);

	if (c)
		return c;
	return (int)ap - (int)bp;
}

/* The same key for both directions: the lower address and port first. */
static void make_key(const struct tv_segment *seg, struct key *k)
{
	memset(k, 0, sizeof(*k));
	k->family = seg->family;
	if (addr_port_cmp(seg->src, seg->sport, seg->dst, seg->dport) <= 0) {
		memcpy(k->lo, seg->src, 16);
		memcpy(k->hi, seg->dst, 16);
		k->lo_port = seg->sport;
		k->hi_port = seg->dport;
	} else {
		memcpy(k->lo, seg->dst, 16);
		memcpy(k->hi, seg->src, 16);
		k->lo_port = seg->dport;
		k->hi_port = seg->sport;
	}
}

struct tv_flows *tv_flows_new(const struct tv_flow_opts *opts)
{
	struct tv_flows *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->opts = *opts;
	f->nslots = 1024;
	f->slots = calloc(f->nslots, sizeof(*f->slots));
	if (!f->slots) {
		free(f);
		return NULL;
	}
	return f;
}

static void free_conn(struct conn *c)
{
	if (!c)
		return;
	free(c->h[0].ring);
	free(c->h[1].ring);
	free(c->h[0].holes);
	free(c->h[1].holes);
	free(c);
}

void tv_flows_free(struct tv_flows *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->nconns; i++)
		free_conn(f->conns[i]);
	free(f->conns);
	free(f->slots);
	free(f->events);
	free(f->gone);
	free(f);
}

static int grow_slots(struct tv_flows *f)
{
	size_t n = f->nslots * 2, i;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -1;
	/* re-insert the newest connection of every key */
	for (i = 0; i < f->nslots; i++) {
		uint32_t idx = f->slots[i];
		size_t j;

		if (!idx)
			continue;
		j = hash_key(&f->conns[idx - 1]->key) & (n - 1);
		while (s[j])
			j = (j + 1) & (n - 1);
		s[j] = idx;
	}
	free(f->slots);
	f->slots = s;
	f->nslots = n;
	return 0;
}

static void init_half(struct half *h)
{
	h->st.mss = -1;
	h->st.wscale_offered = -1;
	h->st.rtt_3whs = -1;
	h->st.win_min = UINT64_MAX;
	h->st.seg_min = UINT64_MAX;
}

static struct conn *new_conn(struct tv_flows *f, const struct key *k,
			     const struct tv_segment *seg, uint64_t ts)
{
	struct conn *c;

	/* a capture of many connections (a SYN flood) must not take all memory */
	if (f->opts.max_conns && f->live >= f->opts.max_conns) {
		f->full = 1;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (f->nconns == f->capconns) {
		size_t n = f->capconns ? f->capconns * 2 : 64;
		struct conn **v = realloc(f->conns, n * sizeof(*v));

		if (!v) {
			free(c);
			return NULL;
		}
		f->conns = v;
		f->capconns = n;
	}
	c->key = *k;
	c->id = (uint32_t)f->nconns + 1;
	memcpy(c->a_addr, seg->src, 16);
	memcpy(c->b_addr, seg->dst, 16);
	c->a_port = seg->sport;
	c->b_port = seg->dport;
	c->first_ns = ts;
	init_half(&c->h[0]);
	init_half(&c->h[1]);
	f->conns[f->nconns++] = c;
	f->live++;
	return c;
}

/* A RST, or a FIN each way, ended @c. */
static int ended(const struct conn *c)
{
	return c->reset || (c->h[0].fin_seen && c->h[1].fin_seen);
}

/*
 * A SYN (without ACK) on a 4-tuple whose connection has ended, carrying a
 * new initial sequence number, opens a new connection (port reuse).
 */
static int starts_new_conn(const struct conn *c, int dir, const struct tv_segment *seg)
{
	const struct half *h = &c->h[dir];

	if ((seg->flags & (TV_SYN | TV_ACK)) != TV_SYN)
		return 0;
	if (h->syn_seen && seg->seq == h->isn)
		return 0;	/* a retransmitted SYN */
	return ended(c) || (h->syn_seen && c->h[!dir].syn_seen);
}

/* Direction of @seg in @c: 0 a->b, 1 b->a, -1 another 4-tuple. */
static int same_tuple(const struct conn *c, const struct tv_segment *seg)
{
	if (c->key.family != seg->family)
		return -1;
	if (c->a_port == seg->sport && c->b_port == seg->dport &&
	    !memcmp(c->a_addr, seg->src, 16) && !memcmp(c->b_addr, seg->dst, 16))
		return 0;
	if (c->b_port == seg->sport && c->a_port == seg->dport &&
	    !memcmp(c->b_addr, seg->src, 16) && !memcmp(c->a_addr, seg->dst, 16))
		return 1;
	return -1;
}

static struct conn *lookup_slow(struct tv_flows *f, const struct tv_segment *seg,
				uint64_t ts, int *dir);
static int retire_ended(struct tv_flows *f, uint64_t now, uint64_t quiet);

static struct conn *lookup(struct tv_flows *f, const struct tv_segment *seg,
			   uint64_t ts, int *dir)
{
	struct conn *c = f->last;

	if (c && (*dir = same_tuple(c, seg)) >= 0 && !starts_new_conn(c, *dir, seg))
		return c;
	c = lookup_slow(f, seg, ts, dir);
	f->last = c;
	return c;
}

static struct conn *lookup_slow(struct tv_flows *f, const struct tv_segment *seg,
				uint64_t ts, int *dir)
{
	struct key k;
	size_t j;
	struct conn *c;
	int retired = 0;

	make_key(seg, &k);
again:
	j = hash_key(&k) & (f->nslots - 1);
	for (;;) {
		uint32_t idx = f->slots[j];

		if (!idx)
			break;
		c = f->conns[idx - 1];
		if (!memcmp(&c->key, &k, sizeof(k))) {
			*dir = same_tuple(c, seg);
			if (!starts_new_conn(c, *dir, seg))
				return c;
			break;		/* a new connection takes this slot */
		}
		j = (j + 1) & (f->nslots - 1);
	}
	/* at the limit, the connections that ended retire at once rather than
	 * the capture be refused, when they are many enough to pay for the
	 * walk over all; the slots move, so look again */
	if (f->opts.max_conns && f->live >= f->opts.max_conns && f->opts.live_soft &&
	    f->ended > f->opts.max_conns / 16 && !retired) {
		retired = 1;
		if (retire_ended(f, ts, 0) < 0)
			return NULL;
		goto again;
	}
	if (!f->slots[j] && (f->live + 1) * 2 > f->nslots) {
		if (grow_slots(f) < 0)
			return NULL;
		j = hash_key(&k) & (f->nslots - 1);
		while (f->slots[j])
			j = (j + 1) & (f->nslots - 1);
	}
	c = new_conn(f, &k, seg, ts);
	if (c)
		f->slots[j] = c->id;
	*dir = 0;
	return c;
}

/* Relative 64-bit position of a raw 32-bit number, nearest to @ref. */
static int64_t unwrap(uint32_t raw, uint32_t base, int64_t ref)
{
	uint32_t ref32 = base + (uint32_t)ref;

	return ref + (int32_t)(raw - ref32);
}

static int64_t rel(struct half *h, uint32_t raw)
{
	int64_t v;

	if (!h->have_base) {
		h->have_base = 1;
		h->base = raw;
	}
	v = unwrap(raw, h->base, h->ref);
	if (v > h->ref)
		h->ref = v;
	return v;
}

/* ---- outstanding segments (for RTT under Karn's rule) ---- */

static struct seg_rec *ring_at(struct half *h, uint32_t i)
{
	return &h->ring[(h->rhead + i) & (h->rcap - 1)];
}

/* Room for one more segment: 1 if the oldest was forgotten to make it (the
 * ring at its largest), -1 when out of memory. */
static int ring_room(struct half *h)
{
	uint32_t n;
	struct seg_rec *v;

	if (h->rlen < h->rcap)
		return 0;
	if (h->rcap >= RING_MAX) {
		h->rhead = (h->rhead + 1) & (h->rcap - 1);
		h->rlen--;
		return 1;
	}
	/*
	 * Grown in place: realloc() moves a large ring's pages (mremap) where
	 * a copy would write them all into new ones, each a page fault. The
	 * ring is full, so the segments before rhead are the newest: they move
	 * up behind the old end, and the order from rhead is kept.
	 */
	n = h->rcap ? h->rcap * 2 : RING_MIN;
	v = realloc(h->ring, n * sizeof(*v));
	if (!v)
		return -1;
	memcpy(v + h->rcap, v, h->rhead * sizeof(*v));
	h->ring = v;
	h->rcap = n;
	return 0;
}

/* Index of the first outstanding segment that ends after @seq. */
static uint32_t ring_find(struct half *h, int64_t seq)
{
	uint32_t lo = 0, hi = h->rlen;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (ring_at(h, mid)->end <= seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int covered(const struct half *h, const struct seg_rec *r)
{
	return h->mk_on && r->end > h->mk_from && r->start < h->mk_limit;
}

/* The pending resend written into the segments it covers whose end is at
 * most @upto (all of them: INT64_MAX), which it then no longer covers. */
static void ring_settle(struct half *h, int64_t upto)
{
	uint32_t i;

	if (!h->mk_on)
		return;
	for (i = ring_find(h, h->mk_from); i < h->rlen; i++) {
		struct seg_rec *r = ring_at(h, i);

		if (r->start >= h->mk_limit || r->end > upto)
			break;
		r->no_sample = 1;
		r->ts = h->mk_ts;
	}
	if (upto == INT64_MAX)
		h->mk_on = 0;
}

/* Record a segment sent at @ts at position @i (kept in sequence order). */
static int ring_insert(struct half *h, uint32_t i, int64_t start, int64_t end, uint64_t ts)
{
	struct seg_rec *r;
	uint32_t j;
	int dropped = ring_room(h);

	if (dropped < 0)
		return -1;
	if (dropped && i)
		i--;
	if (i > h->rlen)
		i = h->rlen;
	if (i < h->rlen)	/* below data sent before: not part of an earlier resend */
		ring_settle(h, INT64_MAX);
	for (j = h->rlen; j > i; j--)
		*ring_at(h, j) = *ring_at(h, j - 1);
	h->rlen++;
	r = ring_at(h, i);
	r->start = start;
	r->end = end;
	r->ts = ts;
	r->no_sample = 0;
	return 0;
}

static void ring_pop(struct half *h)
{
	h->rhead = (h->rhead + 1) & (h->rcap - 1);
	h->rlen--;
	if (!h->rlen)
		h->rhead = 0;
}

/*
 * Karn: segments overlapping [start, end) were sent again at @ts. Their
 * time becomes the resend's, so an ACK that passes them after a later
 * segment knows that segment's ACK came after a loss. @end is the highest
 * sequence sent, so a later resend covers all an earlier one did from its
 * own start on: the latest is kept pending (walking every outstanding
 * segment at each resend made retransmission-heavy captures quadratic),
 * and only the earlier one's segments below the new start are written.
 */
static void ring_mark_rexmit(struct half *h, int64_t start, int64_t end, uint64_t ts)
{
	if (h->mk_on && h->mk_from < start)
		ring_settle(h, start);
	if (!h->mk_on || end > h->mk_limit)
		h->mk_limit = end;
	h->mk_on = 1;
	h->mk_from = start;
	h->mk_ts = ts;
}

/* Data below the segments from @seq on was sent only now: their ACKs will
 * come after it, so they give no RTT sample. */
static void ring_mark_after(struct half *h, int64_t seq)
{
	uint32_t i;

	for (i = ring_find(h, seq); i < h->rlen; i++)
		ring_at(h, i)->no_sample = 1;
}

/*
 * The peer acknowledged everything below @ack: drop those segments. Only a
 * segment that this ACK ends exactly, that was sent once, and that no
 * segment before it was sent after (that would be an ACK after a loss)
 * gives an RTT sample.
 */
static int ring_ack(struct half *h, int64_t ack, uint64_t ts, uint64_t *rtt_ns)
{
	uint64_t latest = 0;	/* latest send time of the segments passed */
	int sampled = 0;

	while (h->rlen && ring_at(h, 0)->end <= ack) {
		struct seg_rec *r = ring_at(h, 0);
		int resent = covered(h, r);
		uint64_t sent = resent ? h->mk_ts : r->ts;

		if (r->end == ack && !r->no_sample && !resent && sent >= latest && ts >= sent) {
			*rtt_ns = ts - sent;
			sampled = 1;
		}
		if (sent > latest)
			latest = sent;
		ring_pop(h);
	}
	if (h->rlen && ring_at(h, 0)->start < ack)	/* acked part-way */
		ring_at(h, 0)->no_sample = 1;
	return sampled;
}

/* ---- holes: sequence ranges below snd_max never seen in the capture ---- */

static void hole_add(struct half *h, int64_t l, int64_t r)
{
	if (!h->holes) {	/* most connections never have one */
		h->holes = malloc(MAX_HOLES * sizeof(*h->holes));
		if (!h->holes)
			return;	/* out of memory: the gap is not remembered */
	}
	if (h->nholes == MAX_HOLES) {	/* forget the oldest gap */
		memmove(h->holes, h->holes + 1, (MAX_HOLES - 1) * sizeof(*h->holes));
		h->nholes--;
	}
	h->holes[h->nholes][0] = l;
	h->holes[h->nholes][1] = r;
	h->nholes++;
}

/* Remove [l, r) from the holes; return how many bytes it filled. */
static int64_t hole_fill(struct half *h, int64_t l, int64_t r)
{
	int64_t filled = 0;
	int i = 0;

	while (i < h->nholes) {
		int64_t hl = h->holes[i][0], hr = h->holes[i][1];
		int64_t ol = l > hl ? l : hl, or = r < hr ? r : hr;

		if (ol >= or) {
			i++;
			continue;
		}
		filled += or - ol;
		if (ol > hl && or < hr) {		/* split in two */
			h->holes[i][1] = ol;
			hole_add(h, or, hr);
			i++;
		} else if (ol > hl) {
			h->holes[i++][1] = ol;
		} else if (or < hr) {
			h->holes[i++][0] = or;
		} else {				/* filled whole */
			memmove(h->holes + i, h->holes + i + 1,
				(h->nholes - i - 1) * sizeof(*h->holes));
			h->nholes--;
		}
	}
	return filled;
}

/* ---- retransmission episodes ---- */

static void add_event(struct tv_flows *f, const struct conn *c, int dir,
		      int kind, uint32_t frame, uint64_t ts, int64_t seq,
		      uint32_t len, uint64_t silence, uint32_t dupacks,
		      uint32_t backoff)
{
	struct tv_event *e;

	if (f->nevents == f->capevents) {
		size_t n = f->capevents ? f->capevents * 2 : 256;
		struct tv_event *v = realloc(f->events, n * sizeof(*v));

		if (!v)
			return;		/* the counters in tv_dirstats stay right */
		f->events = v;
		f->capevents = n;
	}
	e = &f->events[f->nevents++];
	e->conn = c->id;
	e->dir = (uint8_t)dir;
	e->kind = (uint8_t)kind;
	e->frame = frame;
	e->ts_ns = ts;
	e->seq = seq;
	e->len = len;
	e->silence_ns = silence;
	e->dupacks = dupacks;
	e->backoff = backoff;
}

/*
 * Why was [s, ...) sent again? After silence longer than the timer could
 * be (at least rto_min and the smoothed RTT), and from the first
 * unacknowledged byte, a timeout; otherwise, when the receiver's duplicate
 * ACKs or SACK blocks reported a loss, a fast retransmit. Resends inside an
 * episode (until the ACK passes what was outstanding when it began) add no
 * event. A segment filling a gap the capture never saw, at the receiver's
 * cumulative ACK, is a resend of data lost before the capture point: it is
 * classified too, but only three duplicate ACKs make it fast (SACK blocks
 * alone also come with plain reordering).
 * Silence counts from the last packet heard from the peer (or the
 * first packet sent, when the peer never answered: SYN timeouts) or the last
 * timeout, whichever is later: for a timeout it is the timer's value.
 */
static uint16_t classify_rexmit(struct tv_flows *f, struct conn *c, int dir,
				int64_t s, uint32_t len, uint64_t ts, uint32_t frame,
				int gap_fill)
{
	struct half *me = &c->h[dir], *peer = &c->h[!dir];
	uint64_t since = me->last_rx_ns ? me->last_rx_ns : me->st.first_ns;
	uint64_t silence;
	uint64_t thr = f->opts.rto_min_ns;
	int64_t una = peer->have_ack ? peer->last_ack : s;

	/* the timer restarts at each timeout: measure from the later of both */
	if (me->last_rto_ns > since)
		since = me->last_rto_ns;
	silence = ts > since ? ts - since : 0;
	if (me->srtt_us * 1000.0 > (double)thr)
		thr = (uint64_t)(me->srtt_us * 1000.0);
	if (silence >= thr && s <= una) {
		add_event(f, c, dir, 1, frame, ts, s, len, silence,
			  peer->dup_run, me->backoff);
		me->last_rto_ns = ts;
		me->backoff++;
		me->st.rto_events++;
		me->in_recovery = 1;
		me->recovery_point = me->snd_max;
		return TV_EV_TIMEOUT_RETX;
	}
	if (!me->in_recovery &&
	    (peer->dup_run >= 3 || (!gap_fill && peer->sacked_hi > s))) {
		add_event(f, c, dir, 2, frame, ts, s, len, silence,
			  peer->dup_run, me->backoff);
		me->st.fast_retransmits++;
		me->in_recovery = 1;
		me->recovery_point = me->snd_max;
		return TV_EV_FAST_RETX;
	}
	return 0;
}

/*
 * A keepalive resends the last byte already acknowledged (RFC 9293
 * 3.8.4), with at most that one byte and nothing outstanding: it repeats a
 * byte but is no loss recovery.
 */
static int is_keepalive(const struct half *me, const struct half *peer,
			const struct tv_segment *seg, int64_t s)
{
	return seg->payload <= 1 && !(seg->flags & (TV_SYN | TV_FIN)) &&
	       peer->have_ack && peer->last_ack == me->snd_max && s == me->snd_max - 1;
}

/* ---- the sequence space a segment occupies, from the sender's side ---- */

static void data_counters(struct tv_dirstats *st, const struct tv_segment *seg,
			  int64_t ds, uint64_t ts)
{
	int64_t de = ds + seg->payload;

	st->data_packets++;
	st->data_bytes += seg->payload;
	if (seg->payload > st->seg_max)
		st->seg_max = seg->payload;
	if (seg->payload < st->seg_min)
		st->seg_min = seg->payload;
	if (seg->captured_payload < seg->payload)
		st->truncated++;
	if (!st->data_first_ns)
		st->data_first_ns = ts;
	st->data_last_ns = ts;
	if (seg->flags & TV_PSH)
		st->pushed++;
	if (seg->flags & TV_URG)
		st->urgent++;
	if (st->data_packets == 1 || ds < st->stream_first)
		st->stream_first = ds;
	if (st->data_packets == 1 || de > st->stream_last)
		st->stream_last = de;
}

/*
 * Sort the segment's sequence range [s, end) - SYN and FIN take one number
 * each - into new bytes, bytes filling a gap the capture had not seen
 * (out of order) and bytes seen before (retransmitted).
 */
static uint16_t sender_seq(struct tv_flows *f, struct conn *c, int dir,
			   const struct tv_segment *seg, int64_t s, uint64_t ts,
			   uint32_t frame)
{
	struct half *me = &c->h[dir], *peer = &c->h[!dir];
	struct tv_dirstats *st = &me->st;
	int syn = !!(seg->flags & TV_SYN), fin = !!(seg->flags & TV_FIN);
	int64_t end = s + syn + seg->payload + fin;
	int64_t old_end = me->have_seq ? me->snd_max : s;
	int64_t fresh = 0, again = 0;
	uint16_t ev = 0;

	if (seg->payload)
		data_counters(st, seg, s + syn, ts);
	if (end == s)
		return 0;

	/*
	 * The peer's window was closed: a window probe. It goes to no
	 * retransmission or reordering count and adds no unique bytes.
	 */
	if (!syn && peer->st.packets && peer->win_last == 0) {
		st->zwnd_probes++;
		st->zwnd_probe_bytes += seg->payload;
		return TV_EV_WIN_PROBE;
	}

	if (s > old_end) {
		hole_add(me, old_end, s);
		st->missed_bytes += (uint64_t)(s - old_end);
		ev |= TV_EV_MISSED;
	}
	if (s < old_end) {
		int64_t ov_end = end < old_end ? end : old_end;
		int64_t filled = hole_fill(me, s, ov_end);

		again = ov_end - s - filled;
		fresh += filled;
		if (filled) {
			/* seen after all: missed are the bytes never seen */
			st->missed_bytes -= (uint64_t)filled;
			ring_mark_after(me, ov_end);
			if (filled == ov_end - s)	/* a pure gap fill: time it too */
				ring_insert(me, ring_find(me, s), s, ov_end, ts);
			if (end < old_end) {	/* it fills a gap below later data */
				st->ooo_packets++;
				ev |= TV_EV_OOO;
			}
			if (again <= 0 && peer->have_ack && s <= peer->last_ack)
				ev |= classify_rexmit(f, c, dir, s, seg->payload, ts, frame, 1);
		}
	}
	if (end > old_end)
		fresh += end - (s > old_end ? s : old_end);

	/* unique bytes are payload: leave out the SYN and FIN numbers if new */
	if (syn && s >= old_end)
		fresh--;
	if (fin && end - 1 >= old_end)
		fresh--;
	if (fresh > 0)
		st->unique_bytes += (uint64_t)fresh;

	if (again > 0) {
		st->rexmit_packets++;
		st->rexmit_bytes += (uint64_t)again;
		ev |= TV_EV_RETRANS;
		ring_mark_rexmit(me, s, old_end, ts);
		if (is_keepalive(me, peer, seg, s))
			ev |= TV_EV_KEEPALIVE;
		else
			ev |= classify_rexmit(f, c, dir, s, seg->payload, ts, frame, 0);
	}
	if (end > old_end || !me->have_seq) {
		ring_insert(me, me->rlen, s > old_end ? s : old_end, end, ts);
		me->snd_max = end;
		me->have_seq = 1;
	}
	return ev;
}

/* ---- the segment's ACK, window and SACK blocks, about the peer's data ---- */

static void sack_counters(struct conn *c, int dir, const struct tv_segment *seg,
			  struct tv_pkt_result *out)
{
	struct half *me = &c->h[dir], *peer = &c->h[!dir];
	int64_t a = out->ack;
	int k;

	for (k = 0; k < seg->nsack; k++) {
		out->sack[k][0] = rel(peer, seg->sack[k][0]);
		out->sack[k][1] = rel(peer, seg->sack[k][1]);
		if (out->sack[k][1] > me->sacked_hi && out->sack[k][0] >= a)
			me->sacked_hi = out->sack[k][1];
	}
	if (!seg->nsack || (seg->flags & TV_RST))
		return;
	me->st.sack_packets++;
	me->st.sack_blocks += seg->nsack;
	if (seg->nsack > me->st.max_sack_blocks)
		me->st.max_sack_blocks = seg->nsack;
	/* D-SACK (RFC 2883): the first block is below the ACK or overlaps the second */
	if (out->sack[0][1] <= a ||
	    (seg->nsack > 1 && out->sack[0][0] < out->sack[1][1] &&
	     out->sack[0][1] > out->sack[1][0]))
		me->st.dsack_packets++;
}

static void rtt_sample(struct half *sender, uint64_t rtt_ns, int64_t ack)
{
	struct tv_dirstats *ps = &sender->st;
	double v = rtt_ns / 1e3;	/* µs, keeping a nanosecond capture's precision */

	if (!ps->rtt_n || v < ps->rtt_min)
		ps->rtt_min = v;
	if (v > ps->rtt_max)
		ps->rtt_max = v;
	ps->rtt_n++;
	ps->rtt_sum += v;
	ps->rtt_sumsq += v * v;
	if (ack == 1 && sender->syn_seen && ps->syn == 1)
		ps->rtt_3whs = v;	/* the SYN's own RTT, if it was sent once */
	sender->srtt_us = sender->srtt_us ? 0.875 * sender->srtt_us + 0.125 * v : v;
}

static uint16_t receiver_ack(struct conn *c, int dir, const struct tv_segment *seg,
			     uint32_t win, uint64_t ts, struct tv_pkt_result *out)
{
	struct half *me = &c->h[dir], *peer = &c->h[!dir];
	int64_t a = out->ack;
	int rst = !!(seg->flags & TV_RST);
	uint16_t ev = 0;
	uint64_t rtt_ns;

	me->st.ack_packets++;
	if (!rst && !seg->payload && !(seg->flags & (TV_SYN | TV_FIN)))
		me->st.pure_acks++;
	sack_counters(c, dir, seg, out);

	/*
	 * A duplicate ACK: no data, no SYN, FIN or RST (RFC 5681), the same
	 * ACK number and window as this side's previous ACK, acknowledging
	 * what the peer has sent once it sent more than its SYN. As in
	 * tcptrace, data need not be outstanding (docs/analysis.md).
	 */
	if (!seg->payload && !(seg->flags & (TV_SYN | TV_FIN | TV_RST)) && me->have_ack &&
	    a == me->last_ack && win == me->win_last && peer->have_seq &&
	    a <= peer->snd_max && peer->st.packets > peer->st.syn) {
		ev |= TV_EV_DUPACK;
		peer->st.dupacks++;
		if (++me->dup_run == 3)
			peer->st.triple_dupacks++;
	} else if (!rst && (!me->have_ack || a != me->last_ack)) {
		if (!me->have_ack || a > me->last_ack) {
			peer->backoff = 0;
			if (peer->in_recovery && a >= peer->recovery_point)
				peer->in_recovery = 0;
			me->sacked_hi = 0;
		}
		me->have_ack = 1;
		me->last_ack = a;
		me->dup_run = 0;
	}

	if (ring_ack(peer, a, ts, &rtt_ns)) {
		rtt_sample(peer, rtt_ns, a);
		out->has_rtt = 1;
		out->rtt_us = rtt_ns / 1000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(rtt_ns / 1000);
	}
	if (peer->st.data_packets && peer->snd_max >= a) {	/* the peer sends data */
		int64_t fl = peer->snd_max - a;

		out->has_inflight = 1;
		out->inflight = fl > UINT32_MAX ? UINT32_MAX : (uint32_t)fl;
	}
	return ev;
}

/*
 * Advertised windows: min (zero excluded), max and mean over packets with
 * ACK or SYN, not RST. The first scaled window starts the figures again,
 * leaving out the unscaled SYN's.
 */
static uint16_t window_counters(struct conn *c, int dir, const struct tv_segment *seg,
				uint32_t win, int shift)
{
	struct tv_dirstats *st = &c->h[dir].st;
	uint16_t ev = 0;

	if ((seg->flags & TV_RST) || !(seg->flags & (TV_ACK | TV_SYN)))
		return 0;
	if (shift >= 0 && win && !(seg->flags & TV_SYN) && !c->h[dir].win_scaled_seen) {
		/* the first scaled window: forget the unscaled SYN's */
		c->h[dir].win_scaled_seen = 1;
		st->win_min = UINT64_MAX;
		st->win_max = 0;
		st->win_sum = 0;
		st->win_n = 0;
	}
	if (win > st->win_max)
		st->win_max = win;
	if (win && win < st->win_min)
		st->win_min = win;
	st->win_sum += win;
	st->win_n++;
	if ((seg->flags & TV_ACK) && win == 0) {
		st->zero_win_adv++;
		ev |= TV_EV_ZERO_WIN;
	}
	return ev;
}

/* Copies a capture device made: same bytes, a moment apart. */
static int hardware_dup(struct half *h, const struct tv_segment *seg,
			uint64_t ts, uint64_t window)
{
	int dup = window && h->have_prev && seg->seq == h->prev_seq &&
		  seg->ack == h->prev_ack && seg->payload == h->prev_len &&
		  seg->ip_id == h->prev_ipid && seg->win == h->prev_win &&
		  seg->flags == h->prev_flags && seg->family == 4 &&
		  ts - h->prev_ts < window;

	h->have_prev = 1;
	h->prev_seq = seg->seq;
	h->prev_ack = seg->ack;
	h->prev_len = seg->payload;
	h->prev_ipid = seg->ip_id;
	h->prev_win = seg->win;
	h->prev_flags = seg->flags;
	h->prev_ts = ts;
	return dup;
}

/*
 * tcptrace's hardware duplicates: the sequence number and IP ID of one of the
 * direction's last COPIES_KEPT IPv4 segments (zero fields never match). Only
 * counted, for the warning; hardware_dup() decides what is dropped.
 */
static int seen_copy(struct half *h, const struct tv_segment *seg)
{
	uint32_t seq = seg->seq;
	uint16_t id = seg->ip_id;
	unsigned int i, hit = 0;

	if (seg->family != 4)
		return 0;
	if (seq && id) {
		for (i = 0; i < COPIES_KEPT; i++)	/* no branch: the compiler unrolls it */
			hit |= (h->copy_seq[i] == seq) & (h->copy_id[i] == id);
		if (hit)
			return 1;
	}
	h->copy_seq[h->copy_ix] = seq;
	h->copy_id[h->copy_ix] = id;
	h->copy_ix = (h->copy_ix + 1) % COPIES_KEPT;
	return 0;
}

static void syn_options(struct conn *c, int dir, const struct tv_segment *seg)
{
	struct half *me = &c->h[dir];

	me->st.syn++;
	if (!me->syn_seen) {
		me->syn_seen = 1;
		me->isn = seg->seq;
	}
	if (!me->have_base) {	/* relative 0 is the SYN, data starts at 1 */
		me->have_base = 1;
		me->base = seg->seq;
	}
	if (seg->has_mss)
		me->st.mss = seg->mss;
	if (seg->has_wscale)
		me->st.wscale_offered = seg->wscale > WSCALE_MAX ? WSCALE_MAX : seg->wscale;
	if (seg->sack_permitted)
		me->st.sack_ok = 1;
	if (seg->has_ts)
		me->st.ts_ok = 1;
}

/* RFC 7323: scaling applies once both SYNs offered it, never to SYNs. */
static int window_shift(const struct conn *c, int dir)
{
	if (c->h[0].st.wscale_offered < 0 || c->h[1].st.wscale_offered < 0)
		return -1;
	return c->h[dir].st.wscale_offered;
}

static int sweep(struct tv_flows *f, uint64_t now);

int tv_flows_add(struct tv_flows *f, uint64_t ts, uint32_t frame,
		 const struct tv_segment *seg, struct tv_pkt_result *out)
{
	struct conn *c;
	struct half *me, *peer;
	struct tv_dirstats *st;
	int dir, shift, was_ended;
	uint32_t win;

	if (sweep(f, ts) < 0)
		return -1;
	c = lookup(f, seg, ts, &dir);
	if (!c)
		return f->full ? TV_FLOWS_FULL : -1;
	me = &c->h[dir];
	peer = &c->h[!dir];
	st = &me->st;
	/* the SACK rows only when there are any: zeroing all 112 bytes is a
	 * tenth of this function's time */
	memset(out, 0, offsetof(struct tv_pkt_result, sack));
	if (seg->nsack)
		memset(out->sack, 0, sizeof(out->sack));
	out->conn = c->id;
	out->dir = (uint8_t)dir;

	c->packets++;
	c->last_ns = ts;
	st->packets++;
	if (!st->first_ns)
		st->first_ns = ts;
	st->last_ns = ts;

	if (seg->flags & TV_SYN)
		syn_options(c, dir, seg);
	was_ended = ended(c);
	if (seg->flags & TV_FIN) {
		st->fin++;
		me->fin_seen = 1;
	}
	if (seg->flags & TV_RST) {
		st->rst++;
		c->reset = 1;
	}
	st->ect_packets += seg->ecn == 1 || seg->ecn == 2;
	st->ce_packets += seg->ecn == 3;
	st->ece_packets += !!(seg->flags & TV_ECE);
	st->cwr_packets += !!(seg->flags & TV_CWR);
	f->ended += !was_ended && ended(c);

	shift = window_shift(c, dir);
	if (!(seg->flags & (TV_ACK | TV_SYN)))
		win = 0;	/* the field means nothing without ACK */
	else if (shift > 0 && !(seg->flags & TV_SYN))
		win = (uint32_t)((uint64_t)seg->win << shift > UINT32_MAX ?
				 UINT32_MAX : (uint64_t)seg->win << shift);
	else
		win = seg->win;
	out->win = win;
	out->seq = rel(me, seg->seq);
	out->ack = (seg->flags & TV_ACK) ? rel(peer, seg->ack) : 0;

	st->hw_copies += seen_copy(me, seg);
	if (hardware_dup(me, seg, ts, f->opts.hwdup_ns)) {
		st->hw_dups++;
		out->ev = TV_EV_HW_DUP;
		return 0;
	}

	out->ev |= window_counters(c, dir, seg, win, shift);
	out->ev |= sender_seq(f, c, dir, seg, out->seq, ts, frame);
	if (seg->flags & TV_ACK)
		out->ev |= receiver_ack(c, dir, seg, win, ts, out);
	if (!(seg->flags & TV_RST))
		me->win_last = win;
	peer->last_rx_ns = ts;
	return 0;
}

size_t tv_flows_count(const struct tv_flows *f)
{
	return f->nconns;
}

static void conn_info(const struct conn *c, struct tv_conn_info *out);

int tv_flows_info(const struct tv_flows *f, size_t i, struct tv_conn_info *out)
{
	if (!f->conns[i])
		return 0;
	conn_info(f->conns[i], out);
	return 1;
}

/* Take @c's slot out of the open addressing table, if it holds it (an
 * older connection on a reused 4-tuple has none), shifting back the
 * entries after it that would no longer be found. */
static void unslot(struct tv_flows *f, const struct conn *c)
{
	size_t mask = f->nslots - 1, i, j, home;

	i = hash_key(&c->key) & mask;
	while (f->slots[i] != c->id) {
		if (!f->slots[i])
			return;
		i = (i + 1) & mask;
	}
	for (j = (i + 1) & mask; f->slots[j]; j = (j + 1) & mask) {
		home = hash_key(&f->conns[f->slots[j] - 1]->key) & mask;
		/* the entry at j may move to i unless its home lies in (i, j] */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			f->slots[i] = f->slots[j];
			i = j;
		}
	}
	f->slots[i] = 0;
}

static int retire(struct tv_flows *f, size_t i)
{
	struct conn *c = f->conns[i];

	if (f->ngone == f->capgone) {
		size_t n = f->capgone ? f->capgone * 2 : 1024;
		struct tv_conn_info *v = realloc(f->gone, n * sizeof(*v));

		if (!v)
			return -1;
		f->gone = v;
		f->capgone = n;
	}
	conn_info(c, &f->gone[f->ngone++]);
	unslot(f, c);
	if (f->last == c)
		f->last = NULL;
	f->conns[i] = NULL;
	f->live--;
	f->ended--;
	free_conn(c);
	return 0;
}

/* Retire the ended connections silent since @now - @quiet. */
static int retire_ended(struct tv_flows *f, uint64_t now, uint64_t quiet)
{
	size_t i;

	while (f->oldest < f->nconns && !f->conns[f->oldest])
		f->oldest++;
	for (i = f->oldest; i < f->nconns; i++) {
		const struct conn *c = f->conns[i];

		if (!c || !ended(c) || c->last_ns + quiet > now)
			continue;
		if (retire(f, i) < 0)
			return -1;
	}
	return 0;
}

/* When more than live_soft connections are live, a quarter of them ended,
 * retire those silent for TV_RETIRE_NS; at most once every TV_RETIRE_NS / 8
 * of capture time (a burst retires what ended in that time, which waits to
 * be stored): the walk over the connections costs little a packet, as a
 * connection stays silent only without packets. */
static int sweep(struct tv_flows *f, uint64_t now)
{
	if (!f->opts.live_soft || f->live <= f->opts.live_soft ||
	    f->ended < f->opts.live_soft / 4 || now < f->next_sweep)
		return 0;
	f->next_sweep = now + TV_RETIRE_NS / 8;
	return retire_ended(f, now, TV_RETIRE_NS);
}

size_t tv_flows_ngone(const struct tv_flows *f)
{
	return f->ngone;
}

const struct tv_conn_info *tv_flows_gone(const struct tv_flows *f)
{
	return f->gone;
}

void tv_flows_gone_clear(struct tv_flows *f)
{
	f->ngone = 0;
	if (f->capgone > 65536) {	/* a burst of retirements: give it back */
		free(f->gone);
		f->gone = NULL;
		f->capgone = 0;
	}
}

static void conn_info(const struct conn *c, struct tv_conn_info *out)
{
	int d;

	memset(out, 0, sizeof(*out));
	out->id = c->id;
	out->family = c->key.family;
	memcpy(out->a_addr, c->a_addr, 16);
	memcpy(out->b_addr, c->b_addr, 16);
	out->a_port = c->a_port;
	out->b_port = c->b_port;
	out->first_ns = c->first_ns;
	out->last_ns = c->last_ns;
	out->packets = c->packets;
	out->a_isn = c->h[0].have_base ? c->h[0].base : 0;
	out->b_isn = c->h[1].have_base ? c->h[1].base : 0;
	out->handshake = c->h[0].syn_seen && c->h[1].syn_seen;
	out->reset = c->reset;
	out->closed = c->reset || (c->h[0].fin_seen && c->h[1].fin_seen);
	for (d = 0; d < 2; d++) {
		const struct half *h = &c->h[d];

		out->dir[d] = h->st;
		
		out->dir[d].wscale = window_shift(c, d);
		if (out->dir[d].win_min == UINT64_MAX)
			out->dir[d].win_min = 0;
		if (out->dir[d].seg_min == UINT64_MAX)
			out->dir[d].seg_min = 0;
	}
}

size_t tv_flows_nevents(const struct tv_flows *f)
{
	return f->nevents;
}

const struct tv_event *tv_flows_event(const struct tv_flows *f, size_t i)
{
	return &f->events[i];
}
