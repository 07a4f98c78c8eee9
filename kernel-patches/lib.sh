# Shared by build.sh and check.sh (sourced, not run): messages, hashing,
# git without the user's settings, cleanup on a signal, and the unpacked
# source with the series' base committed.
# shellcheck shell=sh

CACHE=${TCPVAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tcpvar}/kernel
JOBS=${JOBS:-$(($(nproc) + 1))}
TARBALL=/usr/src/linux-source-6.1.tar.xz

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

# require_source VERSION: the pinned linux-source-6.1 and the build tools
require_source() {
	installed=$(dpkg-query -W -f '${Version}' linux-source-6.1 2>/dev/null) ||
		die "linux-source-6.1 is not installed: apt-get install linux-source-6.1=$1"
	[ "$installed" = "$1" ] ||
		die "linux-source-6.1 is $installed but kernel-patches pins $1: apt-get install linux-source-6.1=$1"
	[ -r "$TARBALL" ] || die "$TARBALL is missing: reinstall linux-source-6.1"
	for tool in git make gcc flex bison bc pahole; do
		command -v "$tool" >/dev/null 2>&1 ||
			die "$tool is missing (run ./bootstrap.sh)"
	done
}

# unpack_base DIR VERSION: linux-source-6.1 unpacked into DIR and committed
# as the series' base (checked against the cover letter's base-commit);
# the tree's path is DIR/linux-source-6.1
unpack_base() {
	stage "unpacking linux-source-6.1 $2"
	tar -xJf "$TARBALL" -C "$1"
	(
		cd "$1/linux-source-6.1"
		git_tcpvar init -q
		git_tcpvar add -f -A .
		commit_base "linux-source-6.1 $2"
	) || die "cannot commit the unpacked linux-source-6.1 with git"
	base_commit=$(sed -n 's/^base-commit: //p' "$HERE"/patches/0000-*.patch)
	[ "$(git -C "$1/linux-source-6.1" rev-parse HEAD)" = "$base_commit" ] ||
		die "linux-source-6.1 $2 is not the series' base (base-commit $base_commit)"
}

# the series' patches, cover letter left out
series() {
	ls "$HERE"/patches/*.patch | grep -v /0000-
}

# merge_fragments SRC BUILD LOG FRAGMENT...: the fragments merged over
# BUILD/.config, then the options they depend on resolved
merge_fragments() {
	cfg_src=$1
	cfg_build=$2
	cfg_log=$3
	shift 3
	"$cfg_src/scripts/kconfig/merge_config.sh" -m -O "$cfg_build" \
		"$cfg_build/.config" "$@" >"$cfg_log" 2>&1
	make -s -C "$cfg_src" O="$cfg_build" olddefconfig >/dev/null
}

# require_options BUILD LOG FRAGMENT...: every option the fragments ask for
# (the last one's word for each) is in BUILD/.config
require_options() {
	req_build=$1
	req_log=$2
	shift 2
	missing=$(cat "$@" | grep -E '^CONFIG_[A-Z0-9_]+=' |
		awk -F= '{ last[$1] = $0 } END { for (k in last) print last[k] }' |
		while IFS= read -r line; do
			name=${line%%=*}
			value=${line#*=}
			if [ "$value" = n ]; then
				grep -q "^$name=" "$req_build/.config" && echo "$name"
			else
				grep -qx "$line" "$req_build/.config" || echo "$name"
			fi
		done || true)
	# shellcheck disable=SC2086 # one line of names
	[ -z "$missing" ] || die "configuration lost: $(echo $missing) (see $req_log)"
}

# configure SRC BUILD LOG BASE FRAGMENT...: BASE (defconfig, allnoconfig)
# with the fragments merged over it, each of their options in the result
configure() {
	make -s -C "$1" O="$2" "$4" >/dev/null
	cfg_src=$1
	cfg_build=$2
	cfg_log=$3
	shift 4
	merge_fragments "$cfg_src" "$cfg_build" "$cfg_log" "$@"
	require_options "$cfg_build" "$cfg_log" "$@"
}
