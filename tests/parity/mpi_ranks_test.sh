#!/usr/bin/env bash
# Tensor-parallel ranks as processes: `mpirun -np N lmx generate --tensor-parallel-degree N`
# (the host communicator over MPI) prints exactly what the same degree as threads prints (greedy
# ids and the dumped fp32 logits, byte for byte), and its greedy ids are transformers' (the
# fixture's). A group whose process count is not the degree fails with a message, not a hang.
#   usage: mpi_ranks_test.sh LMX_BINARY FIXTURES_DIR
set -euo pipefail
lmx="$1"
fixtures="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun --oversubscribe -np)
[[ $(id -u) -eq 0 ]] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np)
failures=0

for spec in gpt_neox_parallel:2 bloom_6heads_bf16:3 llama_gqa_llama3_bias:4; do
  fixture="${spec%:*}"
  degree="${spec#*:}"
  prompt="$(python3 -c "import json; c=json.load(open('$fixtures/$fixture/expected.json'))['cases'][-1]; print(','.join(map(str, c['prompt_ids'])))")"
  want="$(python3 -c "import json; c=json.load(open('$fixtures/$fixture/expected.json'))['cases'][-1]; print(c['greedy_ids'])")"
  n="$(python3 -c "print(len($want))")"
  args=(generate --model "$fixtures/$fixture" --prompt-ids "$prompt" --max-new-tokens "$n" --json
        --dump-logits --tensor-parallel-degree "$degree")
  "$lmx" "${args[@]}" > "$work/threads.json"
  timeout 120 "${mpirun[@]}" "$degree" "$lmx" "${args[@]}" > "$work/mpi.json"
  got="$(python3 -c "import json; print(json.load(open('$work/mpi.json'))['token_ids'])")"
  if ! cmp -s "$work/threads.json" "$work/mpi.json"; then
    echo "FAIL $fixture degree $degree: mpirun's output differs from the threads'"; failures=$((failures + 1))
  elif [[ "$got" != "$want" ]]; then
    echo "FAIL $fixture degree $degree: greedy ids $got, transformers $want"; failures=$((failures + 1))
  else
    echo "ok   $fixture: $degree processes = $degree threads = transformers ($n tokens)"
  fi
done

# Two processes for degree 3: every process says so and the job ends.
if out="$(timeout 120 "${mpirun[@]}" 2 "$lmx" generate --model "$fixtures/bloom_6heads_bf16" \
            --prompt-ids 1,2 --tensor-parallel-degree 3 2>&1)"; then
  echo "FAIL: 2 processes for degree 3 succeeded"; failures=$((failures + 1))
elif [[ "$out" != *"mpirun started 2 processes but the tensor-parallel degree is 3"* ]]; then
  echo "FAIL: 2 processes for degree 3: unexpected output: $out"; failures=$((failures + 1))
else
  echo "ok   2 processes for degree 3 refused"
fi
exit $((failures > 0))
