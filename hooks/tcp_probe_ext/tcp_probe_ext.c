// SPDX-License-Identifier: GPL-2.0-only
/*
 * tcp_probe_ext: load the BPF program, attach it to tcp:tcp_probe and write
 * one CSV line per event (the columns of docs/probe.md) until SIGINT/SIGTERM
 * or --duration.
 *
 * stderr carries the protocol tcpvar reads: one line "READY {json}" once the
 * program is attached, one line "STATS {json}" at the end, and errors as
 * "tcp_probe_ext: error: ..." (exit status 1; 2 for bad usage).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "tcp_probe_ext.h"
#include "tcp_probe_ext.skel.h"

#define CSV_HEADER                                                                    \
	"ts_ns,cookie,saddr,sport,daddr,dport,data_len,snd_nxt,snd_una,snd_cwnd,"     \
	"ssthresh,snd_wnd,rcv_wnd,srtt_us,rttvar_us,rto_us,rto_var_us,packets_out,"   \
	"retrans_out,lost_out,sacked_out,ca_state,retransmits,backoff,delivered,"     \
	"total_retrans,pacing_rate,wbrto_cwnd,wbrto_max_cwnd,wbrto_awnd,wbrto_c10,"   \
	"wbrto_a10,ngwa_window\n"

static volatile sig_atomic_t stop;
static bool verbose;
static char libbpf_last[512];

static struct {
	FILE *out;
	__s64 offset_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC */
	__u64 events;
} st;

static void fail(int status, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tcp_probe_ext: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
		line[--n] = 0;
	if (level == LIBBPF_WARN && n)
		memcpy(libbpf_last, line, n + 1);
	if (verbose || level == LIBBPF_WARN) {
		if (verbose)
			fprintf(stderr, "libbpf: %s\n", line);
	}
	return 0;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static __s64 mono_to_realtime(void)
{
	/* the tightest of a few bracketed readings */
	__s64 best = 0, best_gap = -1;

	for (int i = 0; i < 8; i++) {
		struct timespec a, r, b;
		__s64 ta, tr, tb;

		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(CLOCK_REALTIME, &r);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ta = a.tv_sec * 1000000000LL + a.tv_nsec;
		tr = r.tv_sec * 1000000000LL + r.tv_nsec;
		tb = b.tv_sec * 1000000000LL + b.tv_nsec;
		if (best_gap < 0 || tb - ta < best_gap) {
			best_gap = tb - ta;
			best = tr - (ta + (tb - ta) / 2);
		}
	}
	return best;
}

/* CONFIG_HZ from the kernel's config (/proc/config.gz, /boot/config-RELEASE) */
static unsigned config_hz(void)
{
	char path[300], line[256];
	struct utsname u;
	unsigned hz = 0;
	gzFile f;

	uname(&u);
	f = gzopen("/proc/config.gz", "r");
	if (!f) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		f = gzopen(path, "r");  /* reads plain files too */
	}
	if (!f)
		return 0;
	while (gzgets(f, line, sizeof(line)))
		if (sscanf(line, "CONFIG_HZ=%u", &hz) == 1)
			break;
	gzclose(f);
	return hz;
}

/* HZ measured: jiffies counted by /proc/timer_list over a known interval */
static int timer_list(__u64 *jiffies, __u64 *now_ns)
{
	FILE *f = fopen("/proc/timer_list", "r");
	char line[256];
	int found = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f) && found != 3) {
		unsigned long long v;

		if (!(found & 1) && sscanf(line, "now at %llu nsecs", &v) == 1) {
			*now_ns = v;
			found |= 1;
		} else if (!(found & 2) && sscanf(line, "jiffies: %llu", &v) == 1) {
			*jiffies = v;
			found |= 2;
		}
	}
	fclose(f);
	return found == 3 ? 0 : -1;
}

static unsigned measured_hz(void)
{
	static const unsigned known[] = {100, 250, 300, 1000};
	__u64 j0, t0, j1, t1;
	double hz;
	unsigned best = 0;

	if (timer_list(&j0, &t0))
		return 0;
	usleep(300000);
	if (timer_list(&j1, &t1) || t1 <= t0)
		return 0;
	hz = (double)(j1 - j0) * 1e9 / (double)(t1 - t0);
	for (unsigned i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!best || __builtin_fabs(hz - known[i]) < __builtin_fabs(hz - best))
			best = known[i];
	return best;
}

/* fast unsigned decimal output (tens of thousands of lines a second) */
static char *put_u64(char *p, __u64 v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = '0' + v % 10;
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_addr(char *p, __u16 family, const __u8 *a)
{
	char text[INET6_ADDRSTRLEN];

	static const __u8 mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	/* IPv4, and IPv4-mapped IPv6 of dual-stack sockets: dotted quad */
	if (family == 2 || !memcmp(a, mapped, 12)) {
		for (int i = 12; i < 16; i++) {
			p = put_u64(p, a[i]);
			if (i < 15)
				*p++ = '.';
		}
		return p;
	}
	inet_ntop(AF_INET6, a, text, sizeof(text));
	size_t n = strlen(text);
	memcpy(p, text, n);
	return p + n;
}

#define U(v) do { p = put_u64(p, (v)); *p++ = ','; } while (0)

static int on_event(void *ctx, void *data, size_t size)
{
	const struct tpe_event *e = data;
	char line[512], *p = line;

	(void)ctx;
	if (size < sizeof(*e))
		return 0;
	U((__u64)((__s64)e->ts_ns + st.offset_ns));
	U(e->cookie);
	p = put_addr(p, e->family, e->saddr);
	*p++ = ',';
	U(e->sport);
	p = put_addr(p, e->family, e->daddr);
	*p++ = ',';
	U(e->dport);
	U(e->data_len);
	U(e->snd_nxt);
	U(e->snd_una);
	U(e->snd_cwnd);
	U(e->ssthresh);
	U(e->snd_wnd);
	U(e->rcv_wnd);
	U(e->srtt_us);
	U(e->rttvar_us);
	U(e->rto_us);
	U(e->rto_var_us);
	U(e->packets_out);
	U(e->retrans_out);
	U(e->lost_out);
	U(e->sacked_out);
	U(e->ca_state);
	U(e->retransmits);
	U(e->backoff);
	U(e->delivered);
	U(e->total_retrans);
	p = put_u64(p, e->pacing_rate);
	/* WB-RTO and NGWA state: only the patched kernel has them */
	memcpy(p, ",,,,,,\n", 7);
	p += 7;
	fwrite(line, 1, p - line, st.out);
	st.events++;
	return 0;
}

static void sum_counters(struct tcp_probe_ext_bpf *skel, __u64 *out)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 *vals = calloc(ncpu > 0 ? ncpu : 1, sizeof(__u64));
	int fd = bpf_map__fd(skel->maps.counters);

	for (__u32 k = 0; k < TPE_CNT_SLOTS; k++) {
		out[k] = 0;
		if (vals && ncpu > 0 && !bpf_map_lookup_elem(fd, &k, vals))
			for (int c = 0; c < ncpu; c++)
				out[k] += vals[c];
	}
	free(vals);
}

/* events the kernel did not run the program for: it was already running on
 * that CPU (e.g. a softirq interrupted it), counted per program since 5.12 */
static __u64 recursion_misses(struct tcp_probe_ext_bpf *skel)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	__u64 n = 0;
	struct bpf_program *progs[] = {skel->progs.tcp_probe_btf, skel->progs.tcp_probe_raw};

	for (int i = 0; i < 2; i++) {
		int fd = bpf_program__fd(progs[i]);

		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		if (fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len))
			n += info.recursion_misses;
	}
	return n;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tcp_probe_ext [options]\n"
		"  -p, --port PORT       events of sockets with this local or remote port (repeatable, max %d)\n"
		"  -a, --addr ADDR       ... with this local or remote address (repeatable, max %d)\n"
		"  -c, --cookie COOKIE   ... of this socket only (decimal or 0x hex)\n"
		"  -o, --output FILE     CSV output (default stdout)\n"
		"  -d, --duration SECS   stop after this many seconds (default: until SIGINT/SIGTERM)\n"
		"  -b, --ringbuf-mb MB   ring buffer size, a power of two (default 16)\n"
		"      --attach KIND     auto (default), tp_btf or raw_tp\n"
		"      --hz HZ           the kernel's HZ (default: from its config, else measured)\n"
		"      --check           attach, detach and exit: can this kernel run the hook?\n"
		"  -v, --verbose         libbpf's messages\n",
		TPE_MAX_PORTS, TPE_MAX_ADDRS);
}

static int parse_addr(const char *s, __u8 *out)
{
	struct in_addr a4;

	if (inet_pton(AF_INET6, s, out) == 1)
		return 0;
	if (inet_pton(AF_INET, s, &a4) == 1) {
		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &a4, 4);
		return 0;
	}
	return -1;
}

static struct tcp_probe_ext_bpf *open_and_load(const char *attach, const __u16 *ports,
					       int n_ports, __u8 (*addrs)[16], int n_addrs,
					       __u64 cookie, unsigned hz, __u32 rb_bytes)
{
	struct tcp_probe_ext_bpf *skel = tcp_probe_ext_bpf__open();
	bool btf = strcmp(attach, "tp_btf") == 0;
	int err;

	if (!skel)
		return NULL;
	skel->rodata->hz = hz;
	skel->rodata->n_ports = n_ports;
	for (int i = 0; i < n_ports; i++)
		skel->rodata->port_bits[ports[i] >> 3] |= 1 << (ports[i] & 7);
	skel->rodata->n_addrs = n_addrs;
	for (int i = 0; i < n_addrs; i++)
		memcpy((void *)skel->rodata->addrs[i], addrs[i], 16);
	skel->rodata->cookie_filter = cookie;
	skel->rodata->wakeup_bytes = rb_bytes / 4;
	bpf_map__set_max_entries(skel->maps.events, rb_bytes);
	bpf_program__set_autoload(skel->progs.tcp_probe_btf, btf);
	bpf_program__set_autoload(skel->progs.tcp_probe_raw, !btf);
	err = tcp_probe_ext_bpf__load(skel);
	if (!err)
		err = tcp_probe_ext_bpf__attach(skel);
	if (err) {
		tcp_probe_ext_bpf__destroy(skel);
		errno = -err;
		return NULL;
	}
	return skel;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"port", required_argument, 0, 'p'},
		{"addr", required_argument, 0, 'a'},
		{"cookie", required_argument, 0, 'c'},
		{"output", required_argument, 0, 'o'},
		{"duration", required_argument, 0, 'd'},
		{"ringbuf-mb", required_argument, 0, 'b'},
		{"attach", required_argument, 0, 'A'},
		{"hz", required_argument, 0, 'H'},
		{"check", no_argument, 0, 'C'},
		{"verbose", no_argument, 0, 'v'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	__u16 ports[TPE_MAX_PORTS];
	__u8 addrs[TPE_MAX_ADDRS][16];
	int n_ports = 0, n_addrs = 0, opt;
	__u64 cookie = 0, counts[TPE_CNT_SLOTS], misses, unseen;
	double duration = 0;
	unsigned long rb_mb = 16;
	unsigned hz = 0;
	const char *output = NULL, *attach = "auto", *used;
	bool check = false;
	struct tcp_probe_ext_bpf *skel = NULL;
	struct ring_buffer *rb;
	struct timespec t0;
	char *end;

	while ((opt = getopt_long(argc, argv, "p:a:c:o:d:b:vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'p': {
			long v = strtol(optarg, &end, 10);

			if (*end || v < 1 || v > 65535)
				fail(2, "bad port '%s'", optarg);
			if (n_ports == TPE_MAX_PORTS)
				fail(2, "at most %d ports", TPE_MAX_PORTS);
			ports[n_ports++] = v;
			break;
		}
		case 'a':
			if (n_addrs == TPE_MAX_ADDRS)
				fail(2, "at most %d addresses", TPE_MAX_ADDRS);
			if (parse_addr(optarg, addrs[n_addrs++]))
				fail(2, "bad address '%s'", optarg);
			break;
		case 'c':
			errno = 0;
			cookie = strtoull(optarg, &end, 0);
			if (*end || errno || !cookie)
				fail(2, "bad cookie '%s'", optarg);
			break;
		case 'o':
			output = optarg;
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || duration <= 0)
				fail(2, "bad duration '%s'", optarg);
			break;
		case 'b':
			rb_mb = strtoul(optarg, &end, 10);
			if (*end || !rb_mb || rb_mb > 1024 || (rb_mb & (rb_mb - 1)))
				fail(2, "bad ring buffer size '%s' (MiB, a power of two)", optarg);
			break;
		case 'A':
			if (strcmp(optarg, "auto") && strcmp(optarg, "tp_btf") &&
			    strcmp(optarg, "raw_tp"))
				fail(2, "bad --attach '%s' (auto, tp_btf or raw_tp)", optarg);
			attach = optarg;
			break;
		case 'H':
			hz = strtoul(optarg, &end, 10);
			if (*end || hz < 24 || hz > 10000)
				fail(2, "bad --hz '%s'", optarg);
			break;
		case 'C':
			check = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		fail(2, "unexpected argument '%s'", argv[optind]);

	libbpf_set_print(libbpf_print);
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		fail(1, "this kernel has no BTF (/sys/kernel/btf/vmlinux): CO-RE programs cannot load");
	if (!hz)
		hz = config_hz();
	if (!hz)
		hz = measured_hz();
	if (!hz)
		fail(1, "cannot tell the kernel's HZ (no kernel config, no /proc/timer_list); give --hz");

	used = strcmp(attach, "auto") ? attach : "tp_btf";
	skel = open_and_load(used, ports, n_ports, addrs, n_addrs, cookie, hz, rb_mb << 20);
	if (!skel && !strcmp(attach, "auto")) {
		used = "raw_tp";
		skel = open_and_load(used, ports, n_ports, addrs, n_addrs, cookie, hz,
				     rb_mb << 20);
	}
	if (!skel)
		fail(1, "cannot load or attach the BPF program (%s)%s%s", strerror(errno),
		     libbpf_last[0] ? ": " : "", libbpf_last);
	if (check) {
		printf("{\"attach\": \"%s\", \"hz\": %u}\n", used, hz);
		tcp_probe_ext_bpf__destroy(skel);
		return 0;
	}

	st.out = output ? fopen(output, "w") : stdout;
	if (!st.out)
		fail(1, "cannot write %s: %s", output, strerror(errno));
	setvbuf(st.out, NULL, _IOFBF, 1 << 20);
	fputs(CSV_HEADER, st.out);
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, NULL, NULL);
	if (!rb)
		fail(1, "cannot open the ring buffer: %s", strerror(errno));

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	st.offset_ns = mono_to_realtime();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fprintf(stderr, "READY {\"attach\": \"%s\", \"hz\": %u, \"offset_ns\": %lld}\n", used, hz,
		(long long)st.offset_ns);
	fflush(stderr);

	while (!stop) {
		int err = ring_buffer__poll(rb, 20);

		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "tcp_probe_ext: error: polling the ring buffer: %s\n",
				strerror(-err));
			break;
		}
		/* records submitted without a wake-up wait for us here */
		ring_buffer__consume(rb);
		if (duration > 0) {
			struct timespec now;

			clock_gettime(CLOCK_MONOTONIC, &now);
			if ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >= duration)
				break;
		}
	}
	/* detach first, then read what is left */
	bpf_link__destroy(skel->links.tcp_probe_btf);
	bpf_link__destroy(skel->links.tcp_probe_raw);
	skel->links.tcp_probe_btf = skel->links.tcp_probe_raw = NULL;
	ring_buffer__consume(rb);
	sum_counters(skel, counts);
	misses = recursion_misses(skel);
	/* a sum of signed steps; below zero only while segments waited on a backlog */
	unseen = (__s64)counts[TPE_CNT_UNSEEN] > 0 ? counts[TPE_CNT_UNSEEN] : 0;
	fflush(st.out);
	if (ferror(st.out)) {
		fprintf(stderr, "tcp_probe_ext: error: writing %s failed\n", output ? output : "stdout");
		return 1;
	}
	if (output)
		fclose(st.out);
	fprintf(stderr,
		"STATS {\"attach\": \"%s\", \"hz\": %u, \"events\": %llu, \"lost\": %llu, "
		"\"ringbuf_full\": %llu, \"recursion_misses\": %llu, \"unseen\": %llu, "
		"\"matched\": %llu, \"submitted\": %llu, \"not_tcp\": %llu}\n",
		used, hz, (unsigned long long)st.events,
		(unsigned long long)(counts[TPE_CNT_LOST] + misses + unseen),
		(unsigned long long)counts[TPE_CNT_LOST], (unsigned long long)misses,
		(unsigned long long)unseen,
		(unsigned long long)counts[TPE_CNT_MATCHED],
		(unsigned long long)counts[TPE_CNT_SUBMITTED],
		(unsigned long long)counts[TPE_CNT_NOTCP]);
	ring_buffer__free(rb);
	tcp_probe_ext_bpf__destroy(skel);
	return 0;
}
