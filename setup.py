"""Declares the libpcap C extension; everything else is in setup.cfg."""
from setuptools import Extension, setup

NATIVE = "ingest/native/"

setup(
    ext_modules=[
        Extension(
            "tcpvar.ingest._pcapscan",
            sources=[NATIVE + f for f in ("module.c", "decode.c", "flows.c", "columns.c", "scan.c",
                                            "arrow_stream.c", "direct.c",
                                            "series.c", "parquet.c", "records.c")],
            depends=[NATIVE + f for f in ("decode.h", "flows.h", "columns.h", "scan.h",
                                            "arrow_stream.h", "direct.h",
                                            "series.h", "parquet.h", "records.h")],
            libraries=["pcap", "zstd"],
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
