#!/usr/bin/env python3
"""Sums Nsight Compute kernel durations of the last decode step in a `ncu --csv` log.

A step starts at the embedding kernel followed by a norm; the last step is everything from the last embedding launch
on. Prints ms per kernel name (shortened) and the total, largest first.
Usage: ncu_step_summary.py ncu.csv
"""
import csv
import collections
import re
import sys


EPILOGUES = ("StoreRows<float>", "StoreRows", "AddToResidual", "GatedActivation", "RopeKvWrite")


def short(name: str) -> str:
    name = name.replace("(anonymous namespace)", "").replace("<unnamed>", "")
    if "skinny_kernel" in name:  # the decode GEMV: one entry per epilogue (and RMS input or not)
        epilogue = next((e for e in EPILOGUES if e in name), "?")
        rms = ", rms input" if re.search(r",\s*(true|\(bool\)1)>", name) else ""
        return f"skinny_kernel [{epilogue}{rms}]"
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\(.*", "", name)        # drop the parameter list
    name = re.sub(r"<.*", "", name)          # and template arguments
    return name.split("::")[-1][:60]


def main(path: str) -> None:
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r["Metric Unit"]
        ns = value * {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}.get(unit, 1)
        rows.append((r["Kernel Name"], ns))
    # The embedding kernel also gathers the logits rows before the LM head, right after the final
    # norm; a step's embedding is one that does not follow a norm.
    starts = [i for i, (n, _) in enumerate(rows)
              if "embedding" in n and (i == 0 or "norm" not in rows[i - 1][0])]
    if not starts:
        sys.exit("no embedding kernel found: is this a decode log?")
    step = rows[starts[-1]:]
    total = collections.Counter()
    count = collections.Counter()
    for n, ns in step:
        total[short(n)] += ns
        count[short(n)] += 1
    all_ns = sum(total.values())
    print(f"{path}: last step, {len(step)} kernels, {all_ns / 1e6:.3f} ms of kernel time")
    for n, ns in total.most_common():
        print(f"  {ns / 1e6:8.3f} ms  {count[n]:4d} x  {ns / count[n] / 1e3:8.2f} us  {n}")


if __name__ == "__main__":
    main(sys.argv[1])
