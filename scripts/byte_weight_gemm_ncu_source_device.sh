#!/usr/bin/env bash
# Where the W8A16 GEMM's warps wait, instruction by instruction: Nsight Compute's source page
# (SASS, stall samples) of the first launch of kernels matching $NCU_KERNEL (default
# byte_weight_wgmma) in lmx_bench_byte_weight_gemm, for each "shape rows" of $NCU_SPECS
# (default "qkv 128;o_proj 128"); prints each one's 22 instructions with the most samples.
# Logs (the whole CSV) under $OUT. Carry: .devdeps.
source scripts/device_check_common.sh ncu-source
build_gpu "lmx lmx_bench_byte_weight_gemm" 360 || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
IFS=";" read -ra specs <<<"${NCU_SPECS:-qkv 128;o_proj 128}"
for spec in "${specs[@]}"; do
  set -- $spec
  f=$OUT/src_$1_$2.csv
  timeout 200 $ncu -k "regex:${NCU_KERNEL:-byte_weight_wgmma}" --launch-count 1 --section SourceCounters --section SpeedOfLight \
    --page source --csv --print-source sass build-gpu/bin/lmx_bench_byte_weight_gemm --rows $2 --shape $1 > $f 2>&1
  echo "== $spec"
  python3 - "$f" <<'PY'
import csv,sys
rows=list(csv.reader(open(sys.argv[1],errors='replace')))
hdr=None
for i,r in enumerate(rows):
    if 'Source' in r and any('Warp Stall Sampling (All' in c for c in r):
        hdr=i;break
if hdr is None:
    print(open(sys.argv[1]).read()[-3000:]);sys.exit()
h=rows[hdr]; si=h.index('Source'); ci=[j for j,c in enumerate(h) if c.startswith('Warp Stall Sampling (All')][0]
data=[r for r in rows[hdr+1:] if len(r)>ci and r[ci].replace('.','',1).isdigit()]
tot=sum(float(r[ci]) for r in data)
print('total samples',tot, 'instructions', len(data))
for r in sorted(data,key=lambda r:-float(r[ci]))[:22]:
    print(f"{float(r[ci])/tot*100:5.1f}%  {r[si][:90]}")
PY
done
