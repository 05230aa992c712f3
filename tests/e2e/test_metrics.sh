#!/usr/bin/env bash
# Per-tier metrics in the Prometheus text format (issue 16): `cache stats --format prometheus` and the textfile of
# `warm` / `read` (--metrics-textfile), on the real origin, a folder tier and an S3 tier on moto (through
# tests/support/cloud_proxy.py, which slows the uploads down so that a warm lasts several rewrite intervals):
#   1. a warm with --metrics-textfile: a watcher reading the file every 20 ms never finds it half-written, and sees
#      it rewritten during the warm (uploads counted part way) and at its end (every shard installed and uploaded);
#      no temporary is left beside it;
#   2. the counters' values: the bucket's uploads, misses and installed bytes, kept per machine in the folder tier's
#      stats file (`cache stats --json`: scope this_machine, evictions not kept: null); a second warm hits the folder
#      tier once per shard; a second VM's warm hits the bucket once per shard, and its `read` with a textfile hits
#      its folder tier once per shard;
#   3. `cache stats --format prometheus` is valid exposition format, with no sample for what a tier cannot keep;
#   4. a textfile that cannot be written fails the warm at once, naming the path.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120

s3_up moto
start_proxy MOTO "$MOTO_S3_ENDPOINT"
make_bucket "$MOTO_S3_ENDPOINT" metrics-bucket
pack_dataset 160 10
start_origin "$E2E_TMP/store"

# config FILE VM_DIR: a folder tier for this "VM", then the bucket through the proxy.
config() {
  {
    printf 'tiers:\n  - name: local\n    path: %s\n' "$2"
    s3_tier_yaml region metrics-bucket "$MOTO_URL"
  } >"$1"
}
config "$E2E_TMP/vm1.yaml" "$E2E_TMP/vm1"
config "$E2E_TMP/vm2.yaml" "$E2E_TMP/vm2"

# The exposition format's parser: prom.py FILE|- prints {"name{tier,outcome}": value} as JSON, or exits 1 naming
# the first line that is not valid text format 0.0.4 (HELP/TYPE before the samples, names, escapes, values).
cat >"$E2E_TMP/prom.py" <<'PY'
import json, re, sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\} ([0-9]+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')

def parse(text):
    if not text.endswith("\n"):
        raise ValueError("no final newline")
    types, helps, samples, done = {}, {}, {}, set()
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            name, _, rest = line[7:].partition(" ")
            table = helps if line[2] == "H" else types
            if not NAME.match(name) or name in table or name in done:
                raise ValueError("bad or misplaced %s" % line)
            if table is types and rest not in ("counter", "gauge"):
                raise ValueError("bad type: %s" % line)
            table[name] = rest
            continue
        m = SAMPLE.match(line)
        if not m or m.group(1) not in types or m.group(1) not in helps:
            raise ValueError("bad sample: %r" % line)
        name = m.group(1)
        if (types[name] == "counter") != name.endswith("_total"):
            raise ValueError("a %s named %s" % (types[name], name))
        done.add(name)
        labels = dict(LABEL.findall(m.group(2)))
        key = "%s{%s}" % (name, ",".join(labels[k] for k in ("tier", "outcome") if k in labels))
        samples[key] = int(m.group(3))
    return samples

if __name__ == "__main__":
    text = sys.stdin.read() if sys.argv[1] == "-" else open(sys.argv[1]).read()
    try:
        print(json.dumps(parse(text), sort_keys=True))
    except ValueError as e:
        print("invalid exposition: %s" % e, file=sys.stderr)
        sys.exit(1)
PY
# metric FILE|- KEY: one sample's value ("absent" when there is none), e.g. metric f 'datavo_tier_hits_total{local}'.
metric() {
  python3 "$E2E_TMP/prom.py" "$1" | python3 -c "import json,sys; print(json.load(sys.stdin).get(sys.argv[1], 'absent'))" "$2"
}

# --- 1. the textfile during a warm -------------------------------------------------------------------------------

mkdir -p "$E2E_TMP/textfile"
PROM="$E2E_TMP/textfile/datavo.prom"
# The watcher: reads the file every 20 ms until the stop file appears; counts reads that do not parse (a reader
# that saw half a file) and records every distinct content's uploads.
python3 - "$PROM" "$E2E_TMP/watch.stop" "$E2E_TMP/watch.json" "$E2E_TMP/prom.py" <<'PY' &
import importlib.util, json, os, sys, time
path, stop, out, parser = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("prom", parser)
prom = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prom)
reads, bad, seen = 0, [], []
while not os.path.exists(stop):
    try:
        text = open(path).read()
    except FileNotFoundError:
        time.sleep(0.02)
        continue
    reads += 1
    try:
        prom.parse(text)
        if not seen or seen[-1] != text:
            seen.append(text)
    except ValueError as e:
        bad.append(str(e))
    time.sleep(0.02)
versions = [prom.parse(t).get("datavo_tier_uploads_total{region,uploaded}", -1) for t in seen]
json.dump({"reads": reads, "bad": bad, "versions": versions}, open(out, "w"))
PY
WATCHER=$!
track_pid "$WATCHER"
write_config <"$E2E_TMP/vm1.yaml"
# Each upload is held 1.5 s by the proxy: 16 uploads on 2 upload workers last about 12 s, several intervals of 5 s.
proxy_mode "$MOTO_URL" "delay seconds=1.5 op=PutObject"
run --json warm "$DS" --key bin --key txt --jobs 2 --metrics-textfile "$PROM"
proxy_mode "$MOTO_URL" "ok"
touch "$E2E_TMP/watch.stop"
wait "$WATCHER"
expect_eq "warm with a textfile: exit 0" 0 "$RC"
expect_eq "warm: every shard from the origin, every one uploaded" "[$SHARDS, $SHARDS]" \
  "$(json "[j['origin']['shards'], j['uploads']['uploaded']]" <<<"$OUT")"
expect_cmp "watcher: it read the file many times" "$(json "j['reads']" <"$E2E_TMP/watch.json")" -gt 50
expect_eq "watcher: never a half-written file" "[]" "$(json "j['bad'][:3]" <"$E2E_TMP/watch.json")"
expect_eq "watcher: rewritten during the warm (a version with uploads part way)" "true" \
  "$(json "any(0 < v < $SHARDS for v in j['versions'])" <"$E2E_TMP/watch.json")"
expect_cmp "watcher: at least 3 versions (start, during, end)" \
  "$(json "len(j['versions'])" <"$E2E_TMP/watch.json")" -ge 3
expect_eq "textfile at the end: every upload" "$SHARDS" "$(metric "$PROM" 'datavo_tier_uploads_total{region,uploaded}')"
expect_eq "textfile at the end: every shard installed locally" "$SHARDS" \
  "$(metric "$PROM" 'datavo_tier_installs_total{local}')"
expect_eq "textfile: no temporary left beside it" "datavo.prom" "$(ls -A "$E2E_TMP/textfile")"

# --- 2. the counters' values -------------------------------------------------------------------------------------

run --json cache stats
row="[r for r in j['tiers'] if r['tier'] == 'region'][0]"
expect_eq "cache stats (new process): the bucket's counters kept on this machine, in tier local" \
  '["this_machine", "local", ["evictions"], null]' \
  "$(json "[$row['scope'], $row['kept_in'], $row['not_kept'], $row['stats']['evictions']]" <<<"$OUT")"
expect_eq "cache stats: the bucket's misses, uploads, failures" "[$SHARDS, $SHARDS, 0]" \
  "$(json "[$row['stats'][k] for k in ('misses', 'uploads', 'upload_failures')]" <<<"$OUT")"
expect_eq "cache stats: the bucket's installed bytes are the folder tier's (the same shards)" \
  "$(json "[r['stats']['bytes_installed'] for r in j['tiers'] if r['tier'] == 'local'][0]" <<<"$OUT")" \
  "$(json "$row['stats']['bytes_installed']" <<<"$OUT")"
run cache stats
expect_contains "cache stats (text): says whose counters the bucket's are" \
  "tier region (s3): counters of this machine's processes, kept in tier 'local'" "$OUT"
expect_contains "cache stats (text): says what it cannot keep" "not kept: evictions" "$OUT"

run warm "$DS" --key bin --key txt
expect_eq "second warm: exit 0" 0 "$RC"
run cache stats --format prometheus
printf '%s\n' "$OUT" >"$E2E_TMP/vm1.prom"
expect_eq "cache stats --format prometheus: valid exposition format" 0 \
  "$(python3 "$E2E_TMP/prom.py" "$E2E_TMP/vm1.prom" >/dev/null 2>&1; echo $?)"
expect_eq "after a second warm: one folder-tier hit per shard" "$SHARDS" \
  "$(metric "$E2E_TMP/vm1.prom" 'datavo_tier_hits_total{local}')"
expect_eq "prometheus: no evictions sample for the bucket (not kept)" "absent" \
  "$(metric "$E2E_TMP/vm1.prom" 'datavo_tier_evictions_total{region}')"
expect_eq "prometheus: no uploads sample for the folder tier" "absent" \
  "$(metric "$E2E_TMP/vm1.prom" 'datavo_tier_uploads_total{local,uploaded}')"
expect_eq "prometheus: evictions of the folder tier are there" "0" \
  "$(metric "$E2E_TMP/vm1.prom" 'datavo_tier_evictions_total{local}')"
expect_eq "prometheus: the breaker is closed" "0" "$(metric "$E2E_TMP/vm1.prom" 'datavo_tier_breaker_open{region}')"
expect_contains "prometheus: HELP and TYPE of the counters" "# TYPE datavo_tier_hits_total counter" "$OUT"

write_config <"$E2E_TMP/vm2.yaml"
run warm "$DS" --key bin --key txt
expect_eq "second VM's warm: exit 0" 0 "$RC"
run cache stats --format prometheus
expect_eq "second VM: one bucket hit per shard" "$SHARDS" \
  "$(metric - 'datavo_tier_hits_total{region}' <<<"$OUT")"
expect_eq "second VM: one promotion into its folder tier per shard" "$SHARDS" \
  "$(metric - 'datavo_tier_promotions_total{local}' <<<"$OUT")"
expect_cmp "second VM: bytes served by the bucket" "$(metric - 'datavo_tier_served_bytes_total{region}' <<<"$OUT")" \
  -gt 0
run read "$DS" --key bin --key txt --metrics-textfile "$E2E_TMP/textfile/read.prom"
expect_eq "second VM's read with a textfile: exit 0" 0 "$RC"
expect_eq "read's textfile: one folder-tier hit per shard" "$SHARDS" \
  "$(metric "$E2E_TMP/textfile/read.prom" 'datavo_tier_hits_total{local}')"

# --- 4. a textfile that cannot be written ------------------------------------------------------------------------

run warm "$DS" --key bin --key txt --metrics-textfile "$E2E_TMP/no/such/dir/datavo.prom"
expect_eq "warm, textfile in a missing directory: exit 1" 1 "$RC"
expect_contains "warm, textfile in a missing directory: the error names it" \
  "metrics textfile $E2E_TMP/no/such/dir/datavo.prom" "$ERR"

finish
