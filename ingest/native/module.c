// SPDX-License-Identifier: GPL-2.0-only
/*
 * module.c - tcpvar.ingest._pcapscan: the Python face of the native reader.
 *
 *   Scanner(path, packets=True, batch_rows=..., rto_min_ms=..., hwdup_us=...)
 *     .step()         -> (status, Batch | None); the GIL is released while
 *                        libpcap reads and the analysis runs
 *     .connections()  -> (conn columns, per-direction stat columns)
 *     .events()       -> retransmission episode columns
 *   Batch.columns()   -> [(name, type, values, validity, offsets), ...] as
 *                        read-only buffers in Arrow's layout, no copies
 *
 * Laid out as a modern extension: heap types, module state, one exception.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "scan.h"

typedef struct {
	PyObject *ScanError;
	PyTypeObject *Scanner;
	PyTypeObject *Batch;
	PyTypeObject *Buffer;
} modstate;

static modstate *state_of_type(PyTypeObject *t)
{
	return PyType_GetModuleState(t);
}

/* ---- Buffer: read-only bytes owned by another object ---- */

typedef struct {
	PyObject_HEAD
	PyObject *owner;
	void *ptr;
	Py_ssize_t len;
} BufferObject;

static int buffer_getbuffer(BufferObject *self, Py_buffer *view, int flags)
{
	return PyBuffer_FillInfo(view, (PyObject *)self, self->ptr, self->len, 1, flags);
}

static void buffer_dealloc(BufferObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);

	Py_XDECREF(self->owner);
	tp->tp_free(self);
	Py_DECREF(tp);
}

static PyType_Slot buffer_slots[] = {
	{Py_bf_getbuffer, buffer_getbuffer},
	{Py_tp_dealloc, buffer_dealloc},
	{Py_tp_doc, "Read-only memory of a packet batch."},
	{0, NULL},
};

static PyType_Spec buffer_spec = {
	"tcpvar.ingest._pcapscan.Buffer", sizeof(BufferObject), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, buffer_slots,
};

static PyObject *new_buffer(modstate *st, PyObject *owner, void *ptr, Py_ssize_t len)
{
	BufferObject *b = PyObject_New(BufferObject, st->Buffer);

	if (!b)
		return NULL;
	Py_INCREF(owner);
	b->owner = owner;
	b->ptr = ptr;
	b->len = len;
	return (PyObject *)b;
}

/* ---- Batch: one tv_batch, freed when the last view of it goes ---- */

typedef struct {
	PyObject_HEAD
	struct tv_batch *b;
} BatchObject;

static void batch_dealloc(BatchObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);

	tv_batch_free(self->b);
	tp->tp_free(self);
	Py_DECREF(tp);
}

static const char *ctype_name(enum tv_ctype t)
{
	switch (t) {
	case TV_U8:
		return "uint8";
	case TV_U16:
		return "uint16";
	case TV_U32:
		return "uint32";
	case TV_I64:
		return "int64";
	case TV_LIST_I64:
		return "list<int64>";
	}
	return "?";
}

static PyObject *batch_columns(BatchObject *self, PyObject *unused)
{
	modstate *st = state_of_type(Py_TYPE(self));
	struct tv_batch *b = self->b;
	PyObject *list = PyList_New(0), *item = NULL;
	size_t i;

	if (!list)
		return NULL;
	for (i = 0; i < tv_ncolumns; i++) {
		const struct tv_coldef *c = &tv_columns[i];
		void *data = *(void **)((char *)b + c->data);
		PyObject *values, *valid = Py_None, *offsets = Py_None;
		Py_ssize_t n = (Py_ssize_t)b->n;

		Py_INCREF(Py_None);
		Py_INCREF(Py_None);
		if (c->type == TV_LIST_I64) {
			n = b->sack_off[b->n];
			Py_DECREF(offsets);
			offsets = new_buffer(st, (PyObject *)self, b->sack_off,
					     (Py_ssize_t)((b->n + 1) * sizeof(int32_t)));
			if (!offsets)
				goto fail_item;
		}
		values = new_buffer(st, (PyObject *)self, data,
				    n * (Py_ssize_t)tv_ctype_size(c->type));
		if (!values)
			goto fail_item;
		if (c->valid) {
			Py_DECREF(valid);
			valid = new_buffer(st, (PyObject *)self,
					   *(void **)((char *)b + c->valid),
					   (Py_ssize_t)(b->n / 8 + 1));
			if (!valid) {
				Py_DECREF(values);
				goto fail_item;
			}
		}
		item = Py_BuildValue("(ssNNN)", c->name, ctype_name(c->type),
				     values, valid, offsets);
		if (!item || PyList_Append(list, item) < 0)
			goto fail;
		Py_DECREF(item);
		continue;
fail_item:
		Py_DECREF(valid);
		Py_DECREF(offsets);
		goto fail;
	}
	return list;
fail:
	Py_XDECREF(item);
	Py_DECREF(list);
	return NULL;
}

static PyObject *batch_rows(BatchObject *self, void *closure)
{
	return PyLong_FromSize_t(self->b->n);
}

static PyMethodDef batch_methods[] = {
	{"columns", (PyCFunction)batch_columns, METH_NOARGS,
	 "columns() -> [(name, type, values, validity, offsets)] in Arrow layout"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef batch_getset[] = {
	{"rows", (getter)batch_rows, NULL, "number of packets", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot batch_slots[] = {
	{Py_tp_dealloc, batch_dealloc},
	{Py_tp_methods, batch_methods},
	{Py_tp_getset, batch_getset},
	{Py_tp_doc, "A batch of TCP segments as columns."},
	{0, NULL},
};

static PyType_Spec batch_spec = {
	"tcpvar.ingest._pcapscan.Batch", sizeof(BatchObject), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, batch_slots,
};

/* ---- columns of plain C records (connections, stats, events) ---- */

enum { F_U64, F_I64, F_U32, F_U16, F_U8, F_INT, F_DBL };

struct field {
	const char *name;
	int type;
	size_t off;
};

static PyObject *record_columns(const void *const *rows, size_t n,
				const struct field *fields)
{
	PyObject *dict = PyDict_New();
	const struct field *f;
	size_t i;

	if (!dict)
		return NULL;
	for (f = fields; f->name; f++) {
		PyObject *buf = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
		char *out;

		if (!buf)
			goto fail;
		out = PyBytes_AS_STRING(buf);
		for (i = 0; i < n; i++) {
			const char *p = (const char *)rows[i] + f->off;
			int64_t iv = 0;
			double dv;

			switch (f->type) {
			case F_U64:
				iv = (int64_t)*(const uint64_t *)p;
				break;
			case F_I64:
				iv = *(const int64_t *)p;
				break;
			case F_U32:
				iv = *(const uint32_t *)p;
				break;
			case F_U16:
				iv = *(const uint16_t *)p;
				break;
			case F_U8:
				iv = *(const uint8_t *)p;
				break;
			case F_INT:
				iv = *(const int *)p;
				break;
			case F_DBL:
				dv = *(const double *)p;
				memcpy(out + i * 8, &dv, 8);
				continue;
			}
			memcpy(out + i * 8, &iv, 8);
		}
		{
			PyObject *col = Py_BuildValue("(sN)",
					f->type == F_DBL ? "float64" : "int64", buf);
			int rc = col ? PyDict_SetItemString(dict, f->name, col) : -1;

			Py_XDECREF(col);
			if (rc < 0)
				goto fail;
		}
	}
	return dict;
fail:
	Py_DECREF(dict);
	return NULL;
}

#define CI(n, t) {#n, t, offsetof(struct tv_conn_info, n)}
static const struct field conn_fields[] = {
	CI(id, F_U32), CI(family, F_U8), CI(a_port, F_U16), CI(b_port, F_U16),
	CI(first_ns, F_U64), CI(last_ns, F_U64), CI(packets, F_U64),
	CI(a_isn, F_U32), CI(b_isn, F_U32), CI(handshake, F_INT),
	CI(closed, F_INT), CI(reset, F_INT),
	{NULL, 0, 0},
};

#define DS(n, t) {#n, t, offsetof(struct tv_dirstats, n)}
static const struct field stat_fields[] = {
	DS(packets, F_U64), DS(ack_packets, F_U64), DS(pure_acks, F_U64),
	DS(data_packets, F_U64), DS(data_bytes, F_U64), DS(unique_bytes, F_U64),
	DS(rexmit_packets, F_U64), DS(rexmit_bytes, F_U64), DS(ooo_packets, F_U64),
	DS(dupacks, F_U64), DS(triple_dupacks, F_U64),
	DS(sack_packets, F_U64), DS(dsack_packets, F_U64), DS(sack_blocks, F_U64),
	DS(max_sack_blocks, F_U64), DS(zero_win_adv, F_U64), DS(zwnd_probes, F_U64),
	DS(zwnd_probe_bytes, F_U64), DS(pushed, F_U64), DS(urgent, F_U64),
	DS(syn, F_U64), DS(fin, F_U64), DS(rst, F_U64), DS(hw_dups, F_U64), DS(hw_copies, F_U64),
	DS(missed_bytes, F_U64), DS(truncated, F_U64),
	DS(win_min, F_U64), DS(win_max, F_U64), DS(win_n, F_U64), DS(win_sum, F_DBL),
	DS(seg_min, F_U64), DS(seg_max, F_U64),
	DS(rtt_n, F_U64), DS(rtt_min, F_DBL), DS(rtt_max, F_DBL), DS(rtt_sum, F_DBL),
	DS(rtt_sumsq, F_DBL), DS(rtt_3whs, F_DBL),
	DS(rto_events, F_U64), DS(fast_retransmits, F_U64),
	DS(first_ns, F_U64), DS(last_ns, F_U64), DS(data_first_ns, F_U64),
	DS(data_last_ns, F_U64), DS(stream_first, F_I64), DS(stream_last, F_I64),
	DS(mss, F_INT), DS(wscale, F_INT), DS(sack_ok, F_INT), DS(ts_ok, F_INT),
	{NULL, 0, 0},
};

#define EV(n, t) {#n, t, offsetof(struct tv_event, n)}
static const struct field event_fields[] = {
	EV(conn, F_U32), EV(dir, F_U8), EV(kind, F_U8), EV(frame, F_U32),
	EV(len, F_U32), EV(dupacks, F_U32), EV(backoff, F_U32), EV(ts_ns, F_U64),
	EV(silence_ns, F_U64), EV(seq, F_I64),
	{NULL, 0, 0},
};

/* ---- Scanner ---- */

typedef struct {
	PyObject_HEAD
	struct tv_scan scan;
	int opened;
	int busy;		/* a step runs without the GIL */
	int packets;
	Py_ssize_t batch_rows;
} ScannerObject;

/* the largest --rto-min and --hw-dups: their nanoseconds fit a uint64_t */
#define MAX_RTO_MIN_MS	3.6e6	/* an hour */
#define MAX_HWDUP_US	1e6	/* a second */

/*
 * The Scanner owns the descriptor it is given from the call on, whether it
 * accepts it or not: the caller never closes it, so it is never closed twice.
 */
static void refuse_fd(int fd)
{
	if (fd >= 0)
		close(fd);
}

static PyObject *scanner_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"path", "packets", "batch_rows", "rto_min_ms",
				 "hwdup_us", "fd", NULL};
	modstate *st = state_of_type(type);
	PyObject *path_obj = NULL;
	ScannerObject *self;
	int packets = 1, rc;
	Py_ssize_t batch_rows = 1 << 18;
	double rto_min_ms = 200.0, hwdup_us = 0.0;
	int fd = -1;
	struct tv_flow_opts opts;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|pnddi", kwlist,
					 PyUnicode_FSConverter, &path_obj, &packets,
					 &batch_rows, &rto_min_ms, &hwdup_us, &fd))
		return NULL;
	/* written so that NaN, which fails every comparison, is refused too */
	if (batch_rows < 1 || batch_rows > (1 << 24) ||
	    !(rto_min_ms >= 0 && rto_min_ms <= MAX_RTO_MIN_MS) ||
	    !(hwdup_us >= 0 && hwdup_us <= MAX_HWDUP_US)) {
		Py_DECREF(path_obj);
		refuse_fd(fd);
		PyErr_SetString(PyExc_ValueError, "batch_rows, rto_min_ms or hwdup_us out of range");
		return NULL;
	}
	self = (ScannerObject *)type->tp_alloc(type, 0);
	if (!self) {
		Py_DECREF(path_obj);
		refuse_fd(fd);
		return NULL;
	}
	self->packets = packets;
	self->batch_rows = batch_rows;
	opts.rto_min_ns = (uint64_t)(rto_min_ms * 1e6);
	opts.hwdup_ns = (uint64_t)(hwdup_us * 1e3);
	Py_BEGIN_ALLOW_THREADS
	if (fd >= 0) {		/* a stream, e.g. a decompressing pipe */
		FILE *fp = fdopen(fd, "rb");

		if (fp) {
			rc = tv_scan_open_fp(&self->scan, fp, &opts);	/* closes it on failure */
		} else {
			snprintf(self->scan.errbuf, sizeof(self->scan.errbuf),
				 "cannot read descriptor %d", fd);
			refuse_fd(fd);
			rc = -1;
		}
	} else {
		rc = tv_scan_open(&self->scan, PyBytes_AS_STRING(path_obj), &opts);
	}
	Py_END_ALLOW_THREADS
	Py_DECREF(path_obj);
	if (rc < 0) {
		PyErr_SetString(st->ScanError, self->scan.errbuf);
		Py_DECREF(self);
		return NULL;
	}
	self->opened = 1;
	return (PyObject *)self;
}

static void scanner_dealloc(ScannerObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);

	if (self->opened)
		tv_scan_close(&self->scan);
	tp->tp_free(self);
	Py_DECREF(tp);
}

static int check_usable(ScannerObject *self)
{
	if (!self->opened) {
		PyErr_SetString(PyExc_ValueError, "scanner is closed");
		return 0;
	}
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "scanner is in use by another thread");
		return 0;
	}
	return 1;
}

static const char *status_name(int s)
{
	switch (s) {
	case TV_SCAN_EOF:
		return "eof";
	case TV_SCAN_TRUNCATED:
		return "truncated";
	}
	return "more";
}

static PyObject *scanner_step(ScannerObject *self, PyObject *unused)
{
	modstate *st = state_of_type(Py_TYPE(self));
	struct tv_batch *b = NULL;
	BatchObject *bo;
	int rc;

	if (!check_usable(self))
		return NULL;
	if (self->scan.status == TV_SCAN_ERROR) {	/* the error again, not "more" */
		PyErr_SetString(st->ScanError, self->scan.errbuf);
		return NULL;
	}
	if (self->scan.status != TV_SCAN_MORE)
		return Py_BuildValue("(sO)", status_name(self->scan.status), Py_None);
	if (self->packets) {
		b = tv_batch_new((size_t)self->batch_rows);
		if (!b)
			return PyErr_NoMemory();
	}
	self->busy = 1;
	Py_BEGIN_ALLOW_THREADS
	rc = tv_scan_step(&self->scan, b, (uint64_t)self->batch_rows);
	Py_END_ALLOW_THREADS
	self->busy = 0;
	if (rc == TV_SCAN_ERROR) {
		tv_batch_free(b);
		PyErr_SetString(st->ScanError, self->scan.errbuf);
		return NULL;
	}
	if (!b)
		return Py_BuildValue("(sO)", status_name(rc), Py_None);
	bo = PyObject_New(BatchObject, st->Batch);
	if (!bo) {
		tv_batch_free(b);
		return NULL;
	}
	bo->b = b;
	return Py_BuildValue("(sN)", status_name(rc), (PyObject *)bo);
}

static PyObject *format_addr(int family, const uint8_t *addr)
{
	char s[INET6_ADDRSTRLEN];

	if (!inet_ntop(family == 6 ? AF_INET6 : AF_INET, addr, s, sizeof(s)))
		s[0] = 0;
	return PyUnicode_FromString(s);
}

static PyObject *scanner_connections(ScannerObject *self, PyObject *unused)
{
	size_t n, i;
	struct tv_conn_info *info;
	const void **crow = NULL, **srow = NULL;
	PyObject *conns = NULL, *stats = NULL, *a = NULL, *b = NULL, *res = NULL;

	if (!check_usable(self))
		return NULL;
	n = tv_flows_count(self->scan.flows);
	info = PyMem_Calloc(n ? n : 1, sizeof(*info));
	crow = PyMem_Calloc(n ? n : 1, sizeof(*crow));
	srow = PyMem_Calloc(n ? 2 * n : 1, sizeof(*srow));
	a = PyList_New((Py_ssize_t)n);
	b = PyList_New((Py_ssize_t)n);
	if (!info || !crow || !srow || !a || !b) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < n; i++) {
		PyObject *sa, *sb;

		tv_flows_info(self->scan.flows, i, &info[i]);
		crow[i] = &info[i];
		srow[2 * i] = &info[i].dir[0];
		srow[2 * i + 1] = &info[i].dir[1];
		sa = format_addr(info[i].family, info[i].a_addr);
		sb = format_addr(info[i].family, info[i].b_addr);
		if (!sa || !sb) {
			Py_XDECREF(sa);
			Py_XDECREF(sb);
			goto out;
		}
		PyList_SET_ITEM(a, (Py_ssize_t)i, sa);
		PyList_SET_ITEM(b, (Py_ssize_t)i, sb);
	}
	conns = record_columns(crow, n, conn_fields);
	stats = record_columns(srow, 2 * n, stat_fields);
	if (!conns || !stats)
		goto out;
	if (PyDict_SetItemString(conns, "a_addr", a) < 0 ||
	    PyDict_SetItemString(conns, "b_addr", b) < 0)
		goto out;
	res = Py_BuildValue("(OO)", conns, stats);
out:
	PyMem_Free(info);
	PyMem_Free(crow);
	PyMem_Free(srow);
	Py_XDECREF(a);
	Py_XDECREF(b);
	Py_XDECREF(conns);
	Py_XDECREF(stats);
	return res;
}

static PyObject *scanner_events(ScannerObject *self, PyObject *unused)
{
	size_t n, i;
	const void **rows;
	PyObject *res;

	if (!check_usable(self))
		return NULL;
	n = tv_flows_nevents(self->scan.flows);
	rows = PyMem_Calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return PyErr_NoMemory();
	for (i = 0; i < n; i++)
		rows[i] = tv_flows_event(self->scan.flows, i);
	res = record_columns(rows, n, event_fields);
	PyMem_Free(rows);
	return res;
}

static PyObject *scanner_close(ScannerObject *self, PyObject *unused)
{
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "scanner is in use by another thread");
		return NULL;
	}
	if (self->opened)
		tv_scan_close(&self->scan);
	self->opened = 0;
	Py_RETURN_NONE;
}

static PyObject *scanner_counters(ScannerObject *self, void *closure)
{
	struct tv_scan *s = &self->scan;

	return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsK}",
			     "frames", (unsigned long long)s->frames,
			     "tcp", (unsigned long long)s->tcp,
			     "non_tcp", (unsigned long long)s->not_tcp,
			     "ip_fragments", (unsigned long long)s->fragments,
			     "too_short", (unsigned long long)s->too_short,
			     "malformed", (unsigned long long)s->malformed,
			     "options_cut", (unsigned long long)s->options_cut,
			     "first_ns", (unsigned long long)s->first_ns,
			     "last_ns", (unsigned long long)s->last_ns,
			     "captured_bytes", (unsigned long long)s->captured_bytes);
}

static PyObject *scanner_position(ScannerObject *self, void *closure)
{
	FILE *fp;

	if (!self->opened || self->busy)
		return PyLong_FromLong(-1);
	fp = pcap_file(self->scan.pcap);
	return PyLong_FromLong(fp ? ftell(fp) : -1);	/* -1 on a pipe */
}

static PyObject *scanner_link_type(ScannerObject *self, void *closure)
{
	return PyLong_FromLong(self->scan.dlt);
}

static PyObject *scanner_link_name(ScannerObject *self, void *closure)
{
	const char *name = pcap_datalink_val_to_name(self->scan.dlt);

	return PyUnicode_FromString(name ? name : "unknown");
}

static PyObject *scanner_message(ScannerObject *self, void *closure)
{
	return PyUnicode_FromString(self->scan.errbuf);
}

static PyMethodDef scanner_methods[] = {
	{"step", (PyCFunction)scanner_step, METH_NOARGS,
	 "step() -> (status, Batch | None): read and analyse the next frames"},
	{"connections", (PyCFunction)scanner_connections, METH_NOARGS,
	 "connections() -> (connection columns, per-direction statistic columns)"},
	{"events", (PyCFunction)scanner_events, METH_NOARGS,
	 "events() -> columns of inferred retransmission episodes"},
	{"close", (PyCFunction)scanner_close, METH_NOARGS, "close the capture"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef scanner_getset[] = {
	{"counters", (getter)scanner_counters, NULL, "frame counters", NULL},
	{"position", (getter)scanner_position, NULL, "byte offset in the file", NULL},
	{"link_type", (getter)scanner_link_type, NULL, "libpcap DLT value", NULL},
	{"link_name", (getter)scanner_link_name, NULL, "libpcap DLT name", NULL},
	{"message", (getter)scanner_message, NULL, "why reading stopped early", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot scanner_slots[] = {
	{Py_tp_new, scanner_new},
	{Py_tp_dealloc, scanner_dealloc},
	{Py_tp_methods, scanner_methods},
	{Py_tp_getset, scanner_getset},
	{Py_tp_doc, "Scanner(path, packets=True, batch_rows=262144, rto_min_ms=200, "
		    "hwdup_us=0, fd=-1): one pass over a pcap or pcapng file, or "
		    "over the stream open on fd (which it then owns, and closes also when it "
		    "refuses the arguments or the stream)."},
	{0, NULL},
};

static PyType_Spec scanner_spec = {
	"tcpvar.ingest._pcapscan.Scanner", sizeof(ScannerObject), 0,
	Py_TPFLAGS_DEFAULT, scanner_slots,
};

/* ---- the module ---- */

static int module_exec(PyObject *m)
{
	modstate *st = PyModule_GetState(m);
	PyObject *cols;
	size_t i;

	st->ScanError = PyErr_NewException("tcpvar.ingest._pcapscan.ScanError",
					   PyExc_ValueError, NULL);
	if (!st->ScanError || PyModule_AddObjectRef(m, "ScanError", st->ScanError) < 0)
		return -1;
	st->Buffer = (PyTypeObject *)PyType_FromModuleAndSpec(m, &buffer_spec, NULL);
	st->Batch = (PyTypeObject *)PyType_FromModuleAndSpec(m, &batch_spec, NULL);
	st->Scanner = (PyTypeObject *)PyType_FromModuleAndSpec(m, &scanner_spec, NULL);
	if (!st->Buffer || !st->Batch || !st->Scanner)
		return -1;
	if (PyModule_AddType(m, st->Scanner) < 0)
		return -1;
	cols = PyList_New(0);
	if (!cols)
		return -1;
	for (i = 0; i < tv_ncolumns; i++) {
		PyObject *t = Py_BuildValue("(ssO)", tv_columns[i].name,
					    ctype_name(tv_columns[i].type),
					    tv_columns[i].valid ? Py_True : Py_False);

		if (!t || PyList_Append(cols, t) < 0) {
			Py_XDECREF(t);
			Py_DECREF(cols);
			return -1;
		}
		Py_DECREF(t);
	}
	if (PyModule_AddObject(m, "PACKET_COLUMNS", cols) < 0) {
		Py_DECREF(cols);
		return -1;
	}
	return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
	modstate *st = PyModule_GetState(m);

	Py_VISIT(st->ScanError);
	Py_VISIT(st->Scanner);
	Py_VISIT(st->Batch);
	Py_VISIT(st->Buffer);
	return 0;
}

static int module_clear(PyObject *m)
{
	modstate *st = PyModule_GetState(m);

	Py_CLEAR(st->ScanError);
	Py_CLEAR(st->Scanner);
	Py_CLEAR(st->Batch);
	Py_CLEAR(st->Buffer);
	return 0;
}

static void module_free(void *m)
{
	module_clear((PyObject *)m);
}

static PyModuleDef_Slot module_slots[] = {
	{Py_mod_exec, module_exec},
	{0, NULL},
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "tcpvar.ingest._pcapscan",
	.m_doc = "Native pcap/pcapng reader and per-connection TCP analysis.",
	.m_size = sizeof(modstate),
	.m_slots = module_slots,
	.m_traverse = module_traverse,
	.m_clear = module_clear,
	.m_free = module_free,
};

PyMODINIT_FUNC PyInit__pcapscan(void)
{
	return PyModuleDef_Init(&module_def);
}
