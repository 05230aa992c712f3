#include "origin/keyed_mutex.hpp"

namespace datavo::origin {
namespace {

// Above this many keys, the ones no one holds are swept on the next get(): the table stays bounded by the keys in
// use plus this.
constexpr std::size_t k_sweep_above = 1024;

}  // namespace

std::shared_ptr<std::mutex> KeyedMutex::get(const std::string& key) {
  std::lock_guard lock(mu_);
  auto& slot = table_[key];
  auto mutex = slot.lock();
  if (!mutex) {
    mutex = std::make_shared<std::mutex>();
    slot = mutex;
  }
  if (table_.size() > k_sweep_above) std::erase_if(table_, [](const auto& entry) { return entry.second.expired(); });
  return mutex;
}

}  // namespace datavo::origin
