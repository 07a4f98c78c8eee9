"""python -m tcpvar.cli"""
from .start import entry

entry()
