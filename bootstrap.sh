#!/bin/sh
# Set up a fresh Debian 12 machine for tcpvar: the tools it drives and tests
# against (libpcap, tshark, tcptrace, tcpdump, iperf3, clang for the fuzzers),
# then tcpvar itself with its Python dependencies. Run as root or with sudo.
set -eu
cd "$(dirname "$0")"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
	gcc make libpcap-dev tshark tcptrace tcpdump iperf3 iproute2 ethtool \
	clang llvm libclang-rt-14-dev \
	bpftool libbpf-dev libelf-dev zlib1g-dev \
	qemu-system-x86 kmod busybox-static
python3 -m pip install -q --root-user-action=ignore --upgrade pip
python3 -m pip install -q --root-user-action=ignore -e '.[test]'
echo "tcpvar installed: $(command -v tcpvar)"
