/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * decode.h - one captured frame to the TCP fields tcpvar analyses.
 *
 * Pure functions over a byte buffer: no libpcap, no Python, no allocation,
 * so the fuzzing harness can drive them directly.
 */
#ifndef TCPVAR_DECODE_H
#define TCPVAR_DECODE_H

#include <stdint.h>

/* Link types, as libpcap's pcap_datalink() reports them (DLT_* values). */
enum {
	TV_DLT_NULL = 0,	/* BSD loopback: 4-byte host-order family */
	TV_DLT_EN10MB = 1,
	TV_DLT_PPP = 9,
	TV_DLT_FDDI = 10,
	TV_DLT_RAW = 12,	/* raw IP on Linux and most BSDs */
	TV_DLT_RAW_OPENBSD = 14,
	TV_DLT_PPP_SERIAL = 50,
	TV_DLT_RAW_LINKTYPE = 101,
	TV_DLT_C_HDLC = 104,
	TV_DLT_LOOP = 108,	/* OpenBSD loopback: network-order family */
	TV_DLT_LINUX_SLL = 113,
	TV_DLT_IPV4 = 228,
	TV_DLT_IPV6 = 229,
	TV_DLT_LINUX_SLL2 = 276,
};

/* TCP header flags (RFC 9293, RFC 3168). */
enum {
	TV_FIN = 0x01, TV_SYN = 0x02, TV_RST = 0x04, TV_PSH = 0x08,
	TV_ACK = 0x10, TV_URG = 0x20, TV_ECE = 0x40, TV_CWR = 0x80,
};

/* NGWA IPv4 option (tcpvar's wire format): type 33, length 6, u32 window. */
#define TV_NGWA_TYPE		33
#define TV_NGWA_LEN		6
#define TV_NGWA_UNSET		0xFFFFFFFFu
#define TV_MAX_SACK		4

enum tv_decode_status {
	TV_OK = 0,		/* a TCP segment; fields below are valid */
	TV_NOT_TCP,		/* a frame of another protocol */
	TV_FRAGMENT,		/* a non-first IP fragment: no TCP header */
	TV_TOO_SHORT,		/* captured bytes end before the TCP header */
	TV_MALFORMED,		/* headers that contradict themselves */
};

struct tv_segment {
	uint8_t  family;	/* 4 or 6 */
	uint8_t  flags;		/* TV_FIN ... TV_CWR */
	uint8_t  src[16];	/* IPv4 in the first 4 bytes, rest zero */
	uint8_t  dst[16];
	uint16_t sport, dport;
	uint32_t seq, ack;
	uint16_t win;		/* raw field, unscaled */
	uint16_t urp;
	uint16_t ip_id;
	uint8_t  ecn;		/* the IP header's ECN field: 0 not ECT, 1-2 ECT, 3 CE */
	uint32_t payload;	/* TCP payload bytes, from the IP length */
	uint32_t captured_payload; /* of those, how many were captured */
	/* the IP length field was 0 (segmentation offload): 1 when the
	 * record's length stood in for it, 2 when that was capped too */
	uint8_t  len_from_record;

	/* TCP options of interest; has_* tell which were present */
	uint8_t  has_mss, has_wscale, has_ts, sack_permitted;
	uint16_t mss;
	uint8_t  wscale;	/* as sent; clamping to 14 is the analysis' job */
	uint32_t tsval, tsecr;
	uint8_t  nsack;
	uint32_t sack[TV_MAX_SACK][2];	/* left, right edges */
	uint8_t  options_cut;	/* a bad option length, or the capture ends in them */

	/* NGWA option: 0 absent, 1 well-formed, 2 malformed */
	uint8_t  ngwa_state;
	uint32_t ngwa;
};

/* The most an IP length taken from a record may be: what the IPv4 total
 * length and IPv6 payload length fields can hold. */
#define TV_IP_LEN_MAX		65535u

/*
 * Decode one frame of link type @dlt. @caplen bytes are at @data; @wirelen is
 * the original length, used when an IP length field is zero (TSO/GSO
 * captures), up to TV_IP_LEN_MAX. Returns a tv_decode_status; @seg is filled
 * on TV_OK.
 */
int tv_decode(int dlt, const uint8_t *data, uint32_t caplen, uint32_t wirelen,
	      struct tv_segment *seg);

/* Nonzero when tcpvar can decode link type @dlt. */
int tv_dlt_supported(int dlt);

#endif
