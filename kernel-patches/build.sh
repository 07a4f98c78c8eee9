#!/bin/sh
# Build tcpvar's patched kernel (and the tc that configures its ngwa qdisc).
#
#   build.sh [kernel]    unpack Debian's linux-source-6.1 of the version in
#                        VERSION, apply patches/*.patch with git am, merge
#                        tcpvar.config over x86_64 defconfig and build a
#                        bzImage; prints its path on the last line
#   build.sh kernel-debug
#                        the same with debug.config merged too (KASAN, UBSAN,
#                        lockdep, kmemleak): the kernel the tests run
#   build.sh tc          apt-get source iproute2 of the version in
#                        iproute2/VERSION, apply iproute2/*.patch and build
#                        tc; prints its path on the last line
#   build.sh kernel|kernel-debug|tc --cached
#                        only print the cached result's path; exit 2 if it
#                        is not built yet
#
# Results are cached under $TCPVAR_CACHE/kernel (default ~/.cache/tcpvar)
# by the hash of everything that goes into them: a second call with the
# same series and configuration only prints the path.  JOBS sets make's
# parallelism (default: CPUs + 1).  Stage lines start with "==".
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
WHAT=${1:-kernel}
CACHED_ONLY=
[ "${2:-}" = --cached ] && CACHED_ONLY=1

# build_kernel [debug]
build_kernel() {
	version=$(cat "$HERE/VERSION")
	fragments=$HERE/tcpvar.config
	[ "${1:-}" != debug ] || fragments="$fragments $HERE/debug.config"
	# shellcheck disable=SC2086 # the fragments are paths without spaces
	key=$(hash_files "$HERE/VERSION" $fragments \
		"$HERE"/patches/*.patch "$HERE/build.sh" "$HERE/lib.sh")
	out=$CACHE/linux-$version${1:+-$1}-$key
	if [ -f "$out/bzImage" ]; then
		stage "cached: $out/bzImage"
		echo "$out/bzImage"
		return
	fi
	[ -z "$CACHED_ONLY" ] || exit 2

	require_source "$version"

	work=$CACHE/work-$key
	rm -rf "$work"
	mkdir -p "$work"
	unpack_base "$work" "$version"
	src=$work/linux-source-6.1
	build=$work/build

	stage "applying $(series | wc -l) patches"
	# shellcheck disable=SC2046 # paths without spaces
	(cd "$src" && git_tcpvar am -q $(series)) ||
		die "the series does not apply to linux-source-6.1 $version"

	stage "configuring (x86_64 defconfig + tcpvar.config${1:+ + $1.config})"
	# shellcheck disable=SC2086 # the fragments are paths without spaces
	configure "$src" "$build" "$work/merge.log" defconfig $fragments

	stage "building bzImage (make -j$JOBS), log: $work/make.log"
	if ! make -C "$src" O="$build" -j"$JOBS" bzImage >"$work/make.log" 2>&1; then
		grep -E 'error|Error' "$work/make.log" | tail -5 >&2 || true
		die "the kernel build failed; log: $work/make.log"
	fi

	mkdir -p "$out.tmp"
	cp "$build/arch/x86/boot/bzImage" "$out.tmp/bzImage"
	cp "$build/.config" "$out.tmp/config"
	(cd "$src" && git log --oneline) >"$out.tmp/series.txt"
	rm -rf "$out"
	mv "$out.tmp" "$out"
	[ -n "${TCPVAR_KEEP_BUILD:-}" ] || rm -rf "$work"
	stage "built: $out/bzImage"
	echo "$out/bzImage"
}

build_tc() {
	version=$(cat "$HERE/iproute2/VERSION")
	key=$(hash_files "$HERE/iproute2/VERSION" "$HERE"/iproute2/*.patch \
		"$HERE/build.sh" "$HERE/lib.sh")
	out=$CACHE/iproute2-$version-$key
	if [ -x "$out/tc" ]; then
		stage "cached: $out/tc"
		echo "$out/tc"
		return
	fi
	[ -z "$CACHED_ONLY" ] || exit 2
	for tool in apt-get dpkg-source git make gcc flex bison pkg-config; do
		command -v "$tool" >/dev/null 2>&1 ||
			die "$tool is missing (run ./bootstrap.sh)"
	done

	work=$CACHE/work-iproute2-$key
	rm -rf "$work"
	mkdir -p "$work"
	stage "apt-get source iproute2=$version"
	(cd "$work" && apt-get source -q "iproute2=$version") >"$work/source.log" 2>&1 ||
		die "apt-get source iproute2=$version failed (a deb-src entry is needed: run ./bootstrap.sh); log: $work/source.log"
	src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'iproute2-*' | head -n 1)
	[ -n "$src" ] || die "no iproute2 source tree in $work"

	stage "applying the tc patch"
	(
		cd "$src"
		git_tcpvar init -q
		git_tcpvar add -f -A .
		git_tcpvar commit -q -m "iproute2 $version"
		git_tcpvar am -q "$HERE"/iproute2/*.patch
	) || die "the tc patch does not apply to iproute2 $version"

	stage "building tc (make -j$JOBS), log: $work/make.log"
	if ! (cd "$src" && ./configure && make -j"$JOBS" SUBDIRS="lib tc") \
		>"$work/make.log" 2>&1; then
		grep -E 'error|Error' "$work/make.log" | tail -5 >&2 || true
		die "the tc build failed; log: $work/make.log"
	fi
	mkdir -p "$out.tmp"
	cp "$src/tc/tc" "$out.tmp/tc"
	rm -rf "$out"
	mv "$out.tmp" "$out"
	[ -n "${TCPVAR_KEEP_BUILD:-}" ] || rm -rf "$work"
	stage "built: $out/tc"
	echo "$out/tc"
}

case "$WHAT" in
kernel | kernel-debug | tc) ;;
*) die "unknown target '$WHAT' (kernel, kernel-debug or tc)" ;;
esac
mkdir -p "$CACHE"
# one build of a target at a time: a second caller waits, then finds the
# first one's result in the cache
if [ -z "$CACHED_ONLY" ]; then
	exec 9>"$CACHE/$WHAT.lock"
	if ! flock -n 9; then
		stage "waiting for another build of the $WHAT"
		flock 9
	fi
fi
case "$WHAT" in
kernel) build_kernel ;;
kernel-debug) build_kernel debug ;;
tc) build_tc ;;
esac
