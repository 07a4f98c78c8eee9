// SPDX-License-Identifier: GPL-2.0-only
/* scan.c - the libpcap read loop that feeds decode, flows and batches. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decode.h"
#include "direct.h"
#include "scan.h"

/*
 * A file that shrinks while it is read (still being written, rotated,
 * truncated): its records are read where they lie in the mapping (direct.c,
 * decode.c), and touching a page past the file's new end raises SIGBUS,
 * which would end the process. Checking the size before each read cannot
 * close the window between check and read, and pread would copy every
 * record, which the mapping is there to avoid. So the reads of the mapping
 * run under a guard: a SIGBUS at an address inside the mapping the thread
 * is reading jumps back out of the read, and the scan ends with an error.
 * Only tcpvar's own code reads the mapping (libpcap reads the file through
 * a stream of its own), so the jump never leaves a lock held or libpcap
 * half-way. Any other SIGBUS goes on to whatever handled it before.
 */
struct bus_guard {
	sigjmp_buf env;
	const char *lo, *hi;	/* the mapping being read */
};

static __thread struct bus_guard *volatile bus_guard
	__attribute__((tls_model("initial-exec")));	/* read in the handler */
static struct sigaction bus_previous;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *info, void *ctx)
{
	struct bus_guard *g = bus_guard;
	const char *at = info->si_addr;

	/* si_code > 0: a fault of this thread, not a signal someone sent */
	if (g && info->si_code > 0 && at >= g->lo && at < g->hi)
		siglongjmp(g->env, 1);
	if (bus_previous.sa_flags & SA_SIGINFO) {
		bus_previous.sa_sigaction(sig, info, ctx);
	} else if (bus_previous.sa_handler != SIG_DFL &&
		   bus_previous.sa_handler != SIG_IGN) {
		bus_previous.sa_handler(sig);
	} else {
		/* a fault happens again, a sent signal is sent again: as before */
		sigaction(SIGBUS, &bus_previous, NULL);
		if (info->si_code <= 0)
			raise(sig);
	}
}

static void install_bus_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &bus_previous);
}

/* Guard the reads of @s's mapping, after sigsetjmp(g->env, 1) said 0. */
static void guard_on(struct bus_guard *g, const struct tv_scan *s)
{
	g->lo = s->map;
	g->hi = (const char *)s->map + s->map_len;
	atomic_signal_fence(memory_order_seq_cst);	/* the range before the guard */
	bus_guard = g;
}

static void guard_off(void)
{
	bus_guard = NULL;
}

static int cut_short(struct tv_scan *s)
{
	snprintf(s->errbuf, sizeof(s->errbuf),
		 "the file was cut short while it was read (is it still being written?)");
	s->status = TV_SCAN_ERROR;
	return s->status;
}

/* Whether the mapped file is now shorter than when it was mapped. */
static int shrank(struct tv_scan *s)
{
	struct stat st;

	return !fstat(fileno(pcap_file(s->pcap)), &st) &&
	       (size_t)st.st_size < s->map_len;
}

static int scan_start(struct tv_scan *s, pcap_t *pcap, const char *err,
		      const struct tv_flow_opts *opts)
{
	s->pcap = pcap;
	if (!s->pcap) {
		snprintf(s->errbuf, sizeof(s->errbuf), "%s", err);
		return -1;
	}
	s->dlt = pcap_datalink(s->pcap);
	if (!tv_dlt_supported(s->dlt)) {
		const char *name = pcap_datalink_val_to_name(s->dlt);

		snprintf(s->errbuf, sizeof(s->errbuf),
			 "unsupported link type %d (%s)", s->dlt,
			 name ? name : "unknown");
		tv_scan_close(s);
		return -1;
	}
	tv_series_init(&s->series, opts->interval_ns);
	s->max_conns = opts->max_conns;
	s->flows = tv_flows_new(opts);
	if (!s->flows) {
		snprintf(s->errbuf, sizeof(s->errbuf), "out of memory");
		tv_scan_close(s);
		return -1;
	}
	return 0;
}

#define READ_BUFFER (1 << 20)	/* fewer, larger reads than stdio's default */

/* The file open on @fd mapped, or NULL: a pipe, an empty file, no room. */
static void *map_file(int fd, size_t *len)
{
	struct stat st;
	void *p = NULL;

	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size > 0) {
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			p = NULL;
		} else {
			madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
			*len = (size_t)st.st_size;
		}
	}
	return p;
}

/* Start reading records in place, under the guard: the file may be
 * shorter already. 0, or -1 with the message in s->errbuf. */
static int start_direct(struct tv_scan *s)
{
	struct bus_guard g;

	if (sigsetjmp(g.env, 1)) {
		guard_off();
		cut_short(s);
		return -1;
	}
	guard_on(&g, s);
	tv_direct_start(&s->direct, s->pcap, s->map, s->map_len);
	guard_off();
	return 0;
}

/*
 * libpcap opens and checks the file through a stream; when the file can be
 * mapped, its records are then read from the mapping directly (direct.c)
 * where the format allows, and libpcap's stream takes over from there when
 * it does not.
 */
int tv_scan_open(struct tv_scan *s, const char *path, const struct tv_flow_opts *opts)
{
	int fd = open(path, O_RDONLY);
	size_t len = 0;
	void *map;
	FILE *fp;

	if (fd < 0 || !(fp = fdopen(fd, "rb"))) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		memset(s, 0, sizeof(*s));
		snprintf(s->errbuf, sizeof(s->errbuf), "%s: %s", path, strerror(err));
		return -1;
	}
	setvbuf(fp, NULL, _IOFBF, READ_BUFFER);
	map = map_file(fd, &len);
	if (tv_scan_open_fp(s, fp, opts) < 0) {	/* closes fp on failure */
		if (map)
			munmap(map, len);
		return -1;
	}
	if (!map)
		return 0;
	s->map = map;
	s->map_len = len;
	pthread_once(&bus_once, install_bus_handler);
	if (start_direct(s) < 0) {
		tv_scan_close(s);
		return -1;
	}
	return 0;
}

/*
 * libpcap checks the header through a stream over the buffer (no read()
 * calls, no copies); the records are then read from the buffer directly
 * (direct.c) where the format allows. A buffer in memory cannot shrink: no
 * guard is needed.
 */
int tv_scan_open_buffer(struct tv_scan *s, const void *data, size_t len,
			const struct tv_flow_opts *opts)
{
	FILE *fp = fmemopen((void *)data, len, "r");
	int rc;

	if (!fp) {
		memset(s, 0, sizeof(*s));
		snprintf(s->errbuf, sizeof(s->errbuf), "cannot read the file: %s", strerror(errno));
		return -1;
	}
	rc = tv_scan_open_fp(s, fp, opts);	/* closes fp on failure */
	if (rc == 0)
		tv_direct_start(&s->direct, s->pcap, data, len);
	return rc;
}

#define SEEK_FAILED (-100)

/* The next record, as pcap_next_ex returns it (or SEEK_FAILED). */
static int next_record(struct tv_scan *s, struct pcap_pkthdr **h, const u_char **data)
{
	if (s->direct.on) {
		int rc = tv_direct_next(&s->direct, h, data);

		if (rc)
			return rc;
		s->direct.on = 0;	/* libpcap goes on from this record */
		if (fseek(pcap_file(s->pcap), (long)s->direct.off, SEEK_SET) < 0)
			return SEEK_FAILED;
	}
	return pcap_next_ex(s->pcap, h, data);
}

long tv_scan_position(struct tv_scan *s)
{
	FILE *fp;

	if (!s->pcap)
		return -1;
	if (s->direct.on)
		return (long)s->direct.off;
	fp = pcap_file(s->pcap);
	return fp ? ftell(fp) : -1;	/* -1 on a pipe */
}

int tv_scan_open_fp(struct tv_scan *s, FILE *fp, const struct tv_flow_opts *opts)
{
	char err[PCAP_ERRBUF_SIZE] = "";

	pcap_t *pcap;

	memset(s, 0, sizeof(*s));
	pcap = pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_NANO, err);
	if (!pcap)
		fclose(fp);	/* refused: libpcap left the stream to us */
	return scan_start(s, pcap, err, opts);
}

static void append_row(struct tv_batch *b, const struct tv_segment *seg,
		       const struct tv_pkt_result *r, uint64_t frame,
		       uint64_t ts, uint32_t wire_len)
{
	size_t i = b->n;
	int32_t off = b->sack_off[i];
	int k;

	b->frame[i] = (uint32_t)frame;
	b->ts_ns[i] = (int64_t)ts;
	b->conn[i] = r->conn;
	b->dir[i] = r->dir;
	b->seq[i] = r->seq;
	b->ack[i] = r->ack;
	b->flags[i] = seg->flags;
	b->win[i] = r->win;
	b->len[i] = seg->payload;
	b->wire_len[i] = wire_len;
	b->ev[i] = r->ev;
	if (seg->has_ts) {
		b->tsval[i] = seg->tsval;
		b->tsecr[i] = seg->tsecr;
		tv_set_valid(b->valid_tsval, i);
		tv_set_valid(b->valid_tsecr, i);
	}
	if (r->has_rtt) {
		b->rtt_us[i] = r->rtt_us;
		tv_set_valid(b->valid_rtt_us, i);
	}
	if (r->has_inflight) {
		b->inflight[i] = r->inflight;
		tv_set_valid(b->valid_inflight, i);
	}
	if (seg->has_mss) {
		b->mss[i] = seg->mss;
		tv_set_valid(b->valid_mss, i);
	}
	if (seg->has_wscale) {
		b->wscale[i] = seg->wscale;
		tv_set_valid(b->valid_wscale, i);
	}
	if (seg->ngwa_state == 1) {
		b->ngwa_window[i] = seg->ngwa;
		tv_set_valid(b->valid_ngwa_window, i);
	}
	for (k = 0; k < seg->nsack; k++) {
		b->sack_l[off] = r->sack[k][0];
		b->sack_r[off] = r->sack[k][1];
		off++;
	}
	b->sack_off[i + 1] = off;
	b->n++;
}

#define TS_SEC_MAX	9223372035ull	/* the last second whose ns fit int64 */

/*
 * A record's time in ns since 1970 (libpcap was opened for nanoseconds:
 * tv_usec holds ns); 0 when it is before 1970 or after 2262, which the
 * store's int64 times cannot hold.
 */
static int time_ns(const struct pcap_pkthdr *h, uint64_t *ts)
{
	if (h->ts.tv_sec < 0 || h->ts.tv_usec < 0 ||
	    (uint64_t)h->ts.tv_sec > TS_SEC_MAX)
		return 0;
	*ts = (uint64_t)h->ts.tv_sec * 1000000000ull + (uint64_t)h->ts.tv_usec;
	return *ts <= INT64_MAX;
}

/* The next TCP segment of the file, counting the other frames on the way. */
static int read_segment(struct tv_scan *s, struct tv_item *it)
{
	struct pcap_pkthdr *h;
	const u_char *data;

	for (;;) {
		int rc = next_record(s, &h, &data);
		uint64_t ts;

		if (rc == PCAP_ERROR_BREAK)
			return TV_SCAN_EOF;
		if (rc == SEEK_FAILED) {
			snprintf(s->errbuf, sizeof(s->errbuf), "cannot seek in the file: %s",
				 strerror(errno));
			return TV_SCAN_ERROR;
		}
		if (rc != 1) {
			const char *msg = pcap_geterr(s->pcap);

			snprintf(s->errbuf, sizeof(s->errbuf), "%s", msg);
			return strstr(msg, "truncated") ? TV_SCAN_TRUNCATED : TV_SCAN_ERROR;
		}
		s->frames++;
		s->captured_bytes += h->caplen;
		if (!time_ns(h, &ts)) {
			s->bad_time++;
			continue;
		}
		if (s->frames - s->bad_time == 1 || ts < s->first_ns)
			s->first_ns = ts;
		tv_series_record(&s->series, ts);
		if (ts > s->last_ns)
			s->last_ns = ts;

		switch (tv_decode(s->dlt, data, h->caplen, h->len, &it->seg)) {
		case TV_OK:
			s->tcp++;
			s->options_cut += it->seg.options_cut;
			s->ip_len_zero += it->seg.len_from_record != 0;
			s->ip_len_capped += it->seg.len_from_record == 2;
			it->ts = ts;
			it->wire_len = h->len;
			it->frame = (uint32_t)s->frames;
			return TV_SCAN_MORE;
		case TV_NOT_TCP:
			s->not_tcp++;
			break;
		case TV_FRAGMENT:
			s->fragments++;
			break;
		case TV_TOO_SHORT:
			s->too_short++;
			break;
		default:
			s->malformed++;
			break;
		}
	}
}

/* Run the analysis on one segment and add its row to @b; 0, -1 out of
 * memory, or TV_FLOWS_FULL. */
static int analyse(struct tv_scan *s, struct tv_batch *b, const struct tv_item *it)
{
	struct tv_pkt_result res;
	int rc = tv_flows_add(s->flows, it->ts, it->frame, &it->seg, &res);

	if (rc < 0)
		return rc;
	if (tv_series_add(&s->series, res.conn, res.dir, it->ts, it->seg.payload,
			  res.ev & TV_EV_RETRANS) < 0)
		return -1;
	if (b) {
		if (!tv_batch_reserve_sack(b, it->seg.nsack))
			return -1;
		append_row(b, &it->seg, &res, it->frame, it->ts, it->wire_len);
	}
	return 0;
}

#define RELEASE_STEP (64u << 20)
#define GONE_PER_STEP 16384	/* retired connections that end a step */

/* Give back the mapped pages already read: they would count as memory. */
static void release_read_pages(struct tv_scan *s)
{
	long pos = tv_scan_position(s);
	size_t upto;

	if (pos <= 0)
		return;
	upto = (size_t)pos & ~(size_t)(RELEASE_STEP - 1);
	if (upto > s->map_released) {
		madvise(s->map, upto, MADV_DONTNEED);
		s->map_released = upto;
	}
}

static int scan_step(struct tv_scan *s, struct tv_batch *b, uint64_t max_segments)
{
	struct tv_item local;
	uint64_t budget = max_segments;

	while (!b || b->n < b->cap) {
		int rc;

		if (!b && budget-- == 0)
			return TV_SCAN_MORE;
		if (s->map && !(s->tcp & 0xFFFF))
			release_read_pages(s);
		rc = read_segment(s, &local);
		if (rc != TV_SCAN_MORE) {
			s->status = rc;
			return rc;
		}
		rc = analyse(s, b, &local);
		if (rc == TV_FLOWS_FULL) {
			snprintf(s->errbuf, sizeof(s->errbuf),
				 "more than %llu TCP connections open at once (the connection limit)",
				 (unsigned long long)s->max_conns);
			s->status = TV_SCAN_ERROR;
			return s->status;
		}
		if (rc < 0) {
			snprintf(s->errbuf, sizeof(s->errbuf), "out of memory");
			s->status = TV_SCAN_ERROR;
			return s->status;
		}
		/* the retired connections go with the step: a short one when
		 * many retire keeps what waits to be stored small */
		if (tv_flows_ngone(s->flows) >= GONE_PER_STEP)
			return TV_SCAN_MORE;
	}
	return TV_SCAN_MORE;
}

int tv_scan_step(struct tv_scan *s, struct tv_batch *b, uint64_t max_segments)
{
	struct bus_guard g;
	int rc;

	if (s->status != TV_SCAN_MORE)
		return s->status;
	if (!s->map)
		return scan_step(s, b, max_segments);
	if (sigsetjmp(g.env, 1)) {	/* SIGBUS: a page past the file's new end */
		guard_off();
		return cut_short(s);
	}
	guard_on(&g, s);
	rc = scan_step(s, b, max_segments);
	guard_off();
	/* cut at a page's end or a record's, it may end without a fault */
	if (rc != TV_SCAN_MORE && rc != TV_SCAN_ERROR && shrank(s))
		return cut_short(s);
	return rc;
}

void tv_scan_close(struct tv_scan *s)
{
	if (s->pcap)
		pcap_close(s->pcap);	/* closes the stream before its mapping goes */
	s->pcap = NULL;
	if (s->map)
		munmap(s->map, s->map_len);
	s->map = NULL;
	tv_flows_free(s->flows);
	s->flows = NULL;
	tv_series_free(&s->series);
}
