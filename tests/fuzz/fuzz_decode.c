// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_decode.c - libFuzzer target for the frame decoder and the
 * per-connection analysis: the input is a link-type selector followed by
 * frames, each prefixed by a 2-byte length and a 2-byte time step, all fed
 * through one tv_flows so that sequences of segments reach the state machine.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "flows.h"

static const int dlts[] = {
	TV_DLT_NULL, TV_DLT_EN10MB, TV_DLT_PPP, TV_DLT_FDDI, TV_DLT_RAW,
	TV_DLT_RAW_OPENBSD, TV_DLT_PPP_SERIAL, TV_DLT_RAW_LINKTYPE, TV_DLT_C_HDLC,
	TV_DLT_LOOP, TV_DLT_LINUX_SLL, TV_DLT_IPV4, TV_DLT_IPV6, TV_DLT_LINUX_SLL2,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tv_flow_opts opts = { 200000000ull, 1000000ull };
	struct tv_flows *f;
	struct tv_segment seg;
	struct tv_pkt_result res;
	struct tv_conn_info info;
	uint64_t ts = 1000000000ull;
	uint32_t frame = 0;
	size_t i;
	int dlt;

	if (size < 1)
		return 0;
	dlt = dlts[data[0] % (sizeof(dlts) / sizeof(dlts[0]))];
	data++;
	size--;
	f = tv_flows_new(&opts);
	if (!f)
		return 0;
	while (size >= 4) {
		size_t len = (size_t)(data[0] << 8 | data[1]);
		uint64_t step = (uint64_t)(data[2] << 8 | data[3]) * 1000000ull;
		uint8_t *copy;

		data += 4;
		size -= 4;
		if (len > size)
			len = size;
		/* an exact-size heap copy lets ASan catch any read past the frame */
		copy = malloc(len ? len : 1);
		if (!copy)
			break;
		memcpy(copy, data, len);
		ts += step;
		if (tv_decode(dlt, copy, (uint32_t)len, (uint32_t)len + (step & 0xff), &seg) == TV_OK)
			tv_flows_add(f, ts, ++frame, &seg, &res);
		free(copy);
		data += len;
		size -= len;
	}
	for (i = 0; i < tv_flows_count(f); i++)
		tv_flows_info(f, i, &info);
	for (i = 0; i < tv_flows_nevents(f); i++)
		(void)tv_flows_event(f, i);
	tv_flows_free(f);
	return 0;
}
