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
	"$src/columns.c" "$src/scan.c" -lpcap -lm
echo "built $out/fuzz_decode $out/fuzz_pcap"
