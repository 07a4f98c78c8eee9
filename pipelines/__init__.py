"""The pipelines: the floor between the commands (cli/) and the stages
below (capture, ingest, store, analyzers). One module per command, named
after it (`tcpvar run` is pipelines/run.py), each running the stages its
command needs and handing back plain data; drawing and printing stay with
the commands and report/. A pipeline imports no command, no presentation,
and no pipeline above it (docs/architecture.md)."""
