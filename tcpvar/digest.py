"""BLAKE2b, the hash of tcpvar's fingerprints and records, without
hashlib: hashlib loads OpenSSL as it is imported (3 ms of every command)
and only re-exports CPython's own BLAKE2 module."""
try:
    from _blake2 import blake2b
except ImportError:         # a Python built without it: hashlib's
    from hashlib import blake2b

__all__ = ["blake2b"]
