"""The capture stage: the emulated testbed of `tcpvar run` (namespaces,
bottleneck, iperf3 flows, tcpdump, tcp_probe) on the host or in a micro-VM,
writing every artefact of a run into its folder."""
