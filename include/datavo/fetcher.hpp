// What a shard's bytes must be, and the Fetcher that produces them on a miss: the vocabulary shared by the tiers
// (a remote tier's recorded metadata is an Expectation), the hierarchy (which checks the bytes against it) and every
// source of bytes (the origin client, the URL fetcher).
//
// Thread safety: values only. A Fetcher's own thread safety is stated by whoever makes it.
#pragma once

#include <functional>
#include <optional>

#include "datavo/byte_sink.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

// What the bytes of a shard must be, as far as anyone knows (a fetcher, a tier's metadata, the caller).
struct Expectation {
  std::optional<Bytes> size;
  std::optional<Sha256> sha256;
};

// Writes the shard's bytes into `sink` and returns what they must be (fields it cannot tell stay empty). The sink
// may already hold a prefix of the bytes (a download a killed process left half-done): a fetcher that can
// continue from sink.written() does (the origin client asks for the rest with a Range request), any other calls
// sink.restart() first. May be called again with a restarted sink to retry. Returning an Error fails the call;
// nothing is installed.
using Fetcher = std::function<Result<Expectation>(ByteSink& sink)>;

}  // namespace datavo
