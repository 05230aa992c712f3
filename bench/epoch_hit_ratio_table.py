#!/usr/bin/env python3
"""The table of bench/epoch_hit_ratio.sh: medians over the seeds of the measured and simulated hit ratios.

    python3 bench/epoch_hit_ratio_table.py RESULTS_DIR SEED...

RESULTS_DIR holds s<seed>-p<percent>-r<readers>-h<on|off>-e<epoch>-r<rank>.json (one `datavo read --json` each) and
belady-s<seed>-p<percent>.json (bench_epoch_belady). The hit ratio of a configuration is the top tier's hits over
its hits + misses, summed over the 4 epochs and the readers; origin bytes are summed the same way.
"""

import glob
import json
import os
import statistics
import sys


def measured(results, seed, percent, readers, hints):
    hits = misses = origin = 0
    epoch_hits = {}
    pattern = os.path.join(results, "s%s-p%d-r%d-h%s-e*-r*.json" % (seed, percent, readers, hints))
    files = glob.glob(pattern)
    if len(files) != 4 * readers:
        raise SystemExit("%s: %d files, expected %d" % (pattern, len(files), 4 * readers))
    for path in files:
        with open(path) as f:
            j = json.load(f)
        top = j["tiers"][0]
        hits += top["hits"]
        misses += top["misses"]
        origin += j["origin"]["size_bytes"]
        epoch = int(path.rsplit("-e", 1)[1].split("-")[0])
        epoch_hits[epoch] = epoch_hits.get(epoch, 0) + top["hits"]
    return {"ratio": hits / (hits + misses), "reads": hits + misses, "origin": origin,
            "epoch_hits": [epoch_hits[e] for e in sorted(epoch_hits)]}


def simulated(results, seed, percent):
    with open(os.path.join(results, "belady-s%s-p%d.json" % (seed, percent))) as f:
        return json.load(f)


def row(results, seeds, percent, readers):
    on = [measured(results, s, percent, readers, "on") for s in seeds]
    off = [measured(results, s, percent, readers, "off") for s in seeds]
    sim = [simulated(results, s, percent) for s in seeds]
    med = statistics.median
    r_on, r_off = med(m["ratio"] for m in on), med(m["ratio"] for m in off)
    bel, lru = med(s["belady"]["hit_ratio"] for s in sim), med(s["lru"]["hit_ratio"] for s in sim)
    bel_wm = med(s["belady_watermark"]["hit_ratio"] for s in sim)
    lru_wm = med(s["lru_watermark"]["hit_ratio"] for s in sim)
    mib = 1024 * 1024
    cells = ["%d%%" % percent, str(readers), "%.3f" % r_on, "%.3f" % r_off, "%.3f" % bel, "%.3f" % bel_wm,
             "%.3f" % lru, "%.3f" % lru_wm, "%.2f" % (r_on / bel), "%.2f" % (r_on / r_off if r_off else float("inf")),
             "%.1f" % (med(m["origin"] for m in on) / mib), "%.1f" % (med(m["origin"] for m in off) / mib)]
    detail = {"percent": percent, "readers": readers,
              "on": [[round(m["ratio"], 4), m["epoch_hits"]] for m in on],
              "off": [[round(m["ratio"], 4), m["epoch_hits"]] for m in off],
              "belady_epoch_hits": [s["belady"]["epoch_hits"] for s in sim],
              "lru_epoch_hits": [s["lru"]["epoch_hits"] for s in sim]}
    return "| " + " | ".join(cells) + " |", detail


def main():
    results, seeds = sys.argv[1], sys.argv[2:]
    print("| top tier | readers | hints on | hints off (LRU) | Belady | Belady, 90% watermark | LRU sim | "
          "LRU sim, 90% watermark | on / Belady | on / off | origin MiB, on | origin MiB, off |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    details = []
    for percent in (25, 50, 75):
        for readers in (1, 4):
            line, detail = row(results, seeds, percent, readers)
            print(line)
            details.append(detail)
    print()
    print("Per seed: [hit ratio, hits per epoch] measured, and the simulations' hits per epoch:")
    for d in details:
        print(json.dumps(d))


if __name__ == "__main__":
    main()
