// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_pcap.c - libFuzzer target for a whole pass over a capture file: the
 * input is the file (pcap or pcapng), read through libpcap by the scanner
 * into small packet batches, as `tcpvar analyze` does.
 */
#include <stdint.h>
#include <stdio.h>

#include "columns.h"
#include "scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tv_flow_opts opts = { 200000000ull, 0 };
	struct tv_scan s;
	struct tv_conn_info info;
	struct tv_batch *b;
	FILE *fp;
	size_t i;
	int rc;

	fp = fmemopen((void *)data, size, "rb");
	if (!fp)
		return 0;
	if (tv_scan_open_fp(&s, fp, &opts) < 0)
		return 0;	/* the scanner closed the stream */
	do {
		b = tv_batch_new(7);	/* tiny batches: many batch boundaries */
		if (!b)
			break;
		rc = tv_scan_step(&s, b, 7);
		tv_batch_free(b);
	} while (rc == TV_SCAN_MORE);
	for (i = 0; i < tv_flows_count(s.flows); i++)
		tv_flows_info(s.flows, i, &info);
	tv_scan_close(&s);
	return 0;
}
