// One mutex per key (a content hash), created on demand and dropped when no one holds it: the origin serialises
// the first builds of one key-group tar within a process with it.
//
// Thread safety: get() may be called from any thread at once.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace datavo::origin {

class KeyedMutex {
 public:
  // The mutex of `key`: one and the same for as long as any caller holds the returned pointer.
  std::shared_ptr<std::mutex> get(const std::string& key);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<std::mutex>> table_;  // guarded by mu_
};

}  // namespace datavo::origin
