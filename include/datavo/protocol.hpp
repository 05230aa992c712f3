// Origin protocol v1 (docs/protocol.md): the values a Datavo client and an origin server exchange, their JSON in
// both directions, and the rules for names. The reference server (src/origin/) writes these values and the client
// (src/client/) reads them with the same code, so the two cannot disagree about a field.
//
// Every parse() refuses malformed input with an Error whose message names the field ("shards[2].index"). Its code
// says whose fault it is: ErrorCode::invalid_argument for what a server reads from a client (a request: answered
// 400), ErrorCode::integrity for a manifest and ErrorCode::remote for the other answers a client reads from a
// server. to_json() writes the compact JSON the reference server sends; for every valid value x,
// T::parse(x.to_json()) gives x back.
//
// Thread safety: value types; every function is reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datavo/chunk_digests.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

namespace protocol {

// The version of GET /v1/instance's "protocol_version".
inline constexpr std::uint64_t k_version = 1;

// A dataset, split or key name: 1 to 128 bytes of [A-Za-z0-9._-], starting with a letter or a digit, without ".."
// anywhere. invalid_argument naming `what` ("dataset", "split", "key"), the name (quoted) and the rule it breaks.
Result<void> validate_name(std::string_view what, std::string_view name);

// A sample id: 1 to 512 bytes of '/'-separated components, each [A-Za-z0-9_-][A-Za-z0-9._-]{0,127} (so no empty,
// "." or ".." component, no leading '/', no NUL), the last one without a dot. invalid_argument otherwise.
Result<void> validate_sample_id(std::string_view id);

// A number as the protocol writes it in text (a revision in a URL or a file, a ticket's shard index and expiry):
// decimal digits only, no sign, no leading zero, at most 18 digits, and at least `min`. nullopt otherwise.
std::optional<std::uint64_t> parse_number(std::string_view text, std::uint64_t min);

// `text` in double quotes, with '"', '\' and the bytes outside printable ASCII written as \xNN: a name that came
// from the network, safe to put in a message or a log line.
std::string quote(std::string_view text);

// The "code" of the error body of an HTTP status: 400 bad_request, 401 unauthorized, 403 forbidden, 404
// not_found, 405 method_not_allowed, 410 expired, 413 payload_too_large, 416 range_not_satisfiable, 503
// unavailable, other 5xx internal, anything else "error".
const char* error_code_for_status(int status);

}  // namespace protocol

// "<dataset>/<split>", each part a name (protocol::validate_name).
struct DatasetName {
  std::string dataset;
  std::string split;
  // invalid_argument, naming the part at fault, unless `text` is a valid "<dataset>/<split>".
  static Result<DatasetName> parse(std::string_view text);
  std::string full() const { return dataset + "/" + split; }
  bool operator==(const DatasetName&) const = default;
};

struct ManifestShard {
  std::uint64_t index = 0;
  std::vector<std::string> samples;  // sample ids, shard order
  bool operator==(const ManifestShard&) const = default;
};

// The state of a dataset at one revision: the body of GET /v1/datasets/<dataset>/<split>/manifest.
struct Manifest {
  DatasetName name;
  std::string manifest_ref;
  std::uint64_t revision = 0;
  std::vector<std::string> keys;  // sorted bytewise, unique
  std::vector<ManifestShard> shards;

  // Parses and validates a manifest body: integrity, naming the field, for anything malformed (a name that breaks
  // the rules, a revision of 0, unsorted or repeated keys, a repeated shard index, an empty sample id).
  static Result<Manifest> parse(std::string_view json_text);
  std::string to_json() const;
  // REQUIRES: `keys` sorted and de-duplicated (see normalize_keys()) and every key in `this->keys`.
  ShardIdentity identity(std::size_t position, const std::vector<std::string>& keys) const;
  // Sorts and de-duplicates `keys`; invalid_argument when it is empty or names a key this manifest lacks (the
  // message lists the available keys).
  Result<std::vector<std::string>> normalize_keys(std::vector<std::string> keys) const;
  bool operator==(const Manifest&) const = default;
};

// The body of POST /v1/stream-tickets: one key group of one shard of a pinned revision.
struct TicketRequest {
  DatasetName name;
  std::uint64_t revision = 0;  // >= 1
  std::uint64_t shard_index = 0;
  std::vector<std::string> keys;  // non-empty; parse() sorts and de-duplicates them

  // invalid_argument, naming the field, for a body that is not a JSON object, a missing field or one of the
  // wrong type, an invalid name, a revision of 0 or an empty key list. Other fields are ignored.
  static Result<TicketRequest> parse(std::string_view json_text);
  std::string to_json() const;
  bool operator==(const TicketRequest&) const = default;
};

// A stream ticket: the 200 answer to POST /v1/stream-tickets.
struct StreamTicket {
  ContentHash content_hash;
  Bytes size;
  Sha256 sha256;
  std::string url;              // as the server sent it: relative to the server's base URL, or absolute http(s)://
  std::int64_t expires_at = 0;  // Unix seconds
  // The SHA-256 of every chunk of the tar (docs/protocol.md, "Chunk digests"): the JSON fields "chunk_size",
  // "chunks" and "chunks_sha256". nullopt when the server sends none of them (a server from before chunk digests):
  // the bytes are then verified as a whole only.
  std::optional<ChunkDigests> chunks;

  // remote, naming the field, for anything malformed (an empty url included). The chunk fields are all there or
  // all absent; when there, refused unless chunk_size is within [k_min_chunk_size, k_max_chunk_size], "chunks"
  // holds exactly one digest per chunk of `size` bytes, and "chunks_sha256" is the SHA-256 of their canonical list
  // (ChunkDigests::binding()). Fields this version does not know are ignored.
  static Result<StreamTicket> parse(std::string_view json_text);
  std::string to_json() const;
  bool operator==(const StreamTicket&) const = default;
};

// The 202 answer to POST /v1/stream-tickets: the origin is building the key group's tar; ask again after
// Retry-After.
struct TicketPreparing {
  ContentHash content_hash;

  // remote, naming the field, unless the body is {"status": "preparing", "content_hash": <content hash>}.
  static Result<TicketPreparing> parse(std::string_view json_text);
  std::string to_json() const;
  bool operator==(const TicketPreparing&) const = default;
};

// The body of GET /v1/instance.
struct InstanceInfo {
  std::string instance_id;             // non-empty; stable across restarts of one store
  std::uint64_t protocol_version = 0;  // 0 when the server does not say
  std::string server;                  // e.g. "datavo-serve/0.1.0"; empty when the server does not say

  // remote, naming the field, unless instance_id is a non-empty string (and the other two, when present, a
  // non-negative integer and a string).
  static Result<InstanceInfo> parse(std::string_view json_text);
  std::string to_json() const;
  bool operator==(const InstanceInfo&) const = default;
};

// The body of every error answer: {"error": {"code": "<code>", "message": "<text>"}}. Clients branch on the
// status and `code`; `message` is for people.
struct ErrorBody {
  std::string code;  // protocol::error_code_for_status() of the answer's status
  std::string message;

  // remote, naming the field, unless the body has that shape.
  static Result<ErrorBody> parse(std::string_view json_text);
  std::string to_json() const;
  bool operator==(const ErrorBody&) const = default;
};

// The body of GET /v1/metrics, in the Prometheus text format: datavo_requests_total by (route, status) and
// datavo_response_bytes_total by route.
struct OriginMetrics {
  std::map<std::pair<std::string, std::string>, std::uint64_t> requests;  // (route, status) -> count
  std::map<std::string, std::uint64_t> response_bytes;                    // route -> body bytes sent
  // The sum over statuses for `route` ("manifest", "ticket", "shard", ...).
  std::uint64_t requests_for(std::string_view route) const;
  std::uint64_t requests_for(std::string_view route, std::string_view status) const;
  // Parses the text format: remote, naming the line, for a sample of these two metrics that does not parse;
  // other lines are ignored. Values may be written as floats ("12", "12.0", "1.2e+01").
  static Result<OriginMetrics> parse(std::string_view text);
  // Both metrics with their HELP and TYPE lines, one line per map entry.
  std::string to_text() const;
  bool operator==(const OriginMetrics&) const = default;
};

}  // namespace datavo
