"""python -m tcpvar.cli"""
from .main import entry

entry()
