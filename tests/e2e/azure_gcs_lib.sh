# Shared helpers of the Azure Blob and GCS end-to-end suites (tests/e2e/test_azure_*.sh, test_gcs_*.sh,
# test_cloud_*.sh). Source it right after lib.sh:
#
#     : "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"; export DATAVO_EMULATOR_DIR
#     . "$(dirname "$0")/lib.sh"            # (lib.sh moves HOME into the suite's temp dir)
#     . "$(dirname "$0")/azure_gcs_lib.sh"
#
# What it gives a suite:
#   - cloud_up NAME...: Azurite and / or the GCS emulator (tests/support/emulators.sh) in the suite's own run dir,
#     stopped by PID on exit, and the reference clients (npm @azure/storage-blob, @google-cloud/storage, installed
#     once into $DATAVO_EMULATOR_DIR/clients); dies naming what could not start. Exports the harness's variables
#     (AZURITE_*, GCS_EMULATOR_*, STORAGE_EMULATOR_HOST).
#   - aztool ARGS...: tests/support/azure_tool.js (@azure/storage-blob) with Azurite's connection string;
#     gcstool ARGS...: tests/support/gcs_tool.js (@google-cloud/storage) against the GCS emulator.
#   - azure_tier_yaml NAME CONTAINER [FIELD: VALUE ...], gcs_tier_yaml NAME BUCKET [FIELD: VALUE ...]: the YAML of
#     one tier (a tiers-list item); vm_config FILE VM_DIR TIER_YAML...: a folder tier for a "VM", then those.
#   - pack_dataset NAME SAMPLES PER_SHARD [SAMPLE_BYTES]: a dataset in $E2E_TMP/store; sets DS, SHARDS, REVISION.
#   - azurite_count METHOD REGEX: requests in Azurite's access log whose path matches REGEX (entries: not leases).
#   - with_key CMD...: CMD with AZURE_STORAGE_CONNECTION_STRING set to Azurite's (SharedKey for the tier).
#   - start_proxy, proxy_mode, proxy_reset, proxy_json, proxy_op: tests/support/cloud_proxy.py (cloud_proxy_lib.sh).
# No credential of the machine is used: the cloud variables are unset here, the metadata servers point at a closed
# port, and each suite sets what it means to test.

AGLIB_HARNESS="$DATAVO_SOURCE_DIR/tests/support/emulators.sh"
export DATAVO_EMULATOR_RUN_DIR="$E2E_TMP/emulators"
unset AZURE_STORAGE_CONNECTION_STRING AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY AZURE_CLIENT_ID AZURE_TENANT_ID \
  AZURE_CLIENT_SECRET AZURE_FEDERATED_TOKEN_FILE IDENTITY_ENDPOINT IDENTITY_HEADER MSI_ENDPOINT \
  GOOGLE_APPLICATION_CREDENTIALS CLOUDSDK_CONFIG STORAGE_EMULATOR_HOST
AGLIB_CLOSED_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export GCE_METADATA_HOST="127.0.0.1:$AGLIB_CLOSED_PORT" GCE_METADATA_IP="127.0.0.1:$AGLIB_CLOSED_PORT"
export AZURE_POD_IDENTITY_AUTHORITY_HOST="http://127.0.0.1:$AGLIB_CLOSED_PORT"

# shellcheck source=../support/emulators.sh
. "$AGLIB_HARNESS"
# shellcheck source=cloud_proxy_lib.sh
. "$DATAVO_SOURCE_DIR/tests/e2e/cloud_proxy_lib.sh"
on_exit_first "emulators_down >/dev/null 2>&1"

cloud_up() {
  local started lines
  started=$(date +%s%N)
  if ! lines=$(emu_up_print "$@" 2>"$E2E_TMP/emulators-up.err"); then
    die "emulators up: $*" "$(e2e_abbrev "$(cat "$E2E_TMP/emulators-up.err")")"
  fi
  eval "$lines"
  NODE_PATH=$(emulators_clients 2>"$E2E_TMP/clients.err") ||
    die "the reference clients (npm)" "$(e2e_abbrev "$(cat "$E2E_TMP/clients.err")")"
  export NODE_PATH
  AGLIB_NODE=$(emu_node)
  echo "# emulators up ($*), clients ready: $((($(date +%s%N) - started) / 1000000)) ms"
}

aztool() {
  AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING" timeout 120 "$AGLIB_NODE" \
    "$DATAVO_SOURCE_DIR/tests/support/azure_tool.js" "$@"
}
gcstool() { timeout 120 "$AGLIB_NODE" "$DATAVO_SOURCE_DIR/tests/support/gcs_tool.js" "$@"; }

with_key() { AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING" "$@"; }

# azure_tier_yaml NAME CONTAINER [FIELD: VALUE ...]: an azure_blob tier on Azurite (path-style container URL).
azure_tier_yaml() {
  local name=$1 container=$2 field
  shift 2
  printf '  - name: %s\n    type: azure_blob\n    container_url: %s/%s\n' "$name" "$AZURITE_BLOB_ENDPOINT" "$container"
  for field in "$@"; do printf '    %s\n' "$field"; done
}

# gcs_tier_yaml NAME BUCKET [FIELD: VALUE ...]: a gcs tier (the endpoint is $STORAGE_EMULATOR_HOST, or a field).
gcs_tier_yaml() {
  local name=$1 bucket=$2 field
  shift 2
  printf '  - name: %s\n    type: gcs\n    bucket: %s\n' "$name" "$bucket"
  for field in "$@"; do printf '    %s\n' "$field"; done
}

# vm_config FILE VM_DIR TIER_YAML...: a "VM": its own folder tier (named local), then the given tiers.
vm_config() {
  local file=$1 vm=$2
  shift 2
  {
    printf 'tiers:\n  - name: local\n    path: %s\n' "$vm"
    printf '%s\n' "$@"
  } >"$file"
}

# pack_dataset NAME SAMPLES PER_SHARD [SAMPLE_BYTES]: packs a dataset NAME/train into $E2E_TMP/store.
pack_dataset() {
  DS=$1/train
  make_samples "$E2E_TMP/src-$1" "$2" "${4:-2000}"
  run --json pack "$E2E_TMP/src-$1" --root "$E2E_TMP/store" --dataset "$DS" --samples-per-shard "$3"
  [ "$RC" -eq 0 ] || die "pack $DS" "$ERR"
  SHARDS=$(json "j['total_shards']" <<<"$OUT")
  REVISION=$(json "j['revision']" <<<"$OUT")
}

# azurite_count METHOD PATH_ERE [STATUS]: requests of METHOD whose path (after /<account>/) matches PATH_ERE in
# Azurite's access log, answered STATUS (any when not given).
# -a: the suites truncate the log while Azurite writes it at its own offset, so the file may start with NULs (and
# grep would call it binary and count nothing).
azurite_count() {
  local log="$DATAVO_EMULATOR_RUN_DIR/azurite.log"
  grep -a -E "\"$1 /$AZURITE_ACCOUNT_NAME/$2 HTTP/1.1\" ${3:-[0-9]+} " "$log" 2>/dev/null | wc -l
}

# entry_name INSTANCE HASH [PREFIX]: the object name of an entry.
entry_name() { echo "${3:+$3/}$1/$2.tar"; }
