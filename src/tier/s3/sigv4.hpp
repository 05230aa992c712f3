// AWS Signature Version 4 (AWS4-HMAC-SHA256), as S3 specifies it, written once for every S3 request:
// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html (the Authorization header) and
// https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html (presigned URLs).
//
// The canonical request is built from the request as it goes on the wire:
//   - the canonical URI is the URL's path percent-decoded once, then each byte but the RFC 3986 unreserved ones
//     and '/' percent-encoded once (S3 does not double-encode, and an empty path is "/");
//   - the canonical query string is every parameter of the URL's query, name and value percent-decoded ('+' is a
//     space, as S3 reads it) then encoded the same way ('/' too), sorted by name then value; a parameter without
//     a value is "name=";
//   - the signed headers are host (the Host header sent, else the URL's host, with its port unless it is the
//     scheme's default), every x-amz-* header (x-amz-date, x-amz-content-sha256, x-amz-security-token,
//     x-amz-meta-*, x-amz-checksum-*, ...), content-type, content-md5, date, range, if-range, if-match,
//     if-none-match, if-modified-since and if-unmodified-since, as real clients sign them; others (user-agent,
//     expect, ...) are sent unsigned. Names are lowercased, values trimmed with inner runs of spaces and tabs
//     collapsed, repeated headers joined with ','.
//
// make_sigv4_auth() is the net::RequestAuth the S3 tier hands to HttpClient: it signs every attempt after the
// transport added its Range / If-Range, and asks its credential provider for fresh credentials when S3 answers
// that the session token expired.
//
// Secrets: the secret key and session token are only used inside this file's functions; the signature is part
// of the Authorization header (which the transport never logs). Nothing here logs them or puts them in an Error.
//
// Thread safety: the functions are pure; a SigV4 RequestAuth may sign any number of requests at once.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datavo/result.hpp"
#include "datavo/units.hpp"
#include "net/http_client.hpp"
#include "tier/s3/aws_credentials.hpp"

namespace datavo::s3 {

// The x-amz-content-sha256 of a body that is not hashed (a file or a stream, sent over TLS).
inline constexpr std::string_view k_unsigned_payload = "UNSIGNED-PAYLOAD";
// The SHA-256 of no bytes, the payload hash of a GET, HEAD or DELETE.
inline constexpr std::string_view k_empty_sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// The longest validity S3 accepts for a presigned URL: seven days.
inline constexpr Seconds k_max_presign_expiry{7 * 24 * 3600};

// The canonical URI of a URL path ("/test$file.text" and "/test%24file.text" both give "/test%24file.text").
std::string canonical_uri(std::string_view path);

// `endpoint` (an http(s) URL, perhaps with a path: "http://host/g+w", "http://host/ü") with its path encoded once
// the canonical way, so that a URL built on it is sent with the very path that is signed ("http://host/g%2Bw",
// "http://host/%C3%BC"). A path already encoded stays as it is; an endpoint without a path is returned unchanged.
std::string encode_endpoint_path(std::string_view endpoint);

// The canonical query string of a raw query (without '?'): see the top of this file.
std::string canonical_query_string(std::string_view query);

// A query string from decoded name/value pairs, encoded and sorted the canonical way, so that what is sent is
// byte for byte what is signed (some S3-compatible servers sign the query as it arrives). A parameter without a
// value ("uploads", "tagging") is given with an empty value and sent as "uploads=", which S3 reads as "uploads".
// Without the leading '?'.
std::string encode_query(const std::vector<std::pair<std::string, std::string>>& params);

// "20130524T000000Z": the x-amz-date form of `when` (UTC, whole seconds).
std::string amz_date(std::chrono::system_clock::time_point when);

// Lower-case hex SHA-256 of `bytes`: the x-amz-content-sha256 of an in-memory body.
std::string sha256_hex(std::string_view bytes);

// Whether a header (any case) is one SigV4 signs here: see the top of this file.
bool is_signed_header(std::string_view name);

struct SigningScope {
  std::string region;  // "us-east-1"
  std::string service = "s3";
  std::chrono::system_clock::time_point when;  // the request's time: x-amz-date must be amz_date(when)
};

// Every stage of one signature, so that tests can compare each with AWS's published examples. Holds no secret
// but the signature itself: never log it.
struct SignatureV4 {
  std::string canonical_request;
  std::string string_to_sign;
  std::string credential_scope;  // "20130524/us-east-1/s3/aws4_request"
  std::string signed_headers;    // "host;range;x-amz-content-sha256;x-amz-date"
  std::string signature;         // 64 lower-case hex digits
  // "AWS4-HMAC-SHA256 Credential=<key id>/<scope>, SignedHeaders=<...>, Signature=<...>" (header signing only).
  std::string authorization;
};

// Signs a request for the Authorization header. `headers` are the headers as they will be sent: they must
// already carry x-amz-date (= amz_date(scope.when)) and, for S3, x-amz-content-sha256 = `payload_hash` (and
// x-amz-security-token when the credentials have a session token); make_sigv4_auth() adds those.
// invalid_argument for a URL that is not http(s)://host/...; the message names no secret.
Result<SignatureV4> sign_request(net::HttpMethod method, std::string_view url, const net::HttpHeaders& headers,
                                 std::string_view payload_hash, const AwsCredentials& credentials,
                                 const SigningScope& scope);

struct PresignedUrl {
  std::string url;  // the URL with X-Amz-Algorithm ... X-Amz-Signature appended to its query
  SignatureV4 signature;
};

// A presigned URL (query-string authentication, payload UNSIGNED-PAYLOAD) valid for `expires` (1 s to
// k_max_presign_expiry) from scope.when. `headers` are headers the user of the URL must send and that are signed
// (besides host, which always is); usually none. X-Amz-Security-Token is added when there is a session token.
// invalid_argument for a bad URL or expiry.
Result<PresignedUrl> presign_url(net::HttpMethod method, std::string_view url, const net::HttpHeaders& headers,
                                 Seconds expires, const AwsCredentials& credentials, const SigningScope& scope);

// The S3 error <Code> of an XML error body ("ExpiredToken", "NoSuchKey"); nullopt when there is none.
std::optional<std::string> s3_error_code(std::string_view body);

// Whether an S3 error code means the credentials (not the request) are stale: ExpiredToken,
// TokenRefreshRequired, InvalidToken, RequestExpired.
bool is_stale_credentials_code(std::string_view code);

// The RequestAuth that signs S3 (or another `service`'s) requests with SigV4 for `region`.
// prepare(): gets credentials from `provider` (its Error ends the request), then sets x-amz-date (from `clock`),
// x-amz-security-token when there is a session token, x-amz-content-sha256 (kept when the caller set it, e.g. the
// precomputed SHA-256 of a file body; else the SHA-256 of an in-memory body or of no body; else
// UNSIGNED-PAYLOAD for a FileBody), and Authorization, replacing any of those the request carried. The values
// of signed headers are sent in their canonical form (trimmed, inner blanks collapsed), so that servers that sign
// the raw values agree with S3.
// refresh_after_refusal(): a 400 or 403 whose S3 error code is_stale_credentials_code() invalidates `provider`
// and returns true (the transport then repeats the request once); anything else returns false.
// REQUIRES: provider != nullptr; the RequestAuth shares it. `clock` nullptr: net::system_clock(). Thread-safe.
std::shared_ptr<net::RequestAuth> make_sigv4_auth(std::shared_ptr<AwsCredentialProvider> provider, std::string region,
                                                  std::string service = "s3",
                                                  std::shared_ptr<net::Clock> clock = nullptr);

}  // namespace datavo::s3
