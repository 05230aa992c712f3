// Resolving a dataset for reading: the one place where what a front end was given (a dataset name, a key group, a
// revision) becomes a manifest and a normalized key group. SampleStream::from_dataset and datavo::warm both call it,
// so the CLI (`datavo read`, `datavo warm`) and the Python SDK accept and refuse the same input, with the same
// errors, and read the same shards.
//
// Errors, as one vocabulary for every front end:
//   - invalid_argument: a malformed name (naming the part at fault), no key;
//   - invalid_argument with sys_errno ENOENT: a dataset, split, revision or key the origin does not have (bad input
//     that names something absent; reported_code() names it not_found in both front ends: the Python SDK raises
//     FileNotFoundError for it, the CLI exits 2);
//   - whatever OriginClient::manifest() returns otherwise (an unreachable server, offline with nothing cached, ...).
//
// Thread safety: functions only; resolve_dataset() is as thread-safe as the OriginClient it is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"

namespace datavo {

// The checks that need no I/O: `dataset` is "<dataset>/<split>" and `keys` names at least one key. Front ends call
// it before they open a client or a cache, so that bad input fails before any request.
Result<DatasetName> parse_dataset_request(std::string_view dataset, const std::vector<std::string>& keys);

struct ResolvedDataset {
  Manifest manifest;
  std::vector<std::string> keys;  // sorted, de-duplicated, each one of manifest.keys
  ManifestSource source = ManifestSource::cache;
};

// The manifest of `name` at `revision` (the latest when nullopt; through the manifest cache, see
// origin_client.hpp) and `keys` normalized against it. Errors at the top of this file.
Result<ResolvedDataset> resolve_dataset(OriginClient& client, const DatasetName& name, std::vector<std::string> keys,
                                        std::optional<std::uint64_t> revision);

}  // namespace datavo
