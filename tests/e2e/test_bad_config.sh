#!/usr/bin/env bash
# Every kind of bad shards.yaml makes `datavo cache info --config FILE` exit 2 with an error on stderr that names
# the file and the line (docs/config.md, "Errors"); a good file exits 0.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DATAVO_BIN="${DATAVO_BIN:-$here/../../build/cli/datavo}"
if [[ ! -x "$DATAVO_BIN" ]]; then
  echo "test_bad_config: $DATAVO_BIN is not an executable; set DATAVO_BIN" >&2
  exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/datavo-e2e-bad-config.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# Never read the real ~/.config or /etc-adjacent user state, and never write into the real cache.
export HOME="$work/home"
export DATAVO_SHARD_CACHE_DIR="$work/default-cache"
unset DATAVO_SHARD_CACHE_CONFIG
mkdir -p "$HOME"

passed=0
failed=0

# Prints one failed check; the caller counts the case once.
fail() { echo "FAIL: $1" >&2; }

# expect_bad NAME NEEDLE... : runs `cache info` on $work/NAME.yaml (written beforehand) and checks exit code 2,
# the `datavo: error:` prefix (any case) and that stderr contains every NEEDLE.
expect_bad() {
  local name="$1"
  shift
  local file="$work/$name.yaml"
  local status=0
  "$DATAVO_BIN" cache info --config "$file" >"$work/out" 2>"$work/err" || status=$?
  local ok=1
  if [[ "$status" -ne 2 ]]; then
    fail "$name: exit code $status, expected 2"
    ok=0
  fi
  # Case-insensitive: the CLI's error prefix is "datavo: error:" or the logger's "datavo: ERROR:".
  if ! grep -qiF "datavo: error:" "$work/err"; then
    fail "$name: stderr lacks 'datavo: error:'"
    ok=0
  fi
  local needle
  for needle in "$@"; do
    if ! grep -qF -- "$needle" "$work/err"; then
      fail "$name: stderr lacks '$needle'"
      ok=0
    fi
  done
  if [[ "$ok" -eq 1 ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    sed 's/^/    stderr: /' "$work/err" >&2
  fi
}

write() { cat >"$work/$1.yaml"; }

write unknown_top_key <<'EOF'
tiers:
  - path: /tmp/x
tier:
  - path: /tmp/y
EOF
expect_bad unknown_top_key "unknown_top_key.yaml:3:" "tier: unknown key"

write unknown_tier_key <<'EOF'
tiers:
  - name: local
    path: /tmp/x
    bucket: my-bucket
EOF
expect_bad unknown_tier_key "unknown_tier_key.yaml:4:" "tiers[0].bucket: unknown key"

write unknown_s3_key <<'EOF'
tiers:
  - path: /tmp/x
  - type: s3
    bucket: my-bucket
    path: /tmp/y
EOF
expect_bad unknown_s3_key "unknown_s3_key.yaml:5:" "tiers[1].path: unknown key"

write list_for_scalar <<'EOF'
tiers:
  - path:
      - /tmp/a
      - /tmp/b
EOF
expect_bad list_for_scalar "list_for_scalar.yaml:2:" "tiers[0].path: expected a string, got a list"

write string_read_only <<'EOF'
tiers:
  - path: /tmp/x
    read_only: "yes"
EOF
expect_bad string_read_only "string_read_only.yaml:3:" "tiers[0].read_only"

write negative_size <<'EOF'
tiers:
  - path: /tmp/x
    max_bytes: -5GB
EOF
expect_bad negative_size "negative_size.yaml:3:" "tiers[0].max_bytes"

write garbled_size <<'EOF'
tiers:
  - name: local
    path: /tmp/x
    max_bytes: 200GB
  - name: scratch
    path: /tmp/y
    max_bytes: 12XB
EOF
expect_bad garbled_size "garbled_size.yaml:7:" 'tiers[1].max_bytes: invalid size "12XB"'

write overflow_size <<'EOF'
tiers:
  - path: /tmp/x
    max_bytes: 99999999999TB
EOF
expect_bad overflow_size "overflow_size.yaml:3:" "tiers[0].max_bytes" "too large"

write empty_tiers <<'EOF'
# nothing configured yet
tiers: []
EOF
expect_bad empty_tiers "empty_tiers.yaml:2:" "tiers: empty list"

write missing_tiers <<'EOF'
root: /old/cache
EOF
expect_bad missing_tiers "missing_tiers.yaml:1:" "tiers: missing"

write no_folder_tier <<'EOF'
tiers:
  - type: s3
    bucket: my-bucket
EOF
expect_bad no_folder_tier "no_folder_tier.yaml:1:" "no folder tier"

write unknown_type <<'EOF'
tiers:
  - path: /tmp/x
  - type: ftp
    host: example.org
EOF
expect_bad unknown_type "unknown_type.yaml:3:" 'tiers[1].type: unknown tier type "ftp"'

write duplicate_names <<'EOF'
tiers:
  - name: fast
    path: /tmp/x
  - name: fast
    path: /tmp/y
EOF
expect_bad duplicate_names "duplicate_names.yaml:4:" 'duplicate tier name "fast"'

write duplicate_default_names <<'EOF'
tiers:
  - path: /tmp/x
  - path: /tmp/x
EOF
expect_bad duplicate_default_names "duplicate_default_names.yaml:3:" 'duplicate tier name "/tmp/x"'

write missing_required <<'EOF'
tiers:
  - path: /tmp/x
  - type: gcs
    project: datavo-prod
EOF
expect_bad missing_required "missing_required.yaml:3:" "tiers[1].bucket: missing"

# max_age is a field of every tier type (gc expires a cloud tier's objects by it); zero is refused on each.
write zero_max_age_on_cloud <<'EOF'
tiers:
  - path: /tmp/x
  - type: s3
    bucket: my-bucket
    max_age: 0d
EOF
expect_bad zero_max_age_on_cloud "zero_max_age_on_cloud.yaml:5:" "tiers[1].max_age" "must be positive"

write unset_variable <<'EOF'
tiers:
  - path: ${DATAVO_E2E_SURELY_UNSET}/shards
EOF
expect_bad unset_variable "unset_variable.yaml:2:" "DATAVO_E2E_SURELY_UNSET is not set"

write syntax_error <<'EOF'
tiers:
  - path: /tmp/x
   max_bytes: 1GB
EOF
expect_bad syntax_error "syntax_error.yaml:3:" "YAML syntax error"

write empty_file </dev/null
expect_bad empty_file "empty_file.yaml:1:" "empty configuration"

write list_top_level <<'EOF'
- path: /tmp/x
EOF
expect_bad list_top_level "list_top_level.yaml:1:" "top level"

# Unreadable: a directory where the file should be, and a path that does not exist. There is no line to name.
mkdir "$work/a_directory.yaml"
expect_bad a_directory "a_directory.yaml" "cannot read configuration file"
expect_bad does_not_exist "does_not_exist.yaml"

# A good file: exit 0.
cat >"$work/good.yaml" <<EOF
root: /legacy/ignored
tiers:
  - name: local
    path: $work/cache-local
    max_bytes: 1GB
    max_age: 30d
  - name: shared
    path: \$HOME/cache-shared
    read_only: false
EOF
status=0
"$DATAVO_BIN" cache info --config "$work/good.yaml" >"$work/out" 2>"$work/err" || status=$?
if [[ "$status" -eq 0 ]]; then
  passed=$((passed + 1))
else
  fail "good: exit code $status, expected 0"
  failed=$((failed + 1))
  sed 's/^/    stderr: /' "$work/err" >&2
fi

echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
