"""The analyzers' SQL lives in sql/*.sql, one concern per file, with named
parameters ($name) bound at execution, never formatted into the text."""
from functools import cache
from importlib import resources


@cache
def sql(name: str) -> str:
    return resources.files("tcpvar.analyzers").joinpath(f"sql/{name}.sql").read_text()
