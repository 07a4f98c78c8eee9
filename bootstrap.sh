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
# kernel-patches/: Debian's kernel source at the pinned version, what building
# a kernel with BTF needs (pahole is in dwarves), and a deb-src entry
# (mirroring the deb one) for `apt-get source iproute2`, whose tc gets the
# ngwa qdisc
KSRC="linux-source-6.1=$(cat kernel-patches/VERSION)"
$SUDO apt-get install -y -q --no-install-recommends "$KSRC" ||
	$SUDO apt-get install -y -q --no-install-recommends linux-source-6.1
$SUDO apt-get install -y -q --no-install-recommends \
	git bc bison flex cpio dwarves libssl-dev libelf-dev pkg-config \
	dpkg-dev libmnl-dev xz-utils
if ! grep -rqs '^Types: *deb-src' /etc/apt/sources.list.d/ &&
	! grep -qs '^deb-src' /etc/apt/sources.list; then
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		sed 's/^Types: *deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
			$SUDO tee /etc/apt/sources.list.d/tcpvar-deb-src.sources >/dev/null
	else
		grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' |
			$SUDO tee /etc/apt/sources.list.d/tcpvar-deb-src.list >/dev/null
	fi
	$SUDO apt-get update -q
fi
python3 -m pip install -q --root-user-action=ignore --upgrade pip
python3 -m pip install -q --root-user-action=ignore -e '.[test]'
echo "tcpvar installed: $(command -v tcpvar)"
