// Tests of src/tier/s3/sigv4.cpp: AWS's published Signature V4 examples, the canonicalization rules, the
// SigV4 RequestAuth, and signed requests through HttpClient to a loopback fake S3 that checks every signature.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "support/temp_dir.hpp"
#include "tier/cloud/xml.hpp"
#include "tier/s3/sigv4.hpp"
#include "unit/tier/s3/fake_aws.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"

namespace datavo::s3 {
namespace {

using namespace std::chrono_literals;
using s3test::FakeClock;
using s3test::FakeS3;
using ::testing::HasSubstr;
using ::testing::Not;

// The credentials, time and region of AWS's published examples.
constexpr const char* k_example_key = "AKIAIOSFODNN7EXAMPLE";
constexpr const char* k_example_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const std::chrono::system_clock::time_point k_example_time = std::chrono::sys_days{std::chrono::year{2013} / 5 / 24};

AwsCredentials example_credentials() { return {k_example_key, k_example_secret, "", std::nullopt, "example"}; }
SigningScope example_scope() { return {"us-east-1", "s3", k_example_time}; }

std::string lines(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto part : parts) {
    if (!out.empty()) out += '\n';
    out += part;
  }
  return out;
}

// --- AWS's published vectors ----------------------------------------------------------------------------------
// Expected canonical requests, strings to sign and signatures are the ones printed in the S3 API Reference,
// "Signature Calculations for the Authorization Header: Transferring Payload in a Single Chunk (AWS Signature
// Version 4)", section "Examples: Signature Calculations":
//   https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html#example-signature-calculations
// The page prints the Authorization header without a blank after each comma; we send ", " as the SDKs do
// (both forms are accepted), so only its parts are compared with the page.

TEST(SigV4PublishedVectors, GetObjectWithRange) {
  // "Example: GET Object": GET /test.txt, Range: bytes=0-9.
  const net::HttpHeaders headers = {{"Range", "bytes=0-9"},
                                    {"x-amz-content-sha256", std::string(k_empty_sha256)},
                                    {"x-amz-date", "20130524T000000Z"}};
  auto signature = sign_request(net::HttpMethod::get, "https://examplebucket.s3.amazonaws.com/test.txt", headers,
                                k_empty_sha256, example_credentials(), example_scope());
  ASSERT_TRUE(signature) << signature.error().message;
  EXPECT_EQ(signature->canonical_request,
            lines({"GET", "/test.txt", "", "host:examplebucket.s3.amazonaws.com", "range:bytes=0-9",
                   "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                   "x-amz-date:20130524T000000Z", "", "host;range;x-amz-content-sha256;x-amz-date",
                   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}));
  EXPECT_EQ(signature->string_to_sign,
            lines({"AWS4-HMAC-SHA256", "20130524T000000Z", "20130524/us-east-1/s3/aws4_request",
                   "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"}));
  EXPECT_EQ(signature->signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(signature->authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4PublishedVectors, PutObjectWithStorageClassAndDate) {
  // "Example: PUT Object": PUT test$file.text, body "Welcome to Amazon S3.", Date and x-amz-storage-class.
  const std::string body_hash = sha256_hex("Welcome to Amazon S3.");
  ASSERT_EQ(body_hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  const net::HttpHeaders headers = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                                    {"x-amz-date", "20130524T000000Z"},
                                    {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                                    {"x-amz-content-sha256", body_hash}};
  auto signature = sign_request(net::HttpMethod::put, "https://examplebucket.s3.amazonaws.com/test$file.text", headers,
                                body_hash, example_credentials(), example_scope());
  ASSERT_TRUE(signature) << signature.error().message;
  EXPECT_EQ(signature->canonical_request,
            lines({"PUT", "/test%24file.text", "", "date:Fri, 24 May 2013 00:00:00 GMT",
                   "host:examplebucket.s3.amazonaws.com",
                   "x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
                   "x-amz-date:20130524T000000Z", "x-amz-storage-class:REDUCED_REDUNDANCY", "",
                   "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
                   "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"}));
  EXPECT_EQ(signature->string_to_sign,
            lines({"AWS4-HMAC-SHA256", "20130524T000000Z", "20130524/us-east-1/s3/aws4_request",
                   "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d"}));
  EXPECT_EQ(signature->signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4PublishedVectors, GetBucketLifecycle) {
  // "Example: GET Bucket Lifecycle": GET ?lifecycle, a parameter without a value.
  const net::HttpHeaders headers = {{"x-amz-date", "20130524T000000Z"},
                                    {"x-amz-content-sha256", std::string(k_empty_sha256)}};
  auto signature = sign_request(net::HttpMethod::get, "https://examplebucket.s3.amazonaws.com/?lifecycle", headers,
                                k_empty_sha256, example_credentials(), example_scope());
  ASSERT_TRUE(signature) << signature.error().message;
  EXPECT_EQ(signature->canonical_request,
            lines({"GET", "/", "lifecycle=", "host:examplebucket.s3.amazonaws.com",
                   "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                   "x-amz-date:20130524T000000Z", "", "host;x-amz-content-sha256;x-amz-date",
                   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}));
  EXPECT_EQ(signature->string_to_sign,
            lines({"AWS4-HMAC-SHA256", "20130524T000000Z", "20130524/us-east-1/s3/aws4_request",
                   "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca"}));
  EXPECT_EQ(signature->signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4PublishedVectors, GetBucketListObjects) {
  // "Example: Get Bucket (List Objects)": GET ?max-keys=2&prefix=J (given here in the other order: sorted).
  const net::HttpHeaders headers = {{"x-amz-date", "20130524T000000Z"},
                                    {"x-amz-content-sha256", std::string(k_empty_sha256)}};
  auto signature = sign_request(net::HttpMethod::get, "https://examplebucket.s3.amazonaws.com/?prefix=J&max-keys=2",
                                headers, k_empty_sha256, example_credentials(), example_scope());
  ASSERT_TRUE(signature) << signature.error().message;
  EXPECT_EQ(signature->canonical_request,
            lines({"GET", "/", "max-keys=2&prefix=J", "host:examplebucket.s3.amazonaws.com",
                   "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                   "x-amz-date:20130524T000000Z", "", "host;x-amz-content-sha256;x-amz-date",
                   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}));
  EXPECT_EQ(signature->string_to_sign,
            lines({"AWS4-HMAC-SHA256", "20130524T000000Z", "20130524/us-east-1/s3/aws4_request",
                   "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7"}));
  EXPECT_EQ(signature->signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4PublishedVectors, PresignedGetObject) {
  // "Authenticating Requests: Using Query Parameters (AWS Signature Version 4)", "An Example":
  //   https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html#query-string-auth-v4-signing-example
  // GET /test.txt valid for 86400 s.
  auto presigned = presign_url(net::HttpMethod::get, "https://examplebucket.s3.amazonaws.com/test.txt", {},
                               Seconds{86400}, example_credentials(), example_scope());
  ASSERT_TRUE(presigned) << presigned.error().message;
  EXPECT_EQ(presigned->signature.canonical_request,
            lines({"GET", "/test.txt",
                   "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%"
                   "2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host",
                   "host:examplebucket.s3.amazonaws.com", "", "host", "UNSIGNED-PAYLOAD"}));
  EXPECT_EQ(presigned->signature.string_to_sign,
            lines({"AWS4-HMAC-SHA256", "20130524T000000Z", "20130524/us-east-1/s3/aws4_request",
                   "3bfa292879f6447bbcda7001decf97f4a54dc650c8942174ae0a9121cf58ad04"}));
  EXPECT_EQ(presigned->signature.signature, "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  EXPECT_EQ(presigned->url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
            "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  EXPECT_TRUE(presigned->signature.authorization.empty());
}

// The SigV4 RequestAuth reproduces the published Authorization headers from a request as the S3 tier builds it
// (no x-amz-* headers of its own), at the examples' time.
TEST(SigV4PublishedVectors, RequestAuthReproducesGetAndPutExamples) {
  auto clock = std::make_shared<FakeClock>(k_example_time);
  auto auth = make_sigv4_auth(make_static_credentials(example_credentials()), "us-east-1", "s3", clock);

  net::HttpHeaders headers = {{"Range", "bytes=0-9"}};
  net::RequestBody no_body;
  net::PreparedRequest get{net::HttpMethod::get, "https://examplebucket.s3.amazonaws.com/test.txt", headers, &no_body,
                           0};
  ASSERT_TRUE(auth->prepare(get, 1));
  EXPECT_THAT(std::string(net::find_header(get.headers, "Authorization").value_or("")),
              HasSubstr("Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"));

  net::RequestBody body = std::string("Welcome to Amazon S3.");
  net::PreparedRequest put{net::HttpMethod::put,
                           "https://examplebucket.s3.amazonaws.com/test$file.text",
                           {{"Date", "Fri, 24 May 2013 00:00:00 GMT"}, {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                           &body,
                           21};
  ASSERT_TRUE(auth->prepare(put, 1));
  EXPECT_EQ(net::find_header(put.headers, "x-amz-content-sha256"),
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  EXPECT_THAT(std::string(net::find_header(put.headers, "Authorization").value_or("")),
              HasSubstr("Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"));
}

// --- Canonicalization ------------------------------------------------------------------------------------------

TEST(SigV4Encoding, CanonicalUriEncodesEachSegmentOnce) {
  EXPECT_EQ(canonical_uri(""), "/");
  EXPECT_EQ(canonical_uri("/"), "/");
  EXPECT_EQ(canonical_uri("/test$file.text"), "/test%24file.text");
  EXPECT_EQ(canonical_uri("/test%24file.text"), "/test%24file.text");        // already encoded: not encoded twice
  EXPECT_EQ(canonical_uri("/bucket/a%20b/c+d~e"), "/bucket/a%20b/c%2Bd~e");  // '+' in a path is a plus
  EXPECT_EQ(canonical_uri("/bucket/%D0%BA%D0%BB%D1%8E%D1%87"), "/bucket/%D0%BA%D0%BB%D1%8E%D1%87");
  EXPECT_EQ(canonical_uri("/bucket//double/./dot"), "/bucket//double/./dot");  // S3 does not normalize
  EXPECT_EQ(canonical_uri("/bucket/100%"), "/bucket/100%25");                  // a lone '%' is a percent
}

// The path of `url` (after the host, before any query).
std::string path_of(const std::string& url) {
  const auto path = url.find('/', url.find("://") + 3);
  return url.substr(path, url.find('?') == std::string::npos ? std::string::npos : url.find('?') - path);
}

TEST(SigV4Encoding, AnEndpointPathIsEncodedOnceSoThatTheSentPathIsTheSignedOne) {
  struct Case {
    const char* endpoint;
    const char* sent_path;
    // What botocore 1.43 (S3SigV4Auth, AWS's example key, 2013-05-24T00:00:00Z) signs for the same GET; "" when
    // not compared.
    const char* botocore_signature;
  };
  const Case cases[] = {
      {"http://host:9000/g+w", "/g%2Bw/bucket/a%20b.tar",
       "d063dbdc50fa75c68aa09c44090bee0139ef63e1226086e9746003b4a81f552d"},
      {"http://host:9000/\xC3\xBC", "/%C3%BC/bucket/a%20b.tar",
       "e47de310cdae889051a74afc21b58a9abd19943dbaa9f52a4e9f9596ae7089cc"},
      {"https://host/already%2Bencoded", "/already%2Bencoded/bucket/a%20b.tar", ""},
      {"http://host:9000", "/bucket/a%20b.tar", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.endpoint);
    const std::string url = encode_endpoint_path(c.endpoint) + "/bucket/a%20b.tar";
    const std::string sent = path_of(url);
    EXPECT_EQ(sent, c.sent_path);
    EXPECT_EQ(sent, canonical_uri(sent)) << "the request line's path must be the canonical URI that is signed";
    const net::HttpHeaders headers = {{"x-amz-content-sha256", std::string(k_empty_sha256)},
                                      {"x-amz-date", "20130524T000000Z"}};
    auto signature =
        sign_request(net::HttpMethod::get, url, headers, k_empty_sha256, example_credentials(), example_scope());
    ASSERT_TRUE(signature) << signature.error().message;
    EXPECT_THAT(signature->canonical_request, ::testing::StartsWith("GET\n" + sent + "\n"));
    if (*c.botocore_signature != '\0') {
      EXPECT_EQ(signature->signature, c.botocore_signature);
    }
  }
  // The raw endpoint, as it was sent before: its path is not the canonical URI that is signed.
  EXPECT_NE(path_of("http://host:9000/g+w/bucket/key"), canonical_uri("/g+w/bucket/key"));
}

TEST(SigV4Encoding, CanonicalQueryEncodesSortsAndFillsEmptyValues) {
  EXPECT_EQ(canonical_query_string(""), "");
  EXPECT_EQ(canonical_query_string("uploads"), "uploads=");
  EXPECT_EQ(canonical_query_string("uploads="), "uploads=");
  EXPECT_EQ(canonical_query_string("prefix=J&max-keys=2"), "max-keys=2&prefix=J");
  EXPECT_EQ(canonical_query_string("a=2&b=1&a=1"), "a=1&a=2&b=1");  // by name, then by value
  // A literal '+' in a query is a space, as S3 reads it; an encoded one (%2B) is a plus.
  EXPECT_EQ(canonical_query_string("prefix=a+b"), "prefix=a%20b");
  EXPECT_EQ(canonical_query_string("prefix=a%2Bb"), "prefix=a%2Bb");
  EXPECT_EQ(canonical_query_string("a%2Bb=1"), "a%2Bb=1");  // an encoded key stays encoded once
  EXPECT_EQ(canonical_query_string("prefix=a%20b"), "prefix=a%20b");
  EXPECT_EQ(canonical_query_string("prefix=a b"), "prefix=a%20b");
  EXPECT_EQ(canonical_query_string("k=~tilde"), "k=~tilde");
  EXPECT_EQ(canonical_query_string("k=%7Etilde"), "k=~tilde");  // ~ is unreserved: never encoded
  EXPECT_EQ(canonical_query_string("prefix=ключ/"), "prefix=%D0%BA%D0%BB%D1%8E%D1%87%2F");
  EXPECT_EQ(canonical_query_string("x=a=b&&y"), "x=a%3Db&y=");
}

TEST(SigV4Encoding, EncodeQueryBuildsWhatIsSigned) {
  const std::string query = encode_query({{"prefix", "a+b c/ключ"}, {"list-type", "2"}, {"uploads", ""}});
  EXPECT_EQ(query, "list-type=2&prefix=a%2Bb%20c%2F%D0%BA%D0%BB%D1%8E%D1%87&uploads=");
  EXPECT_EQ(canonical_query_string(query), query);  // sent as built, it is its own canonical form
}

TEST(SigV4Encoding, AmzDateIsUtcWholeSeconds) {
  EXPECT_EQ(amz_date(k_example_time + 3723s + 999ms), "20130524T010203Z");
}

TEST(SigV4Headers, ValuesAreTrimmedAndCollapsedAndOnlySignableHeadersAreSigned) {
  const net::HttpHeaders headers = {{"X-Amz-Date", "20130524T000000Z"},
                                    {"x-amz-content-sha256", std::string(k_unsigned_payload)},
                                    {"X-Amz-Meta-Note", "  two   words\tand  tabs  "},
                                    {"x-amz-meta-list", "a"},
                                    {"x-amz-meta-list", "b"},
                                    {"Content-Type", "application/x-tar"},
                                    {"If-None-Match", "*"},
                                    {"If-Match", "\"etag\""},
                                    {"If-Range", "\"etag\""},
                                    {"Content-MD5", "bWQ1"},
                                    {"x-amz-checksum-sha256", "c2hh"},
                                    {"User-Agent", "datavo"},
                                    {"Expect", ""},
                                    {"Accept", "*/*"}};
  auto signature = sign_request(net::HttpMethod::put, "http://127.0.0.1:9000/bucket/key", headers, k_unsigned_payload,
                                example_credentials(), example_scope());
  ASSERT_TRUE(signature) << signature.error().message;
  EXPECT_EQ(signature->signed_headers,
            "content-md5;content-type;host;if-match;if-none-match;if-range;x-amz-checksum-sha256;"
            "x-amz-content-sha256;x-amz-date;x-amz-meta-list;x-amz-meta-note");
  EXPECT_THAT(signature->canonical_request, HasSubstr("\nhost:127.0.0.1:9000\n"));  // a non-default port is kept
  EXPECT_THAT(signature->canonical_request, HasSubstr("\nx-amz-meta-note:two words and tabs\n"));
  EXPECT_THAT(signature->canonical_request, HasSubstr("\nx-amz-meta-list:a,b\n"));
  EXPECT_THAT(signature->canonical_request, Not(HasSubstr("user-agent")));
  EXPECT_TRUE(signature->canonical_request.ends_with("\nUNSIGNED-PAYLOAD"));
}

TEST(SigV4Headers, HostDropsTheDefaultPortAndPrefersASentHostHeader) {
  auto host_line = [](std::string_view url, net::HttpHeaders headers = {}) {
    headers.push_back({"x-amz-date", "20130524T000000Z"});
    auto signature =
        sign_request(net::HttpMethod::get, url, headers, k_empty_sha256, example_credentials(), example_scope());
    EXPECT_TRUE(signature) << signature.error().message;
    const auto at = signature->canonical_request.find("\nhost:");
    return signature->canonical_request.substr(at + 6, signature->canonical_request.find('\n', at + 1) - at - 6);
  };
  EXPECT_EQ(host_line("https://bucket.s3.amazonaws.com:443/k"), "bucket.s3.amazonaws.com");
  EXPECT_EQ(host_line("http://minio:80/k"), "minio");
  EXPECT_EQ(host_line("http://minio:9000/k"), "minio:9000");
  EXPECT_EQ(host_line("https://minio:80/k"), "minio:80");
  EXPECT_EQ(host_line("http://[::1]:9000/k?x=1#frag"), "[::1]:9000");
  EXPECT_EQ(host_line("http://user:pw@minio:9000/k"), "minio:9000");
  EXPECT_EQ(host_line("http://127.0.0.1:9000/k", {{"Host", "bucket.example"}}), "bucket.example");
}

TEST(SigV4Headers, MalformedUrlsAndMissingScopeAreInvalidArguments) {
  auto sign = [](std::string_view url, SigningScope scope = example_scope(),
                 AwsCredentials credentials = example_credentials()) {
    return sign_request(net::HttpMethod::get, url, {}, k_empty_sha256, credentials, scope);
  };
  EXPECT_EQ(sign("ftp://host/k").error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(sign("no-scheme/k").error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(sign("http:///k").error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(sign("http://h/k", SigningScope{"", "s3", k_example_time}).error().code, ErrorCode::invalid_argument);
  auto no_secret = sign("http://h/k", example_scope(), AwsCredentials{k_example_key, "", "", std::nullopt, "test"});
  EXPECT_EQ(no_secret.error().code, ErrorCode::permission_denied);
}

TEST(SigV4Presign, SessionTokenIsSignedAndExpiryIsBounded) {
  AwsCredentials credentials = example_credentials();
  credentials.session_token = "session/token+=";
  auto presigned = presign_url(net::HttpMethod::get, "https://examplebucket.s3.amazonaws.com/a%20b?versionId=3", {},
                               Seconds{60}, credentials, example_scope());
  ASSERT_TRUE(presigned) << presigned.error().message;
  EXPECT_THAT(presigned->url, HasSubstr("/a%20b?versionId=3&X-Amz-Algorithm=AWS4-HMAC-SHA256&"));
  EXPECT_THAT(presigned->url, HasSubstr("&X-Amz-Security-Token=session%2Ftoken%2B%3D&"));
  EXPECT_THAT(presigned->signature.canonical_request, HasSubstr("X-Amz-Security-Token=session%2Ftoken%2B%3D"));
  EXPECT_THAT(presigned->signature.canonical_request, HasSubstr("&versionId=3\n"));
  EXPECT_TRUE(presigned->url.ends_with("&X-Amz-Signature=" + presigned->signature.signature));

  for (Seconds bad : {Seconds{0}, k_max_presign_expiry + Seconds{1}}) {
    auto refused = presign_url(net::HttpMethod::get, "https://h/k", {}, bad, credentials, example_scope());
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
  }
}

// --- The RequestAuth -----------------------------------------------------------------------------------------

// Hands out credentials numbered by fetch ("KEY1"/"secret-1"/"token-1", ...); counts fetches and invalidations.
class CountingProvider final : public AwsCredentialProvider {
 public:
  Result<AwsCredentials> get() override {
    std::lock_guard lock(mutex_);
    if (!current_ || stale_) {
      ++fetches;
      const std::string n = std::to_string(fetches.load());
      current_ = AwsCredentials{"KEY" + n, "secret-" + n, with_token ? "token-" + n : "", std::nullopt, "counting"};
      stale_ = false;
    }
    return *current_;
  }
  void invalidate() override {
    std::lock_guard lock(mutex_);
    ++invalidations;
    stale_ = true;
  }
  std::string describe() const override { return "counting"; }
  std::atomic<int> fetches{0};
  std::atomic<int> invalidations{0};
  bool with_token = true;

 private:
  std::mutex mutex_;
  std::optional<AwsCredentials> current_;
  bool stale_ = false;
};

net::PreparedRequest prepared(net::HttpMethod method, std::string url, net::HttpHeaders headers,
                              const net::RequestBody* body) {
  return net::PreparedRequest{method, std::move(url), std::move(headers), body, 0};
}

TEST(SigV4Auth, PrepareSetsDateTokenPayloadHashAndAuthorization) {
  auto clock = std::make_shared<FakeClock>(k_example_time);
  auto provider = std::make_shared<CountingProvider>();
  auto auth = make_sigv4_auth(provider, "eu-west-1", "s3", clock);

  net::RequestBody none;
  // A stale Authorization / x-amz-date (as a caller might leave) is replaced, not signed next to the new ones.
  auto request = prepared(net::HttpMethod::get, "https://b.s3.eu-west-1.amazonaws.com/k",
                          {{"Authorization", "old"}, {"X-Amz-Date", "19990101T000000Z"}, {"Range", "bytes=5-"}}, &none);
  ASSERT_TRUE(auth->prepare(request, 1));
  EXPECT_EQ(net::find_header(request.headers, "x-amz-date"), "20130524T000000Z");
  EXPECT_EQ(net::find_header(request.headers, "x-amz-content-sha256"), k_empty_sha256);
  EXPECT_EQ(net::find_header(request.headers, "x-amz-security-token"), "token-1");
  int authorizations = 0;
  for (const auto& header : request.headers) authorizations += header.name == "Authorization";
  EXPECT_EQ(authorizations, 1);
  const std::string authorization(net::find_header(request.headers, "Authorization").value_or(""));
  EXPECT_THAT(authorization, HasSubstr("Credential=KEY1/20130524/eu-west-1/s3/aws4_request, "));
  EXPECT_THAT(authorization, HasSubstr("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;"
                                       "x-amz-security-token, "));
  // The header is exactly what sign_request() gives for the headers as sent.
  net::HttpHeaders sent = request.headers;
  std::erase_if(sent, [](const net::HttpHeader& h) { return h.name == "Authorization"; });
  auto expected = sign_request(net::HttpMethod::get, request.url, sent, k_empty_sha256,
                               AwsCredentials{"KEY1", "secret-1", "token-1", std::nullopt, ""},
                               SigningScope{"eu-west-1", "s3", k_example_time});
  ASSERT_TRUE(expected);
  EXPECT_EQ(authorization, expected->authorization);
}

TEST(SigV4Auth, PayloadHashComesFromTheCallerTheStringBodyOrIsUnsignedForFiles) {
  auto clock = std::make_shared<FakeClock>(k_example_time);
  auto provider = std::make_shared<CountingProvider>();
  provider->with_token = false;
  auto auth = make_sigv4_auth(provider, "us-east-1", "s3", clock);
  auto hash_of = [&](net::RequestBody body, net::HttpHeaders headers = {}) {
    auto request = prepared(net::HttpMethod::put, "https://b.s3.amazonaws.com/k", std::move(headers), &body);
    EXPECT_TRUE(auth->prepare(request, 1));
    EXPECT_FALSE(net::find_header(request.headers, "x-amz-security-token"));  // no session token: no header
    int count = 0;
    for (const auto& header : request.headers) count += header.name == "x-amz-content-sha256";
    EXPECT_EQ(count, 1);
    return std::string(net::find_header(request.headers, "x-amz-content-sha256").value_or(""));
  };
  EXPECT_EQ(hash_of(std::string("Welcome to Amazon S3.")),
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  EXPECT_EQ(hash_of(std::monostate{}), k_empty_sha256);
  EXPECT_EQ(hash_of(net::FileBody{0, Bytes{10}, 0}), k_unsigned_payload);
  const std::string precomputed(64, 'a');
  EXPECT_EQ(hash_of(net::FileBody{0, Bytes{10}, 0}, {{"X-Amz-Content-SHA256", precomputed}}), precomputed);
}

TEST(SigV4Auth, AProviderErrorEndsPrepare) {
  class Empty final : public AwsCredentialProvider {
   public:
    Result<AwsCredentials> get() override { return Error{ErrorCode::permission_denied, "no AWS credentials found"}; }
    void invalidate() override {}
    std::string describe() const override { return "empty"; }
  };
  auto auth = make_sigv4_auth(std::make_shared<Empty>(), "us-east-1");
  net::RequestBody none;
  auto request = prepared(net::HttpMethod::get, "https://b.s3.amazonaws.com/k", {}, &none);
  auto result = auth->prepare(request, 1);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::permission_denied);
  EXPECT_FALSE(net::find_header(request.headers, "Authorization"));
}

TEST(SigV4Auth, RefreshAfterRefusalOnlyForStaleCredentialCodes) {
  auto provider = std::make_shared<CountingProvider>();
  auto auth = make_sigv4_auth(provider, "us-east-1");
  auto body = [](const std::string& code) {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code +
           "</Code><Message>m</Message><RequestId>r</RequestId></Error>";
  };
  for (const char* code : {"ExpiredToken", "TokenRefreshRequired", "InvalidToken", "RequestExpired"}) {
    for (long status : {400L, 403L}) {
      const int before = provider->invalidations.load();
      EXPECT_TRUE(auth->refresh_after_refusal(status, {}, body(code))) << code << " " << status;
      EXPECT_EQ(provider->invalidations.load(), before + 1);
    }
  }
  const int before = provider->invalidations.load();
  EXPECT_FALSE(auth->refresh_after_refusal(403, {}, body("SignatureDoesNotMatch")));
  EXPECT_FALSE(auth->refresh_after_refusal(403, {}, body("AccessDenied")));
  EXPECT_FALSE(auth->refresh_after_refusal(500, {}, body("ExpiredToken")));  // not a refusal of the credential
  EXPECT_FALSE(auth->refresh_after_refusal(401, {}, body("ExpiredToken")));
  EXPECT_FALSE(auth->refresh_after_refusal(403, {}, ""));                           // HEAD: no body to read
  EXPECT_FALSE(auth->refresh_after_refusal(400, {}, "<Error><Code>ExpiredToken"));  // cut short before </Code>
  EXPECT_FALSE(auth->refresh_after_refusal(400, {}, "ExpiredToken"));               // not XML
  EXPECT_EQ(provider->invalidations.load(), before);
}

TEST(SigV4Xml, ChildTextsIgnoreNamespacesDecodeEntitiesAndStopAfterTheElement) {
  auto fields = cloud::xml_child_texts(
      "<r xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><x:Credentials xmlns:x=\"u\"><x:AccessKeyId>A&amp;B"
      "</x:AccessKeyId><Nested><Deep>no</Deep></Nested><Code>first</Code><Code>second</Code></x:Credentials>"
      "<Credentials><AccessKeyId>later</AccessKeyId></Credentials></r>",
      "Credentials");
  ASSERT_TRUE(fields);
  EXPECT_EQ((*fields)["AccessKeyId"], "A&B");
  EXPECT_EQ((*fields)["Code"], "first");
  EXPECT_EQ((*fields)["Nested"], "");
  EXPECT_EQ(fields->count("Deep"), 0u);
  EXPECT_EQ(s3_error_code("<Error><Code> NoSuchKey </Code></Error><cut short"), "NoSuchKey");
  EXPECT_FALSE(cloud::xml_child_texts("<a><b>1</b></a>", "Error"));
  EXPECT_FALSE(cloud::xml_child_texts("not xml", "Error"));
  EXPECT_FALSE(s3_error_code("<Error><Message>no code</Message></Error>"));
}

// --- Through the transport, to a fake S3 that checks signatures -----------------------------------------------

class SigV4TransportTest : public ::testing::Test {
 protected:
  net::HttpClient client() {
    TransportOptions options;
    options.max_attempts = 3;
    options.connect_timeout = 2000ms;
    return net::HttpClient(options, clock_);
  }

  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>(std::chrono::system_clock::now());
};

TEST_F(SigV4TransportTest, SignedRequestsAreAcceptedByAServerThatChecksThemOnTheWire) {
  auto provider = std::make_shared<CountingProvider>();
  FakeS3 s3(FakeS3::Secrets{{"KEY1", "secret-1"}});
  auto auth = make_sigv4_auth(provider, "us-east-1", "s3", clock_);
  auto http = client();

  // Keys and queries with characters that need encoding, a caller's Range, a string body and a file body.
  net::HttpRequest get;
  get.url = s3.url("/bucket/dir/" + util::percent_encode("a b+c$~ключ", util::Slash::keep) + "?" +
                   encode_query({{"prefix", "x+y z"}, {"list-type", "2"}, {"uploads", ""}}));
  get.headers = {{"Range", "bytes=0-1"}, {"x-amz-meta-note", "  spaced   out "}};
  get.auth = auth.get();
  auto response = http.perform(get);
  ASSERT_TRUE(response) << response.error().message << "\n" << ::testing::PrintToString(s3.failures());
  EXPECT_EQ(response->body, "ok");
  EXPECT_EQ(s3.last_signed_headers().count("Range"), 1u);
  EXPECT_EQ(s3.last_signed_headers()["x-amz-meta-note"], "spaced out");  // sent as signed

  net::HttpRequest put;
  put.method = net::HttpMethod::put;
  put.url = s3.url("/bucket/object.tar");
  put.headers = {{"Content-Type", "application/x-tar"}, {"If-None-Match", "*"}};
  put.body = std::string("tar bytes");
  put.auth = auth.get();
  response = http.perform(put);
  ASSERT_TRUE(response) << response.error().message << "\n" << ::testing::PrintToString(s3.failures());

  shardtest::TempDir dir;
  s3test::write_text(dir.sub("body.bin"), "file body bytes");
  const int fd = ::open(dir.sub("body.bin").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  put.body = net::FileBody{fd, Bytes{15}, 0};
  response = http.perform(put);
  ::close(fd);
  ASSERT_TRUE(response) << response.error().message << "\n" << ::testing::PrintToString(s3.failures());
  EXPECT_EQ(s3.accepted.load(), 3);
  EXPECT_EQ(provider->fetches.load(), 1);  // one credential for all three
}

TEST_F(SigV4TransportTest, AWrongSecretIsRefusedAndNotRepeated) {
  auto provider = std::make_shared<CountingProvider>();
  FakeS3 s3(FakeS3::Secrets{{"KEY1", "another-secret"}});
  auto auth = make_sigv4_auth(provider, "us-east-1", "s3", clock_);
  auto http = client();
  net::HttpRequest get;
  get.url = s3.url("/bucket/k");
  get.auth = auth.get();
  auto response = http.perform(get);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(response.error().message, HasSubstr("SignatureDoesNotMatch"));
  EXPECT_EQ(s3.requests.load(), 1);
  EXPECT_EQ(provider->invalidations.load(), 0);
}

// The ExpiredToken round trip with the real credential chain: an ECS endpoint hands out token 1, S3 says it
// expired, the chain fetches token 2, the request is repeated once and succeeds.
TEST_F(SigV4TransportTest, AnExpiredTokenIsRefreshedThroughTheChainAndTheRequestRepeatedOnce) {
  s3test::FakeEcs ecs(clock_, std::chrono::hours{1});
  s3test::FakeEnvironment fake;
  fake.clock = clock_;
  fake.home = "/nonexistent";
  fake.vars = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", ecs.url()}, {"AWS_EC2_METADATA_DISABLED", "true"}};
  auto chain = make_default_credential_chain(fake.env());

  FakeS3 s3(FakeS3::Secrets{{"ECSKEY1", "ecs-secret-1"}, {"ECSKEY2", "ecs-secret-2"}});
  s3.expire_token("ecs-token-1");
  auto auth = make_sigv4_auth(chain, "us-east-1", "s3", clock_);
  auto http = client();
  net::HttpRequest get;
  get.url = s3.url("/bucket/k");
  get.auth = auth.get();
  auto response = http.perform(get);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->attempts, 2);  // exactly one repeat
  EXPECT_EQ(s3.tokens_seen(), (std::vector<std::string>{"ecs-token-1", "ecs-token-2"}));
  EXPECT_EQ(ecs.fetches.load(), 2);
  EXPECT_EQ(s3.accepted.load(), 1);
}

TEST_F(SigV4TransportTest, NoSecretReachesALogLineOrAnErrorMessage) {
  s3test::FakeEcs ecs(clock_, std::chrono::hours{1});
  s3test::FakeEnvironment fake;
  fake.clock = clock_;
  fake.home = "/nonexistent";
  fake.vars = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", ecs.url()}, {"AWS_EC2_METADATA_DISABLED", "true"}};
  auto chain = make_default_credential_chain(fake.env());
  // ECSKEY1 gets an ExpiredToken, ECSKEY2 a SignatureDoesNotMatch (S3 knows another secret for it).
  FakeS3 s3(FakeS3::Secrets{{"ECSKEY1", "ecs-secret-1"}, {"ECSKEY2", "not-the-secret"}});
  s3.expire_token("ecs-token-1");
  auto auth = make_sigv4_auth(chain, "us-east-1", "s3", clock_);
  auto http = client();

  const auto previous = log::level();
  log::set_level(log::Level::debug);
  Result<net::HttpResponse> response = Error{};
  const std::string logged = s3test::capture_stderr([&] {
    net::HttpRequest get;
    get.url = s3.url("/bucket/k");
    get.auth = auth.get();
    response = http.perform(get);
  });
  log::set_level(previous);
  ASSERT_FALSE(response);
  EXPECT_THAT(response.error().message, HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(logged, HasSubstr("ExpiredToken"));  // the refresh was logged...
  std::vector<std::string> secrets = {"ecs-secret-1", "ecs-secret-2", "ecs-token-1", "ecs-token-2"};
  for (const auto& authorization : s3.authorizations()) {
    ASSERT_NE(authorization.find("Signature="), std::string::npos);
    secrets.push_back(authorization.substr(authorization.find("Signature=") + 10));
  }
  ASSERT_EQ(secrets.size(), 6u);
  for (const auto& secret : secrets) {
    EXPECT_THAT(logged, Not(HasSubstr(secret)));  // ...without a secret
    EXPECT_THAT(response.error().message, Not(HasSubstr(secret)));
  }
}

}  // namespace
}  // namespace datavo::s3
