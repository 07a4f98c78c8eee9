// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_pcap.c - libFuzzer target for a whole pass over a capture file: the
 * input is the file (pcap or pcapng), read by the scanner into small packet
 * batches as `tcpvar analyze` reads it, twice: from its bytes in memory (a
 * classic pcap file's records read in place) and as a stream through
 * libpcap. The two passes must agree.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "columns.h"
#include "scan.h"

/* One pass over the scan in tiny batches; what it found, to compare. */
struct outcome {
	int status;
	uint64_t frames, tcp, not_tcp, malformed, first_ns, last_ns;
	size_t conns;
};

static struct outcome scan(struct tv_scan *s)
{
	struct outcome o;
	struct tv_conn_info info;
	struct tv_batch *b;
	size_t i;

	int status;

	do {
		b = tv_batch_new(7);	/* tiny batches: many batch boundaries */
		if (!b)
			abort();
		status = tv_scan_step(s, b, 7);
		tv_batch_free(b);
		tv_flows_gone_clear(s->flows);	/* taken, as the module's gone() */
	} while (status == TV_SCAN_MORE);
	for (i = 0; i < tv_flows_count(s->flows); i++)
		tv_flows_info(s->flows, i, &info);
	o = (struct outcome){ status, s->frames, s->tcp, s->not_tcp, s->malformed,
			      s->first_ns, s->last_ns, tv_flows_count(s->flows) };
	tv_scan_close(s);
	return o;
}

/*
 * The file read as `tcpvar analyze` reads a file (from its bytes in memory:
 * a classic pcap file without libpcap's read loop) and as it reads a pipe
 * (libpcap throughout): both must find the same.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* ended connections retire beyond two open ones: the sweep, the slot
	 * removal and the retired statistics run on every input */
	struct tv_flow_opts opts = { .rto_min_ns = 200000000ull, .live_soft = 2 };
	struct outcome direct, piped;
	struct tv_scan s;
	FILE *fp;
	int opened;

	opened = tv_scan_open_buffer(&s, data, size, &opts) == 0;
	if (opened)
		direct = scan(&s);
	fp = fmemopen((void *)data, size, "rb");
	if (!fp)
		return 0;
	if (tv_scan_open_fp(&s, fp, &opts) < 0) {	/* the scanner closed the stream */
		if (opened)
			abort();
		return 0;
	}
	if (!opened)
		abort();
	piped = scan(&s);
	if (direct.status != piped.status || direct.frames != piped.frames ||
	    direct.tcp != piped.tcp || direct.not_tcp != piped.not_tcp ||
	    direct.malformed != piped.malformed || direct.first_ns != piped.first_ns ||
	    direct.last_ns != piped.last_ns || direct.conns != piped.conns)
		abort();
	return 0;
}
