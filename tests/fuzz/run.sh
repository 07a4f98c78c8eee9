#!/bin/sh
# Run the three fuzzing targets for SECONDS each (default 30), seeded with the
# small captures of fixtures/pcaps. CI runs it briefly; for a long run:
#   tests/fuzz/run.sh 3600
#   RUNS=10000000 TARGETS=module tests/fuzz/run.sh     # a number of executions, one target
#   JOBS=2 RUNS=5000000 TARGETS=module tests/fuzz/run.sh   # two processes, RUNS each
#   SAVE=1 tests/fuzz/run.sh     # minimise the grown corpus into tests/fuzz/corpus.tar.xz
# New crashes are written to tests/fuzz/build/crash-* and fail the run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
seconds=${1:-30}
limit="-max_total_time=$seconds"
[ -n "${RUNS:-}" ] && limit="-runs=$RUNS"
jobs=${JOBS:-1}
case $jobs in '' | *[!0-9]*) echo "run.sh: JOBS must be a number" >&2; exit 2 ;; esac
targets=${TARGETS:-pcap decode module}
py=$(command -v "${PYTHON:-python3}")	# the Python with atheris (fuzz_module.py)
case $py in /*) ;; *) py="$PWD/$py" ;; esac
export PYTHON="$py"
"$here/build.sh" >/dev/null
corpus="$here/build/corpus"
# the corpus the recorded campaigns grew (docs/fuzzing.md), minimised; a new
# build starts from it, later runs add to their own copy
[ -d "$corpus" ] || { mkdir -p "$corpus" && tar -xJf "$here/corpus.tar.xz" -C "$corpus"; }
mkdir -p "$corpus/pcap" "$corpus/decode"
for f in "$here"/../../fixtures/pcaps/*.pcap* "$here"/../../fixtures/pcaps/bad/* \
	"$here"/../../fixtures/pcaps/thirdparty/*.pcap* "$here"/../../fixtures/pcaps/thirdparty/*.dmp; do
	[ -f "$f" ] && [ "$(stat -c %s "$f")" -le 65536 ] && cp "$f" "$corpus/pcap/"
done
# fuzz_module.py's inputs: 16 control bytes (zeros: default arguments), then a capture
mkdir -p "$corpus/module"
for f in "$corpus"/pcap/*; do
	[ -e "$corpus/module/${f##*/}" ] ||
		{ head -c 16 /dev/zero; cat "$f"; } > "$corpus/module/${f##*/}"
done
cd "$here/build"

# fuzz TARGET ARGS...: the target with its own limits, then libFuzzer's ARGS
fuzz() {
	target=$1
	shift
	case $target in
	pcap) ./fuzz_pcap -max_len=65536 -timeout=10 -rss_limit_mb=2048 "$@" ;;
	decode) ./fuzz_decode -max_len=16384 -timeout=10 -rss_limit_mb=2048 "$@" ;;
	module)
		runtime=$("$py" -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so
		# libFuzzer runs the script itself again (merge): "env python3" finds $py
		PATH="$(dirname "$py"):$PATH" TCPVAR_FUZZ_EXTENSION=$(echo "$PWD"/module/_pcapscan*.so) \
			LD_PRELOAD="$runtime" ASAN_OPTIONS=detect_leaks=0 "$py" "$here/fuzz_module.py" \
			-max_len=65552 -timeout=10 -rss_limit_mb=4096 "$@" ;;
	*) echo "run.sh: no target $target (pcap, decode, module)" >&2; exit 2 ;;
	esac
}

if [ -n "${SAVE:-}" ]; then
	min=$(mktemp -d)
	trap 'rm -rf "$min"' EXIT
	for target in pcap decode module; do
		mkdir "$min/$target"
		fuzz "$target" -merge=1 "$min/$target" "$corpus/$target"
	done
	tar -cJf "$here/corpus.tar.xz" -C "$min" --sort=name --mtime=@0 --owner=0 \
		--group=0 --numeric-owner pcap decode module
	exit
fi
for target in $targets; do
	if [ "$jobs" -gt 1 ]; then	# each job logs to fuzz-N.log here
		fuzz "$target" "$limit" -jobs="$jobs" -workers="$jobs" -print_final_stats=1 \
			"$corpus/$target"
	else
		fuzz "$target" "$limit" -print_final_stats=1 "$corpus/$target"
	fi
done
