"""The analyzers' SQL lives in sql/*.sql, one concern per file, with named
parameters ($name) bound at execution, never formatted into the text."""
from functools import cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent     # installed or not, the files are beside it


@cache
def sql(name: str) -> str:
    return (_HERE / "sql" / f"{name}.sql").read_text()
