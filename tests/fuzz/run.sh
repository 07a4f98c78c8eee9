#!/bin/sh
# Run the fuzzing targets for SECONDS each (default 30): the native reader's
# three (pcap, decode, module), seeded with the small captures of
# fixtures/pcaps, and the run folder's and the store's (folder, store),
# seeded from a run folder made here. CI runs it briefly; for a long run:
#   tests/fuzz/run.sh 3600
#   RUNS=10000000 TARGETS=module tests/fuzz/run.sh     # a number of executions, one target
#   JOBS=2 RUNS=5000000 TARGETS=module tests/fuzz/run.sh   # two processes, RUNS each
#   RUNS=20000 TARGETS="folder store" tests/fuzz/run.sh  # run folders and stores
#   SAVE=1 tests/fuzz/run.sh     # minimise the grown corpus into tests/fuzz/corpus.tar.xz
# New crashes are written to tests/fuzz/build/crash-* (folder-crash-*,
# store-crash-*) and fail the run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
seconds=${1:-30}
limit="-max_total_time=$seconds"
[ -n "${RUNS:-}" ] && limit="-runs=$RUNS"
jobs=${JOBS:-1}
case $jobs in '' | *[!0-9]*) echo "run.sh: JOBS must be a number" >&2; exit 2 ;; esac
targets=${TARGETS:-pcap decode module folder store}
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
	folder | store)
		# pure Python: no sanitizer runtime; an input copies a run folder or a
		# store and runs tcpvar on it (0.3 to 3 s); scratch files in work/
		# (a process removes those of processes gone)
		PATH="$(dirname "$py"):$PATH" TCPVAR_FUZZ_INPUT=$target TCPVAR_FUZZ_BASE="$base" \
			TCPVAR_FUZZ_WORK="$PWD/work" "$py" "$here/fuzz_inputs.py" \
			-max_len=70000 -timeout=30 -rss_limit_mb=4096 -artifact_prefix="$PWD/$target-" "$@" \
			"$PWD/seeds/$target" ;;
	*) echo "run.sh: no target $target (pcap, decode, module, folder, store)" >&2; exit 2 ;;
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

# folder and store: a run folder and its store (tcpvar run over network
# namespaces, 1 s at 5 Mbit/s), made once and again when the schema changed;
# the targets copy them for each input
base="$here/build/base-run"
case " $targets " in *" folder "* | *" store "*)
	if ! [ "$base/t.duckdb" -nt "$here/../../store/schema.sql" ] ||
		! ls "$base"/runs/*/manifest.json >/dev/null 2>&1; then
		rm -rf "$base"
		mkdir -p "$base"
		"$py" -m tcpvar.cli run --json -q --out "$base/runs" --db "$base/t.duckdb" \
			--backend netns --cc cubic --rtt 0 --buffer 60 --duration 1 --bw 5mbit \
			>"$base/run.json" 2>"$base/run.log" ||
			{ echo "run.sh: cannot make the base run folder:" >&2; cat "$base/run.log" >&2; exit 1; }
	fi
	# seeds: the base folder's own files and kinds of change, made anew when
	# the base or the target is newer; the corpus each run grows stays apart
	for target in $targets; do
		case $target in folder | store) ;; *) continue ;; esac
		seeds="$here/build/seeds/$target"
		mkdir -p "$corpus/$target"
		if ! [ "$seeds/.made" -nt "$here/fuzz_inputs.py" ] || ! [ "$seeds/.made" -nt "$base/t.duckdb" ]; then
			rm -rf "$seeds"
			TCPVAR_FUZZ_INPUT=$target TCPVAR_FUZZ_BASE="$base" TCPVAR_FUZZ_WORK="$here/build/work" \
				"$py" "$here/fuzz_inputs.py" --seeds "$seeds" 2>"$here/build/seeds-$target.log" ||
				{ cat "$here/build/seeds-$target.log" >&2; exit 1; }
			touch "$seeds/.made"
		fi
	done ;;
esac

for target in $targets; do
	if [ "$jobs" -gt 1 ]; then	# each job logs to fuzz-N.log here
		fuzz "$target" "$limit" -jobs="$jobs" -workers="$jobs" -print_final_stats=1 \
			"$corpus/$target"
	else
		fuzz "$target" "$limit" -print_final_stats=1 "$corpus/$target"
	fi
done
