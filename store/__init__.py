"""The DuckDB store: one database per workspace, schema in schema.sql."""
from .db import SCHEMA_VERSION, Store

__all__ = ["SCHEMA_VERSION", "Store"]
