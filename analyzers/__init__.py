"""Analyzers: metrics and SQL over the store."""
