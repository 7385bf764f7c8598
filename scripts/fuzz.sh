#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz/, built with clang, ASan and UBSan into build-fuzz/.
#
#   bash scripts/fuzz.sh --list              the targets
#   bash scripts/fuzz.sh [TARGET|all] [SECONDS]   run one target or every one, SECONDS each
#                                            (default all, 30 s); CI runs all for a short time
#
# Each run starts from the checked-in seeds (tests/fuzz/corpus/TARGET, never modified) plus what
# earlier runs found new (build-fuzz/corpus/TARGET). A finding (crash, sanitizer report, an
# exception that is not lmx's own error, a leak) is written under build-fuzz/findings/TARGET and
# the script exits 1; the executions of each target are printed (docs/testing.md records them).
# LMX_FUZZ_SEED=N fixes libFuzzer's random seed (CI: the same mutations every run).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(properties environment safetensors model_config tokenizer_json tokenizer_text chat_template
         lmi_request openai_request http_request)

if [[ ${1:-} == --list ]]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi
which=${1:-all}
seconds=${2:-30}
if [[ $which != all ]]; then
  printf '%s\n' "${targets[@]}" | grep -qx "$which" ||
    { echo "fuzz: unknown target '$which' (known: ${targets[*]})" >&2; exit 2; }
  targets=("$which")
fi
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DLMX_WITH_CUDA=OFF -DLMX_FUZZ=ON -DLMX_BUILD_TESTS=OFF >/dev/null
ninja -C build-fuzz "${targets[@]/#/lmx_fuzz_}" | tail -n 2

status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t"
  log="build-fuzz/findings/$t/last.log"
  seed=()
  [[ -n ${LMX_FUZZ_SEED:-} ]] && seed=(-seed="$LMX_FUZZ_SEED")
  if build-fuzz/bin/lmx_fuzz_$t "${seed[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t/" \
      "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    execs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz $t: ok, $execs executions in ${seconds} s"
  else
    echo "fuzz $t: FINDING (see $log and build-fuzz/findings/$t/)"
    grep -aE 'ERROR|SUMMARY|not an lmx::Error|runtime error' "$log" | head -5
    status=1
  fi
done
exit $status
