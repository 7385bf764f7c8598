#!/usr/bin/env bash
# TensorRT-LLM's published throughput workloads (issue 26) on the Llama-3-8B shape, through the
# engine API in-process (lmx_serving_bench: closed loop, greedy, ignore_eos), for each precision:
#   128/128 (2048 requests, 512 concurrent), 2048/128 (512, 256), 1000/1000 (256, 256),
#   500/2000 (256, 256)   (input / output tokens; requests, concurrent clients)
# Precisions (QUANTS, default "none fp8"): none = bf16 weights and KV cache; fp8 = fp8 weights
# (option.quantize=fp8) and the fp8 KV cache; dynamic_int8 / smoothquant as named (bf16 cache).
# Concurrency is capped to what the KV cache holds at full length (the engine reserves
# max_rolling_batch_size x max_tokens): KV_TOKENS tokens (default 440000 with a 16-bit cache,
# 880000 with fp8: an H100's 80 GB less the weights, Llama-3-8B's 128 KiB a token in bf16).
# WORKLOADS picks some ("128/128 2048/128 1000/1000 500/2000"). One line a run with output tok/s,
# TTFT and TPOT p50 / p99; JSON under $OUT. The model directory (random weights made at load):
#   bash scripts/make_bench_model.sh llama-3-8b .cache/bench_model_l3
#   run(command="bash scripts/trtllm_workloads_device.sh", carry=[".devdeps", ".cache/bench_model_l3"])
source "$(dirname "$0")/device_check_common.sh" trtllm-workloads
model=${BENCH_MODEL:-.cache/bench_model_l3}
[[ -f $model/config.json ]] || { echo "no $model/config.json (scripts/make_bench_model.sh)" >&2; exit 1; }
step "build"
build_gpu "lmx lmx_serving_bench" "${BUILD_TIMEOUT:-330}" || exit 1
export OPTION_DEVICE=cuda OPTION_DTYPE=bf16 OPTION_ENABLE_CUDA_GRAPH=true
export OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS=${OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS:-8192}
export SERVING_JOB_QUEUE_SIZE=4096
for quant in ${QUANTS:-none fp8}; do
  export OPTION_QUANTIZE=$quant
  [[ $quant == none ]] && unset OPTION_QUANTIZE
  export OPTION_KV_CACHE_DTYPE=$([[ $quant == fp8 ]] && echo fp8 || echo auto)
  # Random weights: no checkpoint scales and nothing to calibrate, so the fp8 cache's scale is set.
  if [[ $quant == fp8 ]]; then export OPTION_KV_CACHE_SCALE=1.0; else unset OPTION_KV_CACHE_SCALE; fi
  for w in ${WORKLOADS:-128/128 2048/128 1000/1000 500/2000}; do
    case $w in
      128/128) in=128 new=128 req=2048 conc=512 warm=512 ;;
      2048/128) in=2048 new=128 req=512 conc=256 warm=0 ;;
      1000/1000) in=1000 new=1000 req=256 conc=256 warm=0 ;;
      500/2000) in=500 new=2000 req=256 conc=256 warm=0 ;;
      *) echo "unknown workload $w" >&2; exit 2 ;;
    esac
    kv_tokens=${KV_TOKENS:-$([[ $OPTION_KV_CACHE_DTYPE == fp8 ]] && echo 880000 || echo 440000)}
    fits=$((kv_tokens / (in + new + 16)))
    ((conc > fits)) && conc=$fits
    ((warm > conc)) && warm=$conc
    export OPTION_MAX_ROLLING_BATCH_SIZE=$conc OPTION_MAX_TOKENS=$((in + new + 16))
    tag="${quant}_${in}_${new}"
    step "$quant $w: $req requests, $conc concurrent"
    timeout "${RUN_TIMEOUT:-150}" build-gpu/bin/lmx_serving_bench --model-dir "$model" \
      --requests $req --concurrency $conc --prompt-tokens $in --max-new-tokens $new \
      --warmup $warm --label "$tag" --out "$out/$tag.json" >"$out/$tag.txt" 2>"$out/$tag.log"
    echo "exit $?: $(grep -E 'output tokens/s|TTFT|TPOT|completed|error' "$out/$tag.txt" | tr -s ' ' | tr '\n' ';')"
  done
done
step "end"
