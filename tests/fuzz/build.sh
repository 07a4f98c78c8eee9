#!/bin/sh
# Build the fuzzing targets with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer into tests/fuzz/build/.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src="$here/../../ingest/native"
out="$here/build"
mkdir -p "$out"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$src"
clang $flags -o "$out/fuzz_decode" "$here/fuzz_decode.c" "$src/decode.c" "$src/flows.c" -lm
clang $flags -o "$out/fuzz_pcap" "$here/fuzz_pcap.c" "$src/decode.c" "$src/flows.c" \
	"$src/columns.c" "$src/scan.c" "$src/direct.c" "$src/series.c" -lpcap -lm
# the Python extension itself, for fuzz_module.py (atheris): instrumented for
# coverage, its sanitizer runtime preloaded from atheris when it runs
py=${PYTHON:-python3}
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
mkdir -p "$out/module"
clang -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
	-shared -fPIC -std=gnu11 -I"$src" -I"$inc" -o "$out/module/_pcapscan$suffix" \
	"$src/module.c" "$src/records.c" "$src/decode.c" "$src/flows.c" "$src/columns.c" "$src/scan.c" \
	"$src/arrow_stream.c" "$src/direct.c" "$src/series.c" "$src/parquet.c" -lpcap -lzstd -lm
echo "built $out/fuzz_decode $out/fuzz_pcap $out/module/_pcapscan$suffix"
