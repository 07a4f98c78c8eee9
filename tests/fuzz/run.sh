#!/bin/sh
# Run both fuzzing targets for SECONDS each (default 30), seeded with the
# small captures of fixtures/pcaps. CI runs it briefly; for a long run:
#   tests/fuzz/run.sh 3600
# New crashes are written to tests/fuzz/build/crash-* and fail the run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
seconds=${1:-30}
"$here/build.sh" >/dev/null
corpus="$here/build/corpus"
mkdir -p "$corpus/pcap" "$corpus/decode"
for f in "$here"/../../fixtures/pcaps/*.pcap* "$here"/../../fixtures/pcaps/bad/* \
	"$here"/../../fixtures/pcaps/thirdparty/*.pcap* "$here"/../../fixtures/pcaps/thirdparty/*.dmp; do
	[ -f "$f" ] && [ "$(stat -c %s "$f")" -le 65536 ] && cp "$f" "$corpus/pcap/"
done
cd "$here/build"
./fuzz_pcap -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 "$corpus/pcap"
./fuzz_decode -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 "$corpus/decode"
