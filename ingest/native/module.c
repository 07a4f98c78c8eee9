// SPDX-License-Identifier: GPL-2.0-only
/*
 * module.c - tcpvar.ingest._pcapscan: the Python face of the native reader.
 *
 *   Scanner(path, packets=True, batch_rows=..., rto_min_ms=..., hwdup_us=...,
 *           max_connections=...)
 *     .step()         -> (status, Table | None): a batch of packets; the GIL
 *                        is released while the file is read and analysed
 *     .connections()  -> (connections, per-direction statistics) as Tables
 *     .events()       -> retransmission episodes as a Table
 *     .series()       -> the throughput series' sums (interval_ms) as a Table
 *   Table.__arrow_c_stream__() -> its columns as an Arrow C stream (a
 *                        PyCapsule), which DuckDB reads in place, without pyarrow
 *   Table.columns()   -> a packet batch's [(name, type, values, validity,
 *                        offsets), ...] as read-only buffers, no copies
 *   Table.write_parquet(path, created_by) -> a packet batch as a Parquet file
 *                        (parquet.c), the GIL released
 *
 * Python glue only: the tables are built from the scanner's state in
 * records.c, without Python. Laid out as a modern extension: heap types,
 * module state, one exception.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "arrow_stream.h"
#include "parquet.h"
#include "records.h"
#include "scan.h"

typedef struct {
	PyObject *ScanError;
	PyTypeObject *Scanner;
	PyTypeObject *Table;
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

/* ---- Table: columns as an Arrow C stream (a packet batch, or records) ---- */

typedef struct {
	PyObject_HEAD
	struct tv_arrow_table *t;	/* shared with the Arrow arrays exported */
	struct tv_batch *b;		/* a packet batch's own columns, or NULL */
} TableObject;

static void table_dealloc(TableObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);

	tv_arrow_put(self->t);
	tp->tp_free(self);
	Py_DECREF(tp);
}

static PyObject *new_table(modstate *st, struct tv_arrow_table *t, struct tv_batch *b)
{
	TableObject *o;

	if (!t)
		return PyErr_NoMemory();
	o = PyObject_New(TableObject, st->Table);
	if (!o) {
		tv_arrow_put(t);
		return NULL;
	}
	o->t = t;
	o->b = b;
	return (PyObject *)o;
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

static PyObject *table_columns(TableObject *self, PyObject *unused)
{
	modstate *st = state_of_type(Py_TYPE(self));
	struct tv_batch *b = self->b;
	PyObject *list, *item = NULL;
	size_t i;

	if (!b) {
		PyErr_SetString(PyExc_TypeError, "columns() is a packet batch's");
		return NULL;
	}
	list = PyList_New(0);
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

static PyObject *table_rows(TableObject *self, void *closure)
{
	return PyLong_FromLongLong(self->t->rows);
}

static void stream_capsule_free(PyObject *capsule)
{
	struct ArrowArrayStream *s = PyCapsule_GetPointer(capsule, "arrow_array_stream");

	if (s && s->release)		/* not taken by a consumer */
		s->release(s);
	free(s);
}

static PyObject *table_arrow_stream(TableObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"requested_schema", NULL};
	PyObject *requested = Py_None, *capsule;
	struct ArrowArrayStream *s;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &requested))
		return NULL;
	s = malloc(sizeof(*s));
	if (!s || tv_arrow_stream(self->t, s) < 0) {
		free(s);
		return PyErr_NoMemory();
	}
	capsule = PyCapsule_New(s, "arrow_array_stream", stream_capsule_free);
	if (!capsule) {
		s->release(s);
		free(s);
	}
	return capsule;
}

static PyObject *table_write_parquet(TableObject *self, PyObject *args)
{
	const char *created_by;
	PyObject *path;
	int rc;

	if (!PyArg_ParseTuple(args, "O&s", PyUnicode_FSConverter, &path, &created_by))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = tv_parquet_write(self->t, PyBytes_AS_STRING(path), created_by);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		errno = -rc;
		PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
	}
	Py_DECREF(path);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyMethodDef table_methods[] = {
	{"columns", (PyCFunction)table_columns, METH_NOARGS,
	 "columns() -> [(name, type, values, validity, offsets)] of a packet batch, "
	 "in Arrow layout"},
	{"write_parquet", (PyCFunction)table_write_parquet, METH_VARARGS,
	 "write_parquet(path, created_by) -> None: the rows as a new Parquet file (never "
	 "over a file or through a link), written with the GIL released; OSError"},
	{"__arrow_c_stream__", (PyCFunction)(void (*)(void))table_arrow_stream,
	 METH_VARARGS | METH_KEYWORDS,
	 "__arrow_c_stream__(requested_schema=None) -> the columns as an Arrow C stream "
	 "(PyCapsule); the requested schema is not used"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef table_getset[] = {
	{"rows", (getter)table_rows, NULL, "number of rows", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot table_slots[] = {
	{Py_tp_dealloc, table_dealloc},
	{Py_tp_methods, table_methods},
	{Py_tp_getset, table_getset},
	{Py_tp_doc, "Columns (TCP segments, or connections' records) as an Arrow C stream."},
	{0, NULL},
};

static PyType_Spec table_spec = {
	"tcpvar.ingest._pcapscan.Table", sizeof(TableObject), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, table_slots,
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
				 "hwdup_us", "fd", "interval_ms", "max_connections",
				 "retire_above", NULL};
	modstate *st = state_of_type(type);
	PyObject *path_obj = NULL;
	ScannerObject *self;
	int packets = 1, rc;
	Py_ssize_t batch_rows = 1 << 18;
	double rto_min_ms = 200.0, hwdup_us = 0.0, interval_ms = 0.0;
	int fd = -1;
	Py_ssize_t max_connections = 0, retire_above = 0;
	struct tv_flow_opts opts;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|pnddidnn", kwlist,
					 PyUnicode_FSConverter, &path_obj, &packets,
					 &batch_rows, &rto_min_ms, &hwdup_us, &fd, &interval_ms,
					 &max_connections, &retire_above))
		return NULL;
	/* written so that NaN, which fails every comparison, is refused too;
	 * connection ids are 32-bit */
	if (batch_rows < 1 || batch_rows > (1 << 24) ||
	    !(rto_min_ms >= 0 && rto_min_ms <= MAX_RTO_MIN_MS) ||
	    !(hwdup_us >= 0 && hwdup_us <= MAX_HWDUP_US) ||
	    !(interval_ms >= 0 && interval_ms <= MAX_RTO_MIN_MS) ||
	    max_connections < 0 || (uint64_t)max_connections > UINT32_MAX ||
	    retire_above < 0) {
		Py_DECREF(path_obj);
		refuse_fd(fd);
		PyErr_SetString(PyExc_ValueError, "batch_rows, rto_min_ms, hwdup_us, interval_ms, "
				"max_connections or retire_above out of range");
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
	opts.interval_ns = (uint64_t)(interval_ms * 1e6);
	opts.max_conns = (uint64_t)max_connections;
	opts.live_soft = (uint64_t)retire_above;
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
	PyObject *table;
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
	table = new_table(st, tv_batch_table(b), b);	/* the table takes b */
	if (!table)
		return NULL;
	return Py_BuildValue("(sN)", status_name(rc), table);
}

/* (@conns, @stats) as a tuple of two Tables, which take them. */
static PyObject *two_tables(modstate *st, struct tv_arrow_table *conns,
			    struct tv_arrow_table *stats)
{
	return Py_BuildValue("(NN)", new_table(st, conns, NULL), new_table(st, stats, NULL));
}

static PyObject *scanner_connections(ScannerObject *self, PyObject *unused)
{
	modstate *st = state_of_type(Py_TYPE(self));
	struct tv_arrow_table *conns, *stats;

	if (!check_usable(self))
		return NULL;
	if (tv_live_tables(self->scan.flows, &conns, &stats) < 0)
		return PyErr_NoMemory();
	return two_tables(st, conns, stats);
}

static PyObject *scanner_gone(ScannerObject *self, PyObject *unused)
{
	modstate *st = state_of_type(Py_TYPE(self));
	struct tv_arrow_table *conns, *stats;
	PyObject *res;

	if (!check_usable(self))
		return NULL;
	if (!tv_flows_ngone(self->scan.flows))
		Py_RETURN_NONE;
	if (tv_conn_tables(tv_flows_gone(self->scan.flows), tv_flows_ngone(self->scan.flows),
			   &conns, &stats) < 0)
		return PyErr_NoMemory();
	res = two_tables(st, conns, stats);
	if (res)
		tv_flows_gone_clear(self->scan.flows);
	return res;
}

static PyObject *scanner_series(ScannerObject *self, PyObject *unused)
{
	modstate *st = state_of_type(Py_TYPE(self));

	if (!check_usable(self))
		return NULL;
	if (!self->scan.series.valid)
		Py_RETURN_NONE;
	return new_table(st, tv_series_table(&self->scan.series), NULL);
}

static PyObject *scanner_events(ScannerObject *self, PyObject *unused)
{
	modstate *st = state_of_type(Py_TYPE(self));

	if (!check_usable(self))
		return NULL;
	return new_table(st, tv_events_table(self->scan.flows), NULL);
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

	return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsKsKsKsK}",
			     "frames", (unsigned long long)s->frames,
			     "tcp", (unsigned long long)s->tcp,
			     "non_tcp", (unsigned long long)s->not_tcp,
			     "ip_fragments", (unsigned long long)s->fragments,
			     "too_short", (unsigned long long)s->too_short,
			     "malformed", (unsigned long long)s->malformed,
			     "options_cut", (unsigned long long)s->options_cut,
			     "ip_len_zero", (unsigned long long)s->ip_len_zero,
			     "ip_len_capped", (unsigned long long)s->ip_len_capped,
			     "bad_time", (unsigned long long)s->bad_time,
			     "first_ns", (unsigned long long)s->first_ns,
			     "last_ns", (unsigned long long)s->last_ns,
			     "captured_bytes", (unsigned long long)s->captured_bytes);
}

static PyObject *scanner_position(ScannerObject *self, void *closure)
{
	if (!self->opened || self->busy)
		return PyLong_FromLong(-1);
	return PyLong_FromLong(tv_scan_position(&self->scan));	/* -1 on a pipe */
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
	 "step() -> (status, Table | None): read and analyse the next frames"},
	{"gone", (PyCFunction)scanner_gone, METH_NOARGS,
	 "(connections, statistics) of the connections retired since the last call, "
	 "or None"},
	{"connections", (PyCFunction)scanner_connections, METH_NOARGS,
	 "connections() -> (connections, per-direction statistics) as Tables, of the "
	 "connections not retired (gone())"},
	{"events", (PyCFunction)scanner_events, METH_NOARGS,
	 "events() -> the inferred retransmission episodes as a Table"},
	{"series", (PyCFunction)scanner_series, METH_NOARGS,
	 "series() -> the throughput series' sums (conn, dir, bin, packets, bytes, "
	 "unique_bytes) as a Table, or None without an interval or when a record "
	 "is older than the first"},
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
		    "hwdup_us=0, fd=-1, interval_ms=0, max_connections=0): one pass over a "
		    "pcap or pcapng file, or over the stream open on fd (which it then owns, "
		    "and closes also when it refuses the arguments or the stream); "
		    "max_connections: a ScanError past that many connections (0: no limit)."},
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
	st->Table = (PyTypeObject *)PyType_FromModuleAndSpec(m, &table_spec, NULL);
	st->Scanner = (PyTypeObject *)PyType_FromModuleAndSpec(m, &scanner_spec, NULL);
	if (!st->Buffer || !st->Table || !st->Scanner)
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
	Py_VISIT(st->Table);
	Py_VISIT(st->Buffer);
	return 0;
}

static int module_clear(PyObject *m)
{
	modstate *st = PyModule_GetState(m);

	Py_CLEAR(st->ScanError);
	Py_CLEAR(st->Scanner);
	Py_CLEAR(st->Table);
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
