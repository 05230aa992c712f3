#!/usr/bin/env bash
# Interop of the S3 tier with the reference clients, on moto and on s3rver (objects named
# [prefix/]<instance>/<content_hash>.tar):
#   1. boto3 (the image's boto3 1.43) reads what the tier wrote, a single PUT and a multipart upload: the same
#      bytes, and head_object shows the datavo-sha256 / datavo-size metadata;
#   2. the tier reads what boto3 put_object and upload_file (multipart, 5 MiB parts) and `aws s3 cp` (multipart,
#      8 MiB parts) wrote, without any datavo metadata: `datavo cache fetch --sha256` serves it from the bucket and
#      never asks the origin;
#   3. an object another tool wrote with the wrong bytes (no metadata) is not taken for the shard when the caller
#      knows its SHA-256: the origin serves it, the wrong object is replaced.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120
SUITE_STARTED=$(date +%s)

s3_up s3rver moto
make_bucket "$MOTO_S3_ENDPOINT" interop
mkdir -p "$E2E_TMP/files"
start_server "$E2E_TMP/files"

# A server, its bucket, its credentials and a prefix, one after the other.
SERVERS=("moto|$MOTO_S3_ENDPOINT|interop|AKIDINTEROP|any-secret|"
  "s3rver|$S3RVER_ENDPOINT|$S3RVER_BUCKET|$S3RVER_ACCESS_KEY_ID|$S3RVER_SECRET_ACCESS_KEY|interop/x")
n=0
for entry in "${SERVERS[@]}"; do
  IFS='|' read -r name endpoint bucket key secret prefix <<<"$entry"
  export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret
  extra=('part_size: 5MiB')
  [ -n "$prefix" ] && extra+=("prefix: $prefix")
  [ "$name" = s3rver ] && extra+=('single_flight: false')
  write_config "$E2E_TMP/$name-vm1.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n' \
    "$E2E_TMP/$name-vm1" "$(s3_tier_yaml bucket "$bucket" "$endpoint" "${extra[@]}")")
  INSTANCE=$(dv --json cache info | json "j['instance']")
  object() { entry_key "$INSTANCE" "$1" "$prefix"; }

  # --- 1. boto3 reads what the tier wrote ---
  for size in 200000 $((13 * 1024 * 1024 + 11)); do
    n=$((n + 1))
    h=$(hash_for "ours-$name-$size")
    sha=$(make_shard "$E2E_TMP/files/ours-$n.bin" "$size")
    run --json cache fetch "$h" --url "$SERVER_URL/ours-$n.bin" --sha256 "$sha"
    expect_eq "$name: the tier wrote $size bytes" '[0, 1]' "[$RC, $(json "j['uploads']['uploaded']" <<<"$OUT")]"
    meta=$(s3tool "$endpoint" head "$bucket" "$(object "$h")")
    expect_eq "$name, $size bytes: boto3 head_object shows datavo-sha256 and datavo-size" "[\"$sha\", \"$size\", $size]" \
      "$(json "[j['metadata'].get('datavo-sha256'), j['metadata'].get('datavo-size'), j['size']]" <<<"$meta")"
    s3tool "$endpoint" download "$bucket" "$(object "$h")" "$E2E_TMP/boto3-got.bin"
    expect_eq "$name, $size bytes: boto3 download_file reads the same bytes" "$sha" "$(sha256_of "$E2E_TMP/boto3-got.bin")"
    if [ "$name" = moto ] && [ "$size" -gt 5000000 ]; then
      expect_match "$name: a multipart object (its ETag says 3 parts)" '-3"$' "$(json "j['etag']" <<<"$meta")"
    fi
  done
  "$AWS_CLI" --endpoint-url "$endpoint" --region us-east-1 s3 cp "s3://$bucket/$(object "$h")" "$E2E_TMP/cli-got.bin" \
    >/dev/null 2>"$E2E_TMP/cli.err"
  expect_eq "$name: aws s3 cp reads the multipart object the tier wrote" "$sha" "$(sha256_of "$E2E_TMP/cli-got.bin")"

  # --- 2. the tier reads what boto3 and the aws CLI wrote ---
  write_config "$E2E_TMP/$name-vm2.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n' \
    "$E2E_TMP/$name-vm2" "$(s3_tier_yaml bucket "$bucket" "$endpoint" "${extra[@]}")")
  for how in put upload cli; do
    n=$((n + 1))
    h=$(hash_for "theirs-$name-$how")
    case $how in
      put) size=150000 ;;
      upload) size=$((17 * 1024 * 1024 + 3)) ;;
      cli) size=$((20 * 1024 * 1024 + 5)) ;;
    esac
    sha=$(make_shard "$E2E_TMP/files/theirs-$n.bin" "$size")
    case $how in
      put) s3tool "$endpoint" put "$bucket" "$(object "$h")" "$E2E_TMP/files/theirs-$n.bin" ;;
      upload)
        s3tool "$endpoint" upload "$bucket" "$(object "$h")" "$E2E_TMP/files/theirs-$n.bin" --part-size $((5 * 1024 * 1024)) \
          --threshold $((5 * 1024 * 1024))
        ;;
      cli)
        "$AWS_CLI" --endpoint-url "$endpoint" --region us-east-1 s3 cp "$E2E_TMP/files/theirs-$n.bin" \
          "s3://$bucket/$(object "$h")" >/dev/null 2>"$E2E_TMP/cli.err" || fail "$name: aws s3 cp upload" "$(cat "$E2E_TMP/cli.err")"
        ;;
    esac
    if [ "$name" = moto ] && [ "$how" != put ]; then
      expect_match "$name: $how wrote a multipart object" '-[0-9]+"$' \
        "$(s3tool "$endpoint" head "$bucket" "$(object "$h")" | json "j['etag']")"
    fi
    before=$(server_requests "/theirs-$n.bin")
    run --json cache fetch "$h" --url "$SERVER_URL/theirs-$n.bin" --sha256 "$sha" --size "$size"
    expect_eq "$name: the tier reads what $how wrote ($size bytes), from the bucket" '[0, "promoted"]' \
      "[$RC, \"$(json "j['source']" <<<"$OUT")\"]"
    expect_eq "$name, $how: the bytes" "$sha" "$(sha256_of "$(json "j['path']" <<<"$OUT" 2>/dev/null || echo /nonexistent)" 2>/dev/null)"
    expect_eq "$name, $how: the origin was not asked" "$before" "$(server_requests "/theirs-$n.bin")"
  done

  # --- 3. another tool's object with the wrong bytes ---
  n=$((n + 1))
  h=$(hash_for "wrong-$name")
  sha=$(make_shard "$E2E_TMP/files/right-$n.bin" 100000)
  head -c 100000 /dev/urandom >"$E2E_TMP/wrong.bin"
  s3tool "$endpoint" put "$bucket" "$(object "$h")" "$E2E_TMP/wrong.bin"
  run --json cache fetch "$h" --url "$SERVER_URL/right-$n.bin" --sha256 "$sha"
  expect_eq "$name: a wrong object without metadata is not taken for the shard: the origin serves it" \
    '[0, "fetched"]' "[$RC, \"$(json "j['source']" <<<"$OUT")\"]"
  expect_eq "$name, wrong object: the bytes served are the right ones" "$sha" "$(sha256_of "$(json "j['path']" <<<"$OUT")")"
  expect_contains "$name, wrong object: a WARNING says it was deleted" "deleted the object" "$ERR"
  s3tool "$endpoint" get "$bucket" "$(object "$h")" "$E2E_TMP/now.bin"
  expect_eq "$name, wrong object: replaced by the right bytes" "$sha" "$(sha256_of "$E2E_TMP/now.bin")"
done
expect_eq "moto: no multipart upload left open" 0 "$(AWS_ACCESS_KEY_ID=x s3tool "$MOTO_S3_ENDPOINT" uploads interop)"

echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
