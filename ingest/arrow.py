"""Native packet batches -> Arrow tables, without copying the packets."""
from __future__ import annotations

import pyarrow as pa

_TYPES = {
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "int64": pa.int64(),
}


def batch_table(batch) -> pa.Table:
    """Wrap the buffers of a native packet batch as an Arrow table."""
    rows = batch.rows
    names, arrays = [], []
    for name, typ, values, validity, offsets in batch.columns():
        if typ == "list<int64>":
            child_len = memoryview(values).nbytes // 8
            child = pa.Array.from_buffers(pa.int64(), child_len, [None, pa.py_buffer(values)])
            array = pa.Array.from_buffers(
                pa.list_(pa.int64()), rows, [None, pa.py_buffer(offsets)], children=[child])
        else:
            bitmap = pa.py_buffer(validity) if validity is not None else None
            array = pa.Array.from_buffers(_TYPES[typ], rows, [bitmap, pa.py_buffer(values)])
        names.append(name)
        arrays.append(array)
    return pa.Table.from_arrays(arrays, names=names)
