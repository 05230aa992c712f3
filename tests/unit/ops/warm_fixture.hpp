// The fixture of the warm tests: the fake origin (tests/unit/client/fake_origin.hpp) with 6 shards of 5 samples, a
// fresh folder tier, and requests that ignore the environment.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "datavo/warm.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"
#include "unit/client/fake_origin.hpp"

namespace datavo::opstest {

class WarmFixture : public ::testing::Test {
 protected:
  WarmFixture() : origin(clienttest::fake_dataset(6, 5)), cache(clienttest::fresh_cache(dir.sub("cache"))) {}

  WarmRequest request(std::string dataset = "fake/train",
                      std::vector<std::string> keys = {"transcript.txt", "audio.wav"}) {
    WarmRequest r;
    r.dataset = std::move(dataset);
    r.keys = std::move(keys);
    r.cache = cache;
    r.origin = clienttest::client_options(origin.base_url(), dir.sub("manifests"));
    return r;
  }

  shardtest::TempDir dir;
  clienttest::FakeOrigin origin;
  std::shared_ptr<ShardCacheHierarchy> cache;
};

}  // namespace datavo::opstest
