"""The tcpvar command: thin Click commands over the library."""
