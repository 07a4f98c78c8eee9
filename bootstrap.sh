#!/bin/sh
# Set up a Debian 12 machine for tcpvar, from a plain install on: the tools it
# drives and tests against, then tcpvar itself in a virtual environment
# (.venv beside this script, made with the python3 on PATH: Debian's, or any
# other 3.11+), with `tcpvar` linked into /usr/local/bin. Ends with `tcpvar
# doctor`, which fails when the README's main job cannot run here. Run as root
# or with sudo.
set -eu
cd "$(dirname "$0")"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

echo "== Debian packages"
$SUDO apt-get update -q
# python3-venv and python3-dev: the virtual environment and the C extension's
# headers on Debian's python3; procps: sysctl; udev: the micro-VM's guest init
# runs the host's udevd to create the channel the guest reports through; file:
# virtme-ng runs it on busybox; chromium: the test that opens report.html;
# openjdk-17-jre-headless: tcpvar spark (Apache Spark runs on Java 17); irtt and
# iputils-ping: the latency probe beside the flows (tcpvar run --latency);
# libzstd-dev: the scanner compresses the packets' Parquet segments itself
$SUDO apt-get install -y -q --no-install-recommends \
	python3 python3-venv python3-dev \
	gcc make libpcap-dev libzstd-dev tshark tcptrace tcpdump iperf3 iproute2 ethtool procps mount \
	irtt iputils-ping \
	chromium \
	clang llvm libclang-rt-14-dev \
	bpftool libbpf-dev libelf-dev zlib1g-dev \
	qemu-system-x86 kmod busybox-static udev file \
	openjdk-17-jre-headless

# kernel-patches/: Debian's kernel source at the pinned version (another
# version would not take the series), what building a kernel with BTF needs
# (pahole is in dwarves), what check.sh runs as netdev's bots do (sparse;
# python3-ply and python3-git for checkpatch's spdxcheck.py), and a deb-src
# entry (mirroring the deb one) for `apt-get source iproute2`, whose tc gets
# the ngwa qdisc
KSRC="linux-source-6.1=$(cat kernel-patches/VERSION)"
$SUDO apt-get install -y -q --no-install-recommends \
	git bc bison flex cpio dwarves libssl-dev pkg-config dpkg-dev libmnl-dev xz-utils \
	sparse python3-ply python3-git
# the first apt-get once upgraded linux-source-6.1 together with bpftool and
# linux-libc-dev, built from the same source: back to the pinned version
if ! $SUDO apt-get install -y -q --no-install-recommends --allow-downgrades "$KSRC"; then
	echo "bootstrap: cannot install $KSRC: tcpvar kernel build (--ngwa, --wbrto)" \
		"will not work; everything else will" >&2
fi
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

echo "== tcpvar in .venv, with its Python dependencies and C extension, and its native front end"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test,spark]'
# the command: `tcpvar analyze` of one capture into a new store runs natively,
# everything else goes on to the Python command (cli/native/analyze.c)
make -s -C cli/native PYTHON="$(pwd)/.venv/bin/python"
$SUDO ln -sf "$(pwd)/cli/native/tcpvar" /usr/local/bin/tcpvar
echo "tcpvar installed: $(command -v tcpvar) -> $(pwd)/cli/native/tcpvar, $(pwd)/.venv"

echo "== tcpvar doctor"
tcpvar doctor
