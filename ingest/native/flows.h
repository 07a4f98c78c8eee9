/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * flows.h - per-connection TCP analysis in one pass: sequence tracking across
 * the 32-bit wrap, retransmissions, reordering, duplicate ACKs, RTT under
 * Karn's rule, bytes in flight and inferred retransmission timeouts.
 *
 * The definitions follow tcptrace's long output where it has one; where
 * tcpvar departs from it, docs/analysis.md says how and why.
 */
#ifndef TCPVAR_FLOWS_H
#define TCPVAR_FLOWS_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"

/* Per-packet analysis marks (packets.ev). */
enum {
	TV_EV_RETRANS = 1 << 0,
	TV_EV_OOO = 1 << 1,
	TV_EV_DUPACK = 1 << 2,
	TV_EV_ZERO_WIN = 1 << 3,
	TV_EV_WIN_PROBE = 1 << 4,
	TV_EV_FAST_RETX = 1 << 5,
	TV_EV_TIMEOUT_RETX = 1 << 6,
	TV_EV_HW_DUP = 1 << 7,
	TV_EV_MISSED = 1 << 8,	/* data before this segment was not captured */
	TV_EV_KEEPALIVE = 1 << 9,
};

struct tv_flow_opts {
	uint64_t rto_min_ns;	/* least silence before a resend counts as a timeout */
	uint64_t hwdup_ns;	/* identical copies closer than this are capture artefacts */
	uint64_t interval_ns;	/* the throughput series' interval (series.c); 0: none */
	uint64_t max_conns;	/* live connections tracked at most; 0: no limit */
	uint64_t live_soft;	/* live connections above which ended ones retire; 0: never */
};

/* Statistics of one direction of a connection (the sender's view). */
struct tv_dirstats {
	uint64_t packets, ack_packets, pure_acks;
	uint64_t data_packets, data_bytes, unique_bytes;
	uint64_t rexmit_packets, rexmit_bytes, ooo_packets;
	uint64_t dupacks, triple_dupacks;
	uint64_t sack_packets, dsack_packets, sack_blocks, max_sack_blocks;
	uint64_t zero_win_adv, zwnd_probes, zwnd_probe_bytes;
	uint64_t pushed, urgent, syn, fin, rst;
	uint64_t ect_packets, ce_packets;	/* IP ECN field ECT(0)/ECT(1), CE */
	uint64_t ece_packets, cwr_packets;	/* TCP's ECE and CWR flags */
	uint64_t hw_dups, missed_bytes, truncated;
	uint64_t hw_copies;	/* tcptrace's hardware dups, dropped or not */
	uint64_t win_min, win_max, win_n;
	double win_sum;
	uint64_t seg_min, seg_max;
	uint64_t rtt_n;
	double rtt_min, rtt_max, rtt_sum, rtt_sumsq;	/* microseconds */
	double rtt_3whs;				/* -1 when not measured */
	uint64_t rto_events, fast_retransmits;
	uint64_t first_ns, last_ns, data_first_ns, data_last_ns;
	int64_t stream_first, stream_last;	/* relative seq range of data */
	int mss;		/* requested in SYN, -1 none */
	int wscale_offered;	/* -1 none */
	int wscale;		/* in effect: -1 unless both SYNs offered one */
	int sack_ok, ts_ok;
};

struct tv_conn_info {
	uint32_t id;
	uint8_t family;
	uint8_t a_addr[16], b_addr[16];
	uint16_t a_port, b_port;
	uint64_t first_ns, last_ns, packets;
	uint32_t a_isn, b_isn;
	int handshake, closed, reset;
	struct tv_dirstats dir[2];
};

/* An inferred retransmission episode (retransmit_events). */
struct tv_event {
	uint32_t conn;
	uint8_t dir;
	uint8_t kind;		/* 1 timeout, 2 fast */
	uint32_t frame, len, dupacks, backoff;
	uint64_t ts_ns, silence_ns;
	int64_t seq;
};

/* What the analysis says about one segment (a row of packets). */
struct tv_pkt_result {
	uint32_t conn;
	uint8_t dir;
	uint16_t ev;
	int64_t seq, ack;
	uint32_t win;
	int has_rtt, has_inflight;
	uint32_t rtt_us, inflight;
	int64_t sack[TV_MAX_SACK][2];
};

struct tv_flows;

struct tv_flows *tv_flows_new(const struct tv_flow_opts *opts);
void tv_flows_free(struct tv_flows *f);

/* tv_flows_add's refusal of a connection beyond opts->max_conns. */
#define TV_FLOWS_FULL	(-2)

/* Analyse one segment; returns 0, -1 when out of memory, or TV_FLOWS_FULL. */
int tv_flows_add(struct tv_flows *f, uint64_t ts_ns, uint32_t frame,
		 const struct tv_segment *seg, struct tv_pkt_result *out);

/* Connections opened so far, retired ones included. */
size_t tv_flows_count(const struct tv_flows *f);
/* Final statistics of connection @i (0-based, in order of first packet);
 * 0 when it has retired (its statistics were in tv_flows_gone()), else 1. */
int tv_flows_info(const struct tv_flows *f, size_t i, struct tv_conn_info *out);

/*
 * Beyond opts->live_soft live connections, those that ended (a RST, or a
 * FIN each way) and have been silent for TV_RETIRE_NS of capture time
 * retire: their final statistics wait in tv_flows_gone() until the caller
 * takes them (tv_flows_gone_clear), and their state is freed. A later
 * segment of theirs opens a new connection.
 */
#define TV_RETIRE_NS	1000000000ull
size_t tv_flows_ngone(const struct tv_flows *f);
const struct tv_conn_info *tv_flows_gone(const struct tv_flows *f);
void tv_flows_gone_clear(struct tv_flows *f);

size_t tv_flows_nevents(const struct tv_flows *f);
const struct tv_event *tv_flows_event(const struct tv_flows *f, size_t i);

#endif
