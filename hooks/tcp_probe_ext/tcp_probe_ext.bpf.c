// SPDX-License-Identifier: GPL-2.0-only
/*
 * tcp_probe_ext: the extended tcp_probe record on stock kernels.
 *
 * Attached to the tcp:tcp_probe tracepoint (BTF-typed, or the raw tracepoint
 * when the kernel cannot attach tp_btf programs), it copies the socket state
 * of every matching event into a fixed record (tcp_probe_ext.h) in a BPF ring
 * buffer. Filters are read-only data set by the loader before the program is
 * loaded. A record that finds the ring buffer full, and (tp_btf) segments of
 * a recorded socket that reached no record, are counted in per-CPU counters,
 * which the loader reports.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "tcp_probe_ext.h"

#define AF_INET 2
#define AF_INET6 10
#define TCPF_CA_CWR (1 << 2)
#define TCPF_CA_Recovery (1 << 3)

char LICENSE[] SEC("license") = "GPL";

/* set by the loader before load */
const volatile __u32 hz = 250;                       /* the kernel's HZ */
const volatile __u32 n_ports = 0;                    /* 0: any port */
const volatile __u8 port_bits[65536 / 8] = {};      /* sport or dport: one bit each */
const volatile __u32 n_addrs = 0;                    /* 0: any address */
const volatile __u8 addrs[TPE_MAX_ADDRS][16] = {};   /* saddr or daddr, IPv4-mapped */
const volatile __u64 cookie_filter = 0;              /* 0: any socket */
const volatile __u64 wakeup_bytes = 1 << 20;         /* wake the reader past this backlog */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);  /* resized by the loader */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TPE_CNT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* per socket: tp->segs_in at its last event */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} segs_seen SEC(".maps");

/* atomic: a softirq may run the program while it runs on this CPU */
static __always_inline void count_n(__u32 slot, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);

	if (v)
		__sync_fetch_and_add(v, n);
}

static __always_inline void count(__u32 slot)
{
	count_n(slot, 1);
}

/*
 * On some kernels (6.18) the program is now and then not run for an event
 * the stock tracepoint records, and no recursion miss is counted. Such an
 * event still shows in the socket's own count: tcp_v4_rcv() adds every
 * segment to tp->segs_in before it is processed (or put on the backlog), so
 * over a socket's events, segs_in advances by the segments of its recorded
 * events plus those that reached none. The counter sums that difference,
 * event by event: it may go down for a while (segments on the backlog are
 * counted before their event), and at the end it is the socket's segments
 * after its first event that no record carries, at least one per missed
 * event.
 */
static __always_inline void note_unseen(struct sock *sk, struct tcp_sock *tp,
					struct sk_buff *skb)
{
	struct skb_shared_info *shinfo = (void *)(skb->head + skb->end);
	__u32 *last = bpf_sk_storage_get(&segs_seen, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	__u32 now = tp->segs_in;
	__u16 segs = 0;

	if (!last)
		return;
	bpf_probe_read_kernel(&segs, sizeof(segs), &shinfo->gso_segs);
	if (!segs)
		segs = 1;
	if (*last)      /* a signed step, added modulo 2^64 */
		count_n(TPE_CNT_UNSEEN, (__u64)((__s64)(now - *last) - segs));
	*last = now;
}

/*
 * A bitmap rather than a list: one lookup per event, however many flows.
 * The mask bounds the index for verifiers that lose a port's range through
 * its byte swap (6.1's); the empty asm keeps the compiler, which knows the
 * range, from dropping it.
 */
static __always_inline bool port_set(__u16 port)
{
	__u32 byte = port >> 3;

	asm volatile("" : "+r"(byte));
	byte &= sizeof(port_bits) - 1;
	return port_bits[byte] & (1 << (port & 7));
}

static __always_inline bool port_match(__u16 sport, __u16 dport)
{
	return !n_ports || port_set(sport) || port_set(dport);
}

static __always_inline bool addr_eq(const __u8 *a, const volatile __u8 *b)
{
	const __u64 *x = (const __u64 *)a;

	return x[0] == *(const volatile __u64 *)b && x[1] == *(const volatile __u64 *)(b + 8);
}

static __always_inline bool addr_match(const __u8 *s, const __u8 *d)
{
	if (!n_addrs)
		return true;
	for (int i = 0; i < TPE_MAX_ADDRS; i++) {
		if (i >= n_addrs)
			break;
		if (addr_eq(s, addrs[i]) || addr_eq(d, addrs[i]))
			return true;
	}
	return false;
}

static __always_inline void ipv4_mapped(__u8 *out, __u32 a)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &a, 4);
}

static __always_inline void submit(struct tpe_event *e)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(e, flags);
	count(TPE_CNT_SUBMITTED);
}

/*
 * The body is written once and expanded twice: GET reads a field directly
 * (tp_btf: the verifier knows the types; CO-RE relocates the offsets) or
 * through bpf_probe_read_kernel (raw tracepoint: untyped pointers).
 */
#define TPE_FILL(GET, GETBF, GET_COOKIE, NOTE_UNSEEN)                                 \
	__u16 family = GET(sk, __sk_common.skc_family);                               \
	__u16 sport = GET(sk, __sk_common.skc_num);                                   \
	__u16 dport = __builtin_bswap16(GET(sk, __sk_common.skc_dport));              \
	__u8 saddr[16], daddr[16];                                                    \
	struct tpe_event *e;                                                          \
	__u64 cookie;                                                                 \
                                                                                      \
	if (!port_match(sport, dport))                                                \
		return 0;                                                             \
	if (family == AF_INET) {                                                      \
		ipv4_mapped(saddr, GET(sk, __sk_common.skc_rcv_saddr));               \
		ipv4_mapped(daddr, GET(sk, __sk_common.skc_daddr));                   \
	} else if (family == AF_INET6) {                                              \
		bpf_probe_read_kernel(saddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);  \
		bpf_probe_read_kernel(daddr, 16, &sk->__sk_common.skc_v6_daddr);      \
	} else {                                                                      \
		return 0;                                                             \
	}                                                                             \
	if (!addr_match(saddr, daddr))                                                \
		return 0;                                                             \
	cookie = GET_COOKIE;                                                          \
	if (cookie_filter && cookie != cookie_filter)                                 \
		return 0;                                                             \
	count(TPE_CNT_MATCHED);                                                       \
	NOTE_UNSEEN;                                                                  \
                                                                                      \
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);                              \
	if (!e) {                                                                     \
		count(TPE_CNT_LOST);                                                  \
		return 0;                                                             \
	}                                                                             \
	e->ts_ns = bpf_ktime_get_ns();                                                \
	e->cookie = cookie;                                                           \
	e->family = family;                                                           \
	e->sport = sport;                                                             \
	e->dport = dport;                                                             \
	__builtin_memcpy(e->saddr, saddr, 16);                                        \
	__builtin_memcpy(e->daddr, daddr, 16);                                        \
	{                                                                             \
		unsigned char *data = GET(skb, data);                                 \
		__u8 doff = 0;                                                        \
		__u32 len = GET(skb, len);                                            \
                                                                                      \
		bpf_probe_read_kernel(&doff, 1, data + 12);                           \
		doff = (doff >> 4) * 4;                                               \
		e->data_len = len > doff ? len - doff : 0;                            \
	}                                                                             \
	{                                                                             \
		__u32 cwnd = GET(tp, snd_cwnd);                                       \
		__u32 ssth = GET(tp, snd_ssthresh);                                   \
		__u8 state = GETBF(&tp->inet_conn, icsk_ca_state);                    \
		__u32 cur = (cwnd >> 1) + (cwnd >> 2);                                \
		__u64 rto = GET(tp, inet_conn.icsk_rto);                              \
                                                                                      \
		e->snd_cwnd = cwnd;                                                   \
		/* tcp_current_ssthresh(), which the stock tracepoint reports */      \
		if ((1 << state) & (TCPF_CA_CWR | TCPF_CA_Recovery))                  \
			e->ssthresh = ssth;                                           \
		else                                                                  \
			e->ssthresh = ssth > cur ? ssth : cur;                        \
		e->ca_state = state;                                                  \
		e->rto_us = hz ? rto * 1000000 / hz : 0;                              \
	}                                                                             \
	e->snd_nxt = GET(tp, snd_nxt);                                                \
	e->snd_una = GET(tp, snd_una);                                                \
	e->snd_wnd = GET(tp, snd_wnd);                                                \
	e->rcv_wnd = GET(tp, rcv_wnd);                                                \
	e->srtt_us = GET(tp, srtt_us) >> 3;                                           \
	e->rttvar_us = GET(tp, mdev_us) >> 2;                                         \
	e->rto_var_us = GET(tp, rttvar_us);                                           \
	e->packets_out = GET(tp, packets_out);                                        \
	e->retrans_out = GET(tp, retrans_out);                                        \
	e->lost_out = GET(tp, lost_out);                                              \
	e->sacked_out = GET(tp, sacked_out);                                          \
	e->delivered = GET(tp, delivered);                                            \
	e->total_retrans = GET(tp, total_retrans);                                    \
	e->retransmits = GET(tp, inet_conn.icsk_retransmits);                         \
	e->backoff = GET(tp, inet_conn.icsk_backoff);                                 \
	e->pacing_rate = GET(sk, sk_pacing_rate);                                     \
	__builtin_memset(e->pad, 0, sizeof(e->pad));                                  \
	submit(e);                                                                    \
	return 0;

#define DIRECT(p, f) ((p)->f)

SEC("tp_btf/tcp_probe")
int BPF_PROG(tcp_probe_btf, struct sock *sk, struct sk_buff *skb)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);

	if (!tp) {
		count(TPE_CNT_NOTCP);
		return 0;
	}
	TPE_FILL(DIRECT, BPF_CORE_READ_BITFIELD, bpf_get_socket_cookie(sk),
		 note_unseen(sk, tp, skb))
}

SEC("raw_tp/tcp_probe")
int BPF_PROG(tcp_probe_raw, struct sock *sk, struct sk_buff *skb)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP) {
		count(TPE_CNT_NOTCP);
		return 0;
	}
	/* the cookie the kernel already gave the socket (0 if none yet) */
	TPE_FILL(BPF_CORE_READ, BPF_CORE_READ_BITFIELD_PROBED,
		 BPF_CORE_READ(sk, __sk_common.skc_cookie.counter), (void)0)
}
