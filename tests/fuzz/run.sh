#!/bin/sh
# Run the three fuzzing targets for SECONDS each (default 30), seeded with the
# small captures of fixtures/pcaps. CI runs it briefly; for a long run:
#   tests/fuzz/run.sh 3600
#   RUNS=10000000 TARGETS=module tests/fuzz/run.sh     # a number of executions, one target
# New crashes are written to tests/fuzz/build/crash-* and fail the run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
seconds=${1:-30}
limit="-max_total_time=$seconds"
[ -n "${RUNS:-}" ] && limit="-runs=$RUNS"
targets=${TARGETS:-pcap decode module}
py=$(command -v "${PYTHON:-python3}")	# the Python with atheris (fuzz_module.py)
case $py in /*) ;; *) py="$PWD/$py" ;; esac
export PYTHON="$py"
"$here/build.sh" >/dev/null
corpus="$here/build/corpus"
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
for target in $targets; do
	case $target in
	pcap) ./fuzz_pcap "$limit" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 "$corpus/pcap" ;;
	decode) ./fuzz_decode "$limit" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 "$corpus/decode" ;;
	module)
		runtime=$("$py" -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so
		LD_PRELOAD="$runtime" ASAN_OPTIONS=detect_leaks=0 "$py" "$here/fuzz_module.py" \
			module/_pcapscan*.so "$limit" -max_len=65552 -timeout=10 \
			-rss_limit_mb=4096 -print_final_stats=1 "$corpus/module" ;;
	*) echo "run.sh: no target $target (pcap, decode, module)" >&2; exit 2 ;;
	esac
done
