#!/bin/sh
# Check the series as netdev's build bots would before it is sent.
#
#   check.sh             check; prints one line per patch, then "checked"
#   check.sh --cached    only say whether this series was checked: exit 2
#                        if not
#
# - Each patch is applied in turn and the tree built with W=1 in a modular
#   configuration (allnoconfig and modular.config: networking, with IPv6,
#   the ngwa qdisc, L2TP and several congestion controls as modules):
#   vmlinux, every module and modpost, so a symbol that a module uses and
#   the series does not export stops the check at the patch that broke it.
# - The W=1 and sparse (C=2) warnings of each patch's C files, and gcc's of
#   the headers it touches, are compared with the same files' warnings
#   before the series: any new one stops the check.
# - checkpatch.pl --strict of each patch, in the git tree, where it also
#   runs spdxcheck.py (python3-ply and python3-git): a warning, or anything
#   on its stderr (spdxcheck failing), stops the check.
#
# The base build (the tree before the series, in this configuration) is
# kept in $TCPVAR_CACHE/kernel/check-base, so a new version of the
# series rebuilds only what its patches touch; a series that passed leaves
# a stamp by the hash of what went into it.  Stage lines start with "==".
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CACHED_ONLY=
[ "${1:-}" = --cached ] && CACHED_ONLY=1

version=$(cat "$HERE/VERSION")
fragments=$HERE/modular.config
# what the series itself adds to Kconfig: merged once a patch brings it
series_fragment=$HERE/modular-series.config
# the base build depends on the pin and the options only (not on comments)
base_key=$({ cat "$HERE/VERSION"; grep -h '^CONFIG_' "$fragments"; } | sha256sum | cut -c1-16)
key=$(hash_files "$HERE/VERSION" $fragments "$series_fragment" "$HERE"/patches/*.patch "$HERE/lib.sh" \
	"$HERE/check.sh")
stamp=$CACHE/check-$version-$key
if [ -f "$stamp/checked" ]; then
	cat "$stamp/checked"
	exit 0
fi
[ -z "$CACHED_ONLY" ] || exit 2
require_source "$version"
for tool in sparse python3 perl; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (run ./bootstrap.sh)"
done
/usr/bin/python3 -c 'import git, ply' 2>/dev/null ||
	die "python3-ply or python3-git is missing: checkpatch's spdxcheck.py needs them (run ./bootstrap.sh)"

mkdir -p "$CACHE"
exec 9>"$CACHE/check.lock"
if ! flock -n 9; then
	stage "waiting for another check"
	flock 9
	# that check may have been of this series
	if [ -f "$stamp/checked" ]; then
		cat "$stamp/checked"
		exit 0
	fi
fi
export LC_ALL=C
# checkpatch runs spdxcheck.py with the python3 on PATH: Debian's, which
# has python3-ply and python3-git
PATH=/usr/bin:$PATH

# The base: the tree before the series and its build in this configuration,
# kept at a fixed path (kbuild's dependency files name the sources by their
# absolute paths), with the key of the pin and options it was built for. A
# later check puts the tree back to the base commit; make then rebuilds
# what the earlier series had touched.
base=$CACHE/check-base
src=$base/linux-source-6.1
build=$base/build
work=$CACHE/check-work-$key
rm -rf "$work"
mkdir -p "$work"
if [ "$(cat "$base/done" 2>/dev/null)" = "$base_key" ]; then
	stage "the base build of an earlier check: $base"
	git -C "$src" am --abort 2>/dev/null || true
	git -C "$src" reset -q --hard "$(git -C "$src" rev-list --max-parents=0 HEAD)"
	git -C "$src" clean -q -f -d -x
else
	rm -rf "$base"
	mkdir -p "$base"
	unpack_base "$base" "$version"
	stage "configuring (allnoconfig + modular.config)"
	# shellcheck disable=SC2086
	configure "$src" "$build" "$base/merge.log" allnoconfig $fragments
	stage "building the base with W=1 (make -j$JOBS), log: $base/make.log"
	make -C "$src" O="$build" -j"$JOBS" W=1 vmlinux modules >"$base/make.log" 2>&1 ||
		die "the base does not build in this configuration; log: $base/make.log"
	echo "$base_key" >"$base/done"
fi

# warnings LOG...: the warnings (gcc's or sparse's) in the logs, as "path:
# message", without line numbers (they move as patches add lines)
warnings() {
	sed -n "s#^$src/##; s#^\([^ :]*\):[0-9]*:[0-9]*: \(warning\|error\): #\1: #p" "$@" |
		sort -u
}
warnings "$base/make.log" >"$work/base.warnings"

# sparse_on LOG FILE...: sparse (C=2, W=1) over the C files that exist
sparse_on() {
	slog=$1
	shift
	: >"$slog"
	for f in "$@"; do
		[ -f "$src/$f" ] || continue
		make -C "$src" O="$build" -k C=2 W=1 "${f%.c}.o" >>"$slog" 2>&1 || true
	done
}

# check_patch N PATCH
check_patch() {
	name=$(basename "$2" .patch)
	sed -n 's|^diff --git a/[^ ]* b/||p' "$2" | sort -u >"$work/$1.files"
	cfiles=$(grep '\.c$' "$work/$1.files" || true)

	# shellcheck disable=SC2086 # paths without spaces
	sparse_on "$work/$1.sparse-before.log" $cfiles
	(cd "$src" && git_tcpvar am -q "$2") || die "$name does not apply"
	if grep -q 'Kconfig$' "$work/$1.files"; then
		merge_fragments "$src" "$build" "$work/merge.log" "$fragments" "$series_fragment"
	fi

	stage "$name: checkpatch --strict"
	if ! (cd "$src" && perl scripts/checkpatch.pl --strict "$2") \
		>"$work/$1.checkpatch" 2>"$work/$1.checkpatch.err" ||
		[ -s "$work/$1.checkpatch.err" ] ||
		! grep -q "has no obvious style problems" "$work/$1.checkpatch"; then
		cat "$work/$1.checkpatch" "$work/$1.checkpatch.err" >&2
		die "$name: checkpatch reports the above"
	fi

	log=$work/$1.make.log
	stage "$name: building with W=1 (make -j$JOBS), log: $log"
	if ! make -C "$src" O="$build" -j"$JOBS" W=1 vmlinux modules >"$log" 2>&1; then
		grep -E 'error|ERROR' "$log" | tail -8 >&2 || true
		die "$name: the build fails; log: $log"
	fi
	stage "$name: sparse on its C files"
	# shellcheck disable=SC2086
	sparse_on "$work/$1.sparse.log" $cfiles

	# what the patch's files show that they did not before: gcc's against
	# the base build, sparse's against the files before the patch
	sed 's/$/: /' "$work/$1.files" >"$work/$1.prefixes"
	warnings "$work/$1.sparse-before.log" >"$work/$1.before"
	{
		warnings "$log" | grep -F -f "$work/$1.prefixes" |
			comm -13 "$work/base.warnings" - || true
		warnings "$work/$1.sparse.log" | comm -13 "$work/$1.before" - || true
	} >"$work/$1.new"
	if [ -s "$work/$1.new" ]; then
		cat "$work/$1.new" >&2
		die "$name: new warnings (above); logs: $log, $work/$1.sparse.log"
	fi
	echo "$name: builds with W=1, modules and modpost; no new gcc or sparse warning;" \
		"checkpatch clean" | tee -a "$work/summary"
}

stage "the cover letter: checkpatch --strict"
(cd "$src" && perl scripts/checkpatch.pl --strict "$HERE"/patches/0000-*.patch) \
	>"$work/0.checkpatch" 2>&1 && grep -q "has no obvious style problems" "$work/0.checkpatch" ||
	{ cat "$work/0.checkpatch" >&2; die "the cover letter: checkpatch reports the above"; }
n=0
for patch in $(series); do
	n=$((n + 1))
	check_patch "$n" "$patch"
done
require_options "$build" "$work/merge.log" "$fragments" "$series_fragment"
mkdir -p "$stamp.tmp"
{
	cat "$work/summary"
	echo "checked: $n patches on linux-source-6.1 $version (allnoconfig + modular.config)"
} >"$stamp.tmp/checked"
rm -rf "$stamp"
mv "$stamp.tmp" "$stamp"
rm -rf "$work"
cat "$stamp/checked"
