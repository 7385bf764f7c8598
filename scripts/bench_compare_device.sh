#!/usr/bin/env bash
# On the device: builds `lmx` from the working tree (build-gpu/) and, when BASE_SRC names a source
# tree of an earlier commit (e.g. `git archive <commit>` unpacked into .cache/base-src and carried),
# from that tree too (build-base/), then runs each `lmx bench` argument set on both, alternating
# base / new, so a change is judged against its base in the same lease. JSON per run under $OUT.
#   BASE_SRC=.cache/base-src bash scripts/bench_compare_device.sh \
#     "--shape llama-2-7b --dtype fp16 --batches 1,32,128 --graphs" "--shape gpt-j-6b --graphs"
# VARIANT_SRC names one more source tree (a variant of the working tree), built into
# build-variant/ and run after the other two.
source "$(dirname "$0")/device_check_common.sh" bench-out  # configure_tree, $out
set -e
configure_tree . build-gpu
builds=(build-gpu)
if [[ -n ${BASE_SRC:-} ]]; then
  configure_tree "$BASE_SRC" build-base
  builds+=(build-base)
fi
if [[ -n ${VARIANT_SRC:-} ]]; then
  configure_tree "$VARIANT_SRC" build-variant
  builds=(build-variant "${builds[@]}")
fi
for b in "${builds[@]}"; do ninja -C "$b" lmx >"$out/ninja-$b.log" 2>&1 &
done
wait
for b in "${builds[@]}"; do [[ -x $b/bin/lmx ]] || { tail -30 "$out/ninja-$b.log"; exit 1; }; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
i=0
for spec in "$@"; do
  i=$((i + 1))
  for b in $(printf '%s\n' "${builds[@]}" | tac); do  # base first when there is one
    echo "== run $i $b: lmx bench $spec"
    # shellcheck disable=SC2086
    "$b/bin/lmx" bench $spec --json >"$out/run$i-$b.json" 2>"$out/run$i-$b.log" ||
      { tail -5 "$out/run$i-$b.log"; continue; }
    python3 - "$out/run$i-$b.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
pre = " ".join(f"{k}:{v:.2f}" for k, v in r.get("prefill_ms", {}).items())
dec = " ".join(f"b{k}:{v['ms_per_step']:.3f}({100 * v['fraction_of_copy_bandwidth']:.0f}%)"
               for k, v in r.get("decode", {}).items())
print(f"  {r['shape']} {r['dtype']} {r['path']} copy {r['copy_bandwidth_gbps']:.0f} GB/s | "
      f"prefill ms {pre} | decode ms {dec}")
PY
  done
done
