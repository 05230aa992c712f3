// Azure Blob Storage "Shared Key" request signing, as Microsoft's "Authorize with Shared Key" defines it for
// x-ms-version 2015-02-21 and later:
//
//   StringToSign = VERB + "\n" + Content-Encoding + "\n" + Content-Language + "\n" + Content-Length + "\n" +
//                  Content-MD5 + "\n" + Content-Type + "\n" + Date + "\n" + If-Modified-Since + "\n" +
//                  If-Match + "\n" + If-None-Match + "\n" + If-Unmodified-Since + "\n" + Range + "\n" +
//                  CanonicalizedHeaders + CanonicalizedResource
//   Authorization: SharedKey <account>:base64(HMAC-SHA256(base64-decoded account key, UTF-8 StringToSign))
//
// - Content-Length is the empty string when it is 0 (and when there is no body). It is the header when the
//   request has one, else the size of the body the transport will send.
// - Date is empty: the signer always sets x-ms-date, which takes its place.
// - CanonicalizedHeaders: every x-ms-* header, name lowercased, value trimmed, sorted by name, "name:value\n";
//   repeated names are joined with ",".
// - CanonicalizedResource: "/" + account + the URL's path as sent (percent-encoded; "/" when empty), then for each
//   query parameter, sorted by lowercased name: "\n" + lowercased decoded name + ":" + its decoded values, sorted
//   and joined with ",". For a path-style URL (Azurite: http://127.0.0.1:10000/devstoreaccount1/container/blob)
//   the path already starts with the account, so it appears twice ("/devstoreaccount1/devstoreaccount1/
//   container/blob"), which is what the service and the SDKs expect.
//
// Secrets: the key is held decoded in SharedKey and never appears in a log line or an Error message.
// Thread safety: reentrant; SharedKey is an immutable value.
#pragma once

#include <string>
#include <string_view>

#include "datavo/result.hpp"
#include "net/http_client.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::azure {

// The service version every request of the Azure tier declares (x-ms-version). Bearer tokens need 2017-11-09 or
// later; Azurite 3.35 accepts up to 2025-11-05.
inline constexpr const char* k_storage_api_version = "2021-12-02";

struct SharedKey {
  std::string account;
  std::string key;  // the decoded key bytes; a secret
};

// Decodes `key_base64` (the account key as the portal shows it). Error (invalid_argument) when it is not base64;
// the message names `origin` (e.g. "$AZURE_STORAGE_KEY"), never the text.
Result<SharedKey> make_shared_key(std::string account, std::string_view key_base64, std::string_view origin);

// RFC 1123 date in GMT, as x-ms-date wants it: "Tue, 01 Dec 2026 08:00:00 GMT".
std::string http_date(cloud::WallClock::time_point time);

// The pieces of the string-to-sign (see the top of this file). invalid_argument for a URL without a scheme and
// host or with a malformed percent-escape in its query.
Result<std::string> canonicalized_resource(std::string_view url, std::string_view account);
std::string canonicalized_headers(const net::HttpHeaders& headers);
Result<std::string> string_to_sign(const net::PreparedRequest& request, std::string_view account);

// base64(HMAC-SHA256(key, text)).
std::string hmac_sha256_base64(std::string_view key, std::string_view text);

// Sets x-ms-date to `now` and x-ms-version (when the request has none) on `request`, then signs it:
// "Authorization: SharedKey <account>:<signature>". Every header sent must already be in request.headers.
Result<void> sign_shared_key(net::PreparedRequest& request, const SharedKey& key, cloud::WallClock::time_point now);

// Sets x-ms-date to `now` (replacing any) and x-ms-version to k_storage_api_version unless present: what every
// Azure request needs whatever authorizes it.
void set_date_and_version(net::PreparedRequest& request, cloud::WallClock::time_point now);

}  // namespace datavo::azure
