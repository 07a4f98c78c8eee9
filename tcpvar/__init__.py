"""tcpvar: compare TCP congestion-control variants from captures and testbeds."""

__version__ = "0.1.0"
