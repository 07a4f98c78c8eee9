// SPDX-License-Identifier: GPL-2.0-only
/*
 * analyze.c - the tcpvar command, with `tcpvar analyze` of one capture into
 * a new store done natively: the scanner, DuckDB's engine and the store
 * without a Python interpreter, which costs a short command most of its
 * time (bench/RESULTS.md). It handles
 *
 *   tcpvar analyze [-q] [--stats-only] [--force] [--db NEW] FILE
 *
 * with the table going into a pipe or a file, a store that does not exist
 * yet and whose template is in tcpvar's cache; everything else, and any
 * failure (having removed what it made), is the Python command's: it execs
 * it with the same arguments, so that every message and every other case
 * stay the Python front end's. TCPVAR_NATIVE=0 always execs it;
 * TCPVAR_NATIVE=only says why it would and exits with 99 (for the tests).
 *
 * Built by bootstrap.sh (cli/native/Makefile), with the paths of the
 * Python command, its library, DuckDB's engine and tcpvar's files.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "load.h"
#include "store.h"
#include "table.h"

#define NOT_HERE 99		/* TCPVAR_NATIVE=only: the Python command's case */
#define INTERRUPTED 130		/* tcpvar.errors.ExitStatus.INTERRUPTED */

#define HUGE_PAGES "glibc.malloc.hugetlb=1"
#define TUNABLES_WERE "TCPVAR_GLIBC_TUNABLES_WERE"

static char **args;
volatile sig_atomic_t tv_interrupted;

/*
 * DuckDB's instance and the scanner fault in tens of MB of new memory, a
 * page at a time: in 2 MB pages (transparent huge pages, where the system
 * gives them on request) a small capture takes a fifth fewer faults and a
 * tenth less time (bench/RESULTS.md). glibc's malloc asks for them when its
 * tunable says so, and reads it as a process starts: the command starts
 * again, once, with it set. Unless it is set already (by the user, or by
 * the first start); or exec fails, and the command goes on without.
 */
static void with_huge_pages(void)
{
	const char *were = getenv("GLIBC_TUNABLES");
	char set[2048];
	int n;

	if (were && strstr(were, "glibc.malloc.hugetlb"))
		return;
	n = snprintf(set, sizeof(set), "%s%s%s", were ? were : "", were ? ":" : "", HUGE_PAGES);
	if (n < 0 || (size_t)n >= sizeof(set))
		return;
	setenv(TUNABLES_WERE, were ? were : "", 1);
	setenv("GLIBC_TUNABLES", set, 1);
	execv("/proc/self/exe", args);
	if (were)
		setenv("GLIBC_TUNABLES", were, 1);
	else
		unsetenv("GLIBC_TUNABLES");
	unsetenv(TUNABLES_WERE);
}

/* GLIBC_TUNABLES as the user set it, for the Python command */
static void without_huge_pages(void)
{
	const char *were = getenv(TUNABLES_WERE);

	if (!were)
		return;
	if (*were)
		setenv("GLIBC_TUNABLES", were, 1);
	else
		unsetenv("GLIBC_TUNABLES");
	unsetenv(TUNABLES_WERE);
}

/* The Python command, with the arguments given */
static void __attribute__((noreturn)) python(const char *why)
{
	const char *mode = getenv("TCPVAR_NATIVE");

	if (mode && !strcmp(mode, "only")) {
		fprintf(stderr, "tcpvar-native: %s\n", why);
		exit(NOT_HERE);
	}
	without_huge_pages();
	execv(TV_ENTRY, args);
	fprintf(stderr, "tcpvar: error: cannot run %s: %s\n", TV_ENTRY, strerror(errno));
	exit(1);
}

static void on_signal(int sig)
{
	(void)sig;
	tv_interrupted = 1;
}

/* Plain printable ASCII: the only text the Python front end shows as it is */
static int plain(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

struct command {
	const char *file, *db;
	int quiet, stats_only;
};

static int parse(int argc, char **argv, struct command *c)
{
	int i;

	memset(c, 0, sizeof(*c));
	c->db = "tcpvar.duckdb";
	if (argc < 3 || strcmp(argv[1], "analyze"))
		return -1;
	for (i = 2; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
			c->quiet = 1;
		else if (!strcmp(a, "--stats-only"))
			c->stats_only = 1;
		else if (!strcmp(a, "--force"))
			;	/* a new store has nothing to read again */
		else if (!strcmp(a, "--db") && i + 1 < argc && argv[i + 1][0] != '-')
			c->db = argv[++i];
		else if (!strncmp(a, "--db=", 5) && a[5])
			c->db = a + 5;
		else if (a[0] != '-' && !c->file)
			c->file = a;
		else
			return -1;
	}
	return c->file ? 0 : -1;
}

/* Why the capture is the Python command's: what reader.check_readable() refuses, gzip */
static const char *not_readable(const char *path)
{
	unsigned char magic[2] = {0};
	struct stat st;
	ssize_t got;
	int fd;

	if (!plain(path))
		return "a name the Python command shows escaped";
	if (stat(path, &st) || !S_ISREG(st.st_mode) || !st.st_size || access(path, R_OK))
		return "the Python command's to refuse";
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "the Python command's to refuse";
	got = read(fd, magic, 2);
	close(fd);
	if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b)
		return "gzip'd: read through the Python command's pipe";
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_signal};
	static struct tv_engine e;
	static struct tv_store s;
	static struct tv_load l;
	struct tv_table table = {0};
	const char *version, *why;
	struct command c;
	int printed;

	args = argv;
	argv[0] = TV_ENTRY;
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (getenv("TCPVAR_NATIVE") && !strcmp(getenv("TCPVAR_NATIVE"), "0"))
		python("TCPVAR_NATIVE=0");
	if (parse(argc, argv, &c))
		python("not a command of the native front end");
	if (isatty(STDOUT_FILENO) || (isatty(STDERR_FILENO) && !c.quiet))
		python("a terminal: the Python command's tables and progress");
	if (getenv("TCPVAR_MAX_CONNECTIONS"))
		python("TCPVAR_MAX_CONNECTIONS");
	why = not_readable(c.file);
	if (why || !plain(c.db))
		python(why ? why : "a name the Python command shows escaped");
	if (tv_store_plan(&s, TV_ROOT, TV_DUCKDB_VERSION, c.db))
		python("not a new store from the template");
	with_huge_pages();
	l.path = c.file;
	l.packets = !c.stats_only;
	l.rto_min_ms = 200.0;
	l.interval_ms = 100.0;
	l.version = TV_VERSION;
	if (tv_load_start(&l) || !plain(l.resolved) || !plain(s.resolved)) {
		tv_load_end(&l);
		python(l.error[0] ? l.error : "a name the Python command shows escaped");
	}
	/* Ctrl-C, a kill or a closed terminal: the store goes, as it came */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (tv_store_copy(&s) || tv_engine_open(&e, TV_LIBPYTHON, TV_ENGINE))
		goto fail;
	version = e.library_version();
	if (strcmp(version + (*version == 'v'), TV_DUCKDB_VERSION)) {
		snprintf(e.error, sizeof(e.error), "DuckDB %s, built for %s", version,
			 TV_DUCKDB_VERSION);
		goto fail;
	}
	if (tv_store_attach(&s, &e))
		goto fail;
	/* the statements planned while the scan goes on: its end has less to do */
	table = (struct tv_table){.e = &e, .con = s.con, .root = TV_ROOT, .path = l.resolved};
	if (tv_load_plan(&l, &s) || tv_table_plan(&table) || tv_load_run(&l, &s) ||
	    tv_interrupted)
		goto fail;
	table.capture_id = l.capture_id;
	table.count = l.connections;
	printed = tv_table_print(&table, stdout);
	if (printed == -1)
		goto fail;
	/* the capture is stored: a failed checkpoint leaves it in the WAL, as in Python */
	tv_store_close(&s);
	if (l.warning)
		fprintf(stderr, "warning: %s: %s\n", c.file, l.warning);
	if (printed == -2) {		/* the store is whole; its table is not */
		fprintf(stderr, "tcpvar: error: %s\n", e.error);
		return 1;
	}
	if (fflush(stdout))
		_exit(1);
	if (tv_interrupted) {
		fprintf(stderr, "tcpvar: error: interrupted\n");
		_exit(INTERRUPTED);
	}
	/* the scanner's memory, DuckDB's instance and its teardown go with the process */
	_exit(0);
fail:
	free(table.brief);
	tv_load_end(&l);
	tv_store_remove(&s);
	if (tv_interrupted) {
		fprintf(stderr, "tcpvar: error: interrupted\n");
		return INTERRUPTED;
	}
	python(l.error[0] ? l.error : e.error[0] ? e.error : "the native front end failed");
}
