/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tcp_probe_ext: the record shared by the BPF program and its loader.
 *
 * One record per tcp:tcp_probe event (a segment received by a TCP socket in
 * the established state), carrying the stock tracepoint's fields plus the
 * state an RTO and loss analysis needs. Units follow docs/probe.md.
 */
#ifndef TCP_PROBE_EXT_H
#define TCP_PROBE_EXT_H

#define TPE_MAX_PORTS 1024
#define TPE_MAX_ADDRS 8

/* slots of the per-CPU counter array */
#define TPE_CNT_SUBMITTED 0   /* records handed to the ring buffer */
#define TPE_CNT_LOST 1        /* records the ring buffer had no room for */
#define TPE_CNT_NOTCP 2       /* events whose socket was not a TCP socket */
#define TPE_CNT_MATCHED 3     /* events that passed the filters */
#define TPE_CNT_UNSEEN 4      /* segments a recorded socket received with no event */
#define TPE_CNT_SLOTS 5

struct tpe_event {
	__u64 ts_ns;          /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 cookie;         /* socket cookie */
	__u64 pacing_rate;    /* sk_pacing_rate, bytes per second */
	__u8 saddr[16];       /* IPv6, or IPv4-mapped IPv6 (::ffff:a.b.c.d) */
	__u8 daddr[16];
	__u16 family;         /* AF_INET or AF_INET6 */
	__u16 sport;          /* host order */
	__u16 dport;          /* host order */
	__u16 data_len;       /* payload of the received segment */
	__u32 snd_nxt;
	__u32 snd_una;
	__u32 snd_cwnd;       /* packets */
	__u32 ssthresh;       /* packets, as the stock tracepoint reports it */
	__u32 snd_wnd;        /* bytes */
	__u32 rcv_wnd;        /* bytes */
	__u32 srtt_us;        /* srtt_us >> 3 */
	__u32 rttvar_us;      /* mdev_us >> 2, as tcp_info's tcpi_rttvar */
	__u32 rto_us;         /* icsk_rto converted from jiffies */
	__u32 rto_var_us;     /* rttvar_us, the term the RTO adds to srtt */
	__u32 packets_out;
	__u32 retrans_out;
	__u32 lost_out;
	__u32 sacked_out;
	__u32 delivered;
	__u32 total_retrans;
	__u8 ca_state;        /* 0 Open .. 4 Loss */
	__u8 retransmits;     /* icsk_retransmits */
	__u8 backoff;         /* icsk_backoff */
	__u8 pad[5];          /* to a multiple of 8 bytes, zeroed */
};

#endif
