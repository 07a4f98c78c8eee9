// SPDX-License-Identifier: GPL-2.0-only
/* scan.c - the libpcap read loop that feeds decode, flows and batches. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decode.h"
#include "direct.h"
#include "scan.h"

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
	s->flows = tv_flows_new(opts);
	if (!s->flows) {
		snprintf(s->errbuf, sizeof(s->errbuf), "out of memory");
		tv_scan_close(s);
		return -1;
	}
	return 0;
}

#define READ_BUFFER (1 << 20)	/* fewer, larger reads than stdio's default */

/* The file mapped, or NULL: a pipe, an empty file, no room for a mapping. */
static void *map_file(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	void *p = NULL;

	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size > 0) {
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			p = NULL;
		} else {
			madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
			*len = (size_t)st.st_size;
		}
	}
	close(fd);
	return p;
}

int tv_scan_open(struct tv_scan *s, const char *path, const struct tv_flow_opts *opts)
{
	size_t len = 0;
	void *map = map_file(path, &len);
	FILE *fp;
	int rc;

	if (map) {
		rc = tv_scan_open_buffer(s, map, len, opts);
		if (rc < 0) {
			munmap(map, len);
		} else {
			s->map = map;
			s->map_len = len;
		}
		return rc;
	}
	fp = fopen(path, "rb");
	if (!fp) {
		memset(s, 0, sizeof(*s));
		snprintf(s->errbuf, sizeof(s->errbuf), "%s: %s", path, strerror(errno));
		return -1;
	}
	setvbuf(fp, NULL, _IOFBF, READ_BUFFER);
	return tv_scan_open_fp(s, fp, opts);	/* closes fp on failure */
}

/*
 * libpcap checks the header through a stream over the buffer (no read()
 * calls, no copies); the records are then read from the buffer directly
 * (direct.c) where the format allows.
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
		/* libpcap was opened for nanoseconds: tv_usec holds ns */
		ts = (uint64_t)h->ts.tv_sec * 1000000000ull + (uint64_t)h->ts.tv_usec;
		if (s->frames == 1 || ts < s->first_ns)
			s->first_ns = ts;
		tv_series_record(&s->series, ts);
		if (ts > s->last_ns)
			s->last_ns = ts;

		switch (tv_decode(s->dlt, data, h->caplen, h->len, &it->seg)) {
		case TV_OK:
			s->tcp++;
			s->options_cut += it->seg.options_cut;
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

/* Run the analysis on one segment and add its row to @b. */
static int analyse(struct tv_scan *s, struct tv_batch *b, const struct tv_item *it)
{
	struct tv_pkt_result res;

	if (tv_flows_add(s->flows, it->ts, it->frame, &it->seg, &res) < 0 ||
	    tv_series_add(&s->series, res.conn, res.dir, it->ts, it->seg.payload,
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

int tv_scan_step(struct tv_scan *s, struct tv_batch *b, uint64_t max_segments)
{
	struct tv_item local;
	uint64_t budget = max_segments;

	if (s->status != TV_SCAN_MORE)
		return s->status;
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
		if (analyse(s, b, &local) < 0) {
			snprintf(s->errbuf, sizeof(s->errbuf), "out of memory");
			s->status = TV_SCAN_ERROR;
			return s->status;
		}
	}
	return TV_SCAN_MORE;
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
