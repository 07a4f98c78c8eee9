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
CACHE=${TCPVAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tcpvar}/kernel
JOBS=${JOBS:-$(($(nproc) + 1))}
WHAT=${1:-kernel}
CACHED_ONLY=
[ "${2:-}" = --cached ] && CACHED_ONLY=1

die() {
	echo "error: $*" >&2
	exit 1
}

stage() {
	echo "== $*"
}

# sha256 over the named files, in order
hash_files() {
	cat "$@" | sha256sum | cut -c1-16
}

# git without the user's identity or hooks, and without the detached
# `git gc --auto` that committing a kernel tree would leave running
git_tcpvar() {
	git -c user.name=tcpvar -c user.email=tcpvar@localhost \
		-c core.hooksPath=/dev/null -c commit.gpgsign=false \
		-c gc.auto=0 "$@"
}

# An interrupted build leaves no half-built tree (a failed one keeps its
# log).  A signal sent to the whole process group, as a terminal's Ctrl-C
# and tcpvar do, has already stopped make when this runs.
work=
out=
interrupted() {
	trap - INT TERM HUP
	[ -z "$work" ] || rm -rf "$work"
	[ -z "$out" ] || rm -rf "$out.tmp"
	exit "$1"
}
trap 'interrupted 130' INT
trap 'interrupted 143' TERM
trap 'interrupted 129' HUP

# Commit the unpacked source as the series' base: same tree, same author and
# date, so the same commit as the cover letter's base-commit
commit_base() {
	GIT_AUTHOR_DATE="2000-01-01T00:00:00+0000" \
	GIT_COMMITTER_DATE="2000-01-01T00:00:00+0000" \
		git_tcpvar commit -q -m "$1"
}

# build_kernel [debug]
build_kernel() {
	version=$(cat "$HERE/VERSION")
	tarball=/usr/src/linux-source-6.1.tar.xz
	fragments=$HERE/tcpvar.config
	[ "${1:-}" != debug ] || fragments="$fragments $HERE/debug.config"
	# shellcheck disable=SC2086 # the fragments are paths without spaces
	key=$(hash_files "$HERE/VERSION" $fragments \
		"$HERE"/patches/*.patch "$HERE/build.sh")
	out=$CACHE/linux-$version${1:+-$1}-$key
	if [ -f "$out/bzImage" ]; then
		stage "cached: $out/bzImage"
		echo "$out/bzImage"
		return
	fi
	[ -z "$CACHED_ONLY" ] || exit 2

	installed=$(dpkg-query -W -f '${Version}' linux-source-6.1 2>/dev/null) ||
		die "linux-source-6.1 is not installed: apt-get install linux-source-6.1=$version"
	[ "$installed" = "$version" ] ||
		die "linux-source-6.1 is $installed but kernel-patches pins $version: apt-get install linux-source-6.1=$version"
	[ -r "$tarball" ] || die "$tarball is missing: reinstall linux-source-6.1"
	for tool in git make gcc flex bison bc pahole; do
		command -v "$tool" >/dev/null 2>&1 ||
			die "$tool is missing (run ./bootstrap.sh)"
	done

	work=$CACHE/work-$key
	rm -rf "$work"
	mkdir -p "$work"
	stage "unpacking linux-source-6.1 $version"
	tar -xJf "$tarball" -C "$work"
	src=$work/linux-source-6.1
	build=$work/build

	stage "applying $(ls "$HERE"/patches/0*.patch | grep -vc 0000-) patches"
	(
		cd "$src"
		git_tcpvar init -q
		git_tcpvar add -f -A .
		commit_base "linux-source-6.1 $version"
	) || die "cannot commit the unpacked linux-source-6.1 with git"
	base=$(sed -n 's/^base-commit: //p' "$HERE"/patches/0000-*.patch)
	[ "$(git -C "$src" rev-parse HEAD)" = "$base" ] ||
		die "linux-source-6.1 $version is not the series' base (base-commit $base)"
	(cd "$src" && git_tcpvar am -q $(ls "$HERE"/patches/*.patch | grep -v /0000-)) ||
		die "the series does not apply to linux-source-6.1 $version"

	stage "configuring (x86_64 defconfig + tcpvar.config${1:+ + $1.config})"
	make -s -C "$src" O="$build" defconfig >/dev/null
	# shellcheck disable=SC2086
	"$src/scripts/kconfig/merge_config.sh" -m -O "$build" \
		"$build/.config" $fragments >"$work/merge.log" 2>&1
	make -s -C "$src" O="$build" olddefconfig >/dev/null
	# every option the fragments ask for (the last one's word for each)
	# must be in the result
	# shellcheck disable=SC2086
	missing=$(cat $fragments | grep -E '^CONFIG_[A-Z0-9_]+=' |
		awk -F= '{ last[$1] = $0 } END { for (k in last) print last[k] }' |
		while IFS= read -r line; do
			name=${line%%=*}
			value=${line#*=}
			if [ "$value" = n ]; then
				grep -q "^$name=" "$build/.config" && echo "$name"
			else
				grep -qx "$line" "$build/.config" || echo "$name"
			fi
		done || true)
	[ -z "$missing" ] ||
		die "configuration lost: $(echo $missing) (see $work/merge.log)"

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
		"$HERE/build.sh")
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
