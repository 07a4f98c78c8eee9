"""Ingest: captures on disk -> columnar batches -> the DuckDB store."""
