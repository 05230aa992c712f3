#include "datavo/dataset.hpp"

#include <cerrno>

namespace datavo {
namespace {

Error no_key(const DatasetName& name) {
  return Error{ErrorCode::invalid_argument,
               name.full() + ": no key given: name at least one (e.g. audio.wav) of the key group to read"};
}

}  // namespace

Result<DatasetName> parse_dataset_request(std::string_view dataset, const std::vector<std::string>& keys) {
  auto name = DatasetName::parse(dataset);
  if (!name) return std::move(name).error();
  if (keys.empty()) return no_key(*name);
  return name;
}

Result<ResolvedDataset> resolve_dataset(OriginClient& client, const DatasetName& name, std::vector<std::string> keys,
                                        std::optional<std::uint64_t> revision) {
  if (keys.empty()) return no_key(name);
  auto resolved = client.manifest(name, revision);
  if (!resolved) return std::move(resolved).error();
  auto normalized = resolved->manifest.normalize_keys(std::move(keys));
  if (!normalized) {
    // With a key given, the only refusal left is a key the dataset lacks: input that names something absent, as
    // an unknown dataset or revision is.
    Error error = std::move(normalized).error();
    error.sys_errno = ENOENT;
    return error;
  }
  return ResolvedDataset{std::move(resolved->manifest), std::move(*normalized), resolved->source};
}

}  // namespace datavo
