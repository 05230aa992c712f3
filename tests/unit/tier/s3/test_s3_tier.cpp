// Tests of the S3 request builder (src/tier/s3/s3_tier.cpp, through the remote-tier layer) against the S3 front end
// of the fake object store (tests/support/fake_cloud/fake_cloud.hpp), which checks the SigV4 signature of every
// request, honours If-None-Match and If-Match, checks the SHA-256 checksums of puts and parts, and keeps the
// multipart uploads' state. What the emulators of the e2e suites cannot show (s3rver ignores conditional writes,
// neither lies in a 200):
//   - a lookup is one ranged GET; the ranges after the first are pinned with If-Match to its ETag, and a 412 reads
//     the object once more; a HEAD answers contains(), and remove() asks before it deletes;
//   - a put is one PUT with If-None-Match: *, the metadata and x-amz-checksum-sha256 (412: already_present), and
//     x-amz-sdk-checksum-algorithm: SHA256, with which S3-compatible servers keep that checksum too;
//   - a large object is a multipart upload: parts with their checksums, a conditional CompleteMultipartUpload
//     naming every part's ETag and checksum; an upload that failed or lost the race is aborted;
//   - an error in the body of a 200 to CompleteMultipartUpload; listing pages; error codes; every request signed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/shard_fixtures.hpp"
#include "tier/cloud/xml.hpp"
#include "tier/s3/sigv4.hpp"
#include "unit/tier/cloud/tiers_on_fake.hpp"
#include "util/base64.hpp"

namespace datavo::s3 {
namespace {

using fakecloud::FakeCloud;
using fakecloud::SeenRequest;
using ::testing::HasSubstr;
using namespace shardtest;

constexpr const char* k_bucket = "datavo-test-bucket";
constexpr std::uint64_t k_part = 5 * 1024 * 1024;

using MemorySink = PositionalMemorySink;

std::map<std::string, std::string> datavo_metadata(const std::string& bytes) {
  return {{"datavo-sha256", sha256_of(bytes).hex()}, {"datavo-size", std::to_string(bytes.size())}};
}
// What install_copy records: datavo_metadata and the chunk digests.
std::map<std::string, std::string> installed_metadata(const std::string& bytes) {
  auto metadata = datavo_metadata(bytes);
  metadata["datavo-chunks"] = fakecloud::chunks_value_of(bytes);
  return metadata;
}

std::string sha256_base64(const std::string& bytes) {
  const auto raw = sha256_of(bytes).raw();
  return util::base64_encode(std::string(reinterpret_cast<const char*>(raw.data()), raw.size()));
}

std::vector<SeenRequest> of_op(const std::vector<SeenRequest>& all, const std::string& op) {
  std::vector<SeenRequest> out;
  for (const auto& request : all)
    if (request.op == op) out.push_back(request);
  return out;
}

class S3TierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    s3_.add_bucket(k_bucket);
    fakecloud::point_at(env_, s3_, dir_.sub("home"));
  }

  std::shared_ptr<Tier> make(const fakecloud::TierSetup& setup = {}) {
    return fakecloud::make_tier_on(s3_, k_bucket, setup, env_);
  }

  Result<InstallOutcome> install(Tier& tier, const ShardKey& key, const std::string& bytes) {
    ShardHandle handle = handle_on_new_file(dir_.sub("source-" + std::to_string(++sources_)), bytes);
    return tier.install_copy(key, handle, sha256_of(bytes));
  }
  static std::string object_name(const ShardKey& key) { return key.instance.name() + "/" + key.hash.hex() + ".tar"; }
  static std::string object_path(const ShardKey& key) { return std::string("/") + k_bucket + "/" + object_name(key); }

  FakeCloud s3_{fakecloud::Dialect::s3};
  TempDir dir_;
  credtest::FakeEnvironment env_;
  int sources_ = 0;
};

TEST_F(S3TierTest, APutIsOneSignedConditionalPutWithTheMetadataAndTheSha256OfTheBytes) {
  auto tier = make();
  const auto key = make_key(1);
  const std::string bytes = random_bytes(100'000, 1);
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);

  const auto requests = s3_.requests();
  ASSERT_EQ(requests.size(), 1u);
  const SeenRequest& put = requests[0];
  EXPECT_EQ(put.op, "PutObject");
  EXPECT_EQ(put.path, object_path(key)) << "path-style: /<bucket>/<instance>/<hash>.tar";
  EXPECT_EQ(put.header("If-None-Match"), "*");
  EXPECT_EQ(put.header("x-amz-meta-datavo-sha256"), sha256_of(bytes).hex());
  EXPECT_EQ(put.header("x-amz-meta-datavo-size"), "100000");
  EXPECT_EQ(put.header("x-amz-content-sha256"), sha256_of(bytes).hex()) << "the payload is signed";
  EXPECT_EQ(put.header("x-amz-checksum-sha256"), sha256_base64(bytes));
  EXPECT_EQ(put.header("x-amz-sdk-checksum-algorithm"), "SHA256") << "S3-compatible servers keep the checksum with it";
  EXPECT_THAT(put.header("Authorization"),
              HasSubstr(std::string("AWS4-HMAC-SHA256 Credential=") + fakecloud::k_s3_key_id + "/"));
  EXPECT_THAT(put.header("Authorization"), HasSubstr("/us-east-1/s3/aws4_request"));
  EXPECT_FALSE(put.header("x-amz-date").empty());
  EXPECT_EQ(put.status, 200) << "the fake checked the signature";

  auto stored = s3_.object(k_bucket, object_name(key));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->bytes, bytes);
  EXPECT_EQ(stored->metadata, installed_metadata(bytes));
  EXPECT_EQ(stored->client_checksums.at("sha256"), sha256_base64(bytes));
}

TEST_F(S3TierTest, ASecondCreateIsRefusedWith412AndIsAlreadyPresent) {
  auto tier = make();
  const auto key = make_key(2);
  const std::string first = random_bytes(50'000, 2);
  s3_.put_object(k_bucket, object_name(key), first, datavo_metadata(first));
  const auto generation = s3_.object(k_bucket, object_name(key))->generation;
  auto installed = install(*tier, key, random_bytes(60'000, 3));
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::already_present);
  const auto requests = s3_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].status, 412);
  EXPECT_EQ(s3_.object(k_bucket, object_name(key))->generation, generation) << "the object was not replaced";
}

TEST_F(S3TierTest, ALookupIsRangedGetsAndTheRangesAfterTheFirstArePinnedToItsETag) {
  auto tier = make();
  const auto key = make_key(3);
  const std::string bytes = random_bytes(2 * k_part + 12'345, 4);
  s3_.put_object(k_bucket, object_name(key), bytes, datavo_metadata(bytes));
  const std::string etag = s3_.object(k_bucket, object_name(key))->etag;
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), bytes);
  EXPECT_EQ((*read)->sha256, sha256_of(bytes)) << "from x-amz-meta-datavo-sha256";
  EXPECT_EQ((*read)->size, Bytes{bytes.size()});

  const auto requests = s3_.requests();
  ASSERT_EQ(requests.size(), 3u) << "three GETs, no HEAD";
  std::map<std::string, std::string> pins;  // range -> If-Match
  for (const auto& r : requests) {
    EXPECT_EQ(r.op, "GetObject");
    pins[r.header("Range")] = r.header("If-Match");
  }
  EXPECT_EQ(pins, (std::map<std::string, std::string>{
                      {"bytes=0-" + std::to_string(k_part - 1), ""},
                      {"bytes=" + std::to_string(k_part) + "-" + std::to_string(2 * k_part - 1), etag},
                      {"bytes=" + std::to_string(2 * k_part) + "-" + std::to_string(bytes.size() - 1), etag}}));
}

TEST_F(S3TierTest, AnObjectReplacedBetweenRangesIs412ToItsPinAndIsReadOnceMore) {
  auto tier = make();
  const auto key = make_key(4);
  const std::string old_bytes = random_bytes(2 * k_part + 10, 5);
  const std::string new_bytes = random_bytes(2 * k_part + 20, 6);
  s3_.put_object(k_bucket, object_name(key), old_bytes, datavo_metadata(old_bytes));
  const std::string old_etag = s3_.object(k_bucket, object_name(key))->etag;
  std::atomic<bool> replaced{false};
  s3_.on_request([&](const SeenRequest& r) {
    if (r.op == "GetObject" && !r.header("If-Match").empty() && !replaced.exchange(true))
      s3_.put_object(k_bucket, object_name(key), new_bytes, datavo_metadata(new_bytes));
  });
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), new_bytes) << "read again from the start: no mix of two versions";
  EXPECT_EQ((*read)->sha256, sha256_of(new_bytes));
  int conflicts = 0;
  for (const auto& r : s3_.requests()) {
    if (r.status != 412) continue;
    ++conflicts;
    EXPECT_EQ(r.header("If-Match"), old_etag);
  }
  EXPECT_GE(conflicts, 1);
}

TEST_F(S3TierTest, ContainsIsAHeadAndRemoveAsksBeforeItDeletes) {
  auto tier = make();
  const auto key = make_key(5);
  auto held = tier->contains(key);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_FALSE(*held);
  auto removed = tier->remove(key);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_FALSE(*removed) << "S3 answers 204 to any DELETE: the HEAD told there was nothing";
  auto requests = s3_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].op, "HeadObject");
  EXPECT_EQ(requests[1].op, "HeadObject") << "no DELETE of an absent object";

  s3_.put_object(k_bucket, object_name(key), "bytes");
  s3_.clear_requests();
  held = tier->contains(key);
  ASSERT_TRUE(held && *held);
  removed = tier->remove(key);
  ASSERT_TRUE(removed && *removed);
  requests = s3_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].op, "DeleteObject");
  EXPECT_EQ(requests[2].path, object_path(key));
  EXPECT_FALSE(s3_.object(k_bucket, object_name(key)));
}

TEST_F(S3TierTest, ALargeObjectIsAMultipartUploadWithChecksumsCompletedConditionally) {
  auto tier = make();
  const auto key = make_key(6);
  const std::string bytes = random_bytes(4 * k_part + 4321, 7);
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);

  const auto requests = s3_.requests();
  const auto created = of_op(requests, "CreateMultipartUpload");
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].header("x-amz-checksum-algorithm"), "SHA256");
  EXPECT_EQ(created[0].header("x-amz-meta-datavo-sha256"), sha256_of(bytes).hex());
  const auto parts = of_op(requests, "UploadPart");
  ASSERT_EQ(parts.size(), 5u);
  std::set<std::string> numbers;
  for (const auto& part : parts) {
    const int number = std::stoi(part.param("partNumber"));
    numbers.insert(part.param("partNumber"));
    const std::string slice = bytes.substr(std::size_t(number - 1) * k_part, k_part);
    EXPECT_EQ(part.header("x-amz-checksum-sha256"), sha256_base64(slice)) << "part " << number;
    EXPECT_EQ(part.header("x-amz-content-sha256"), sha256_of(slice).hex()) << "part " << number;
    EXPECT_EQ(part.param("uploadId"), parts[0].param("uploadId")) << "one upload";
  }
  EXPECT_EQ(numbers, (std::set<std::string>{"1", "2", "3", "4", "5"}));
  const auto completed = of_op(requests, "CompleteMultipartUpload");
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_EQ(completed[0].header("If-None-Match"), "*");
  EXPECT_EQ(completed[0].status, 200) << "every part's ETag and checksum matched";
  EXPECT_TRUE(of_op(requests, "AbortMultipartUpload").empty());
  EXPECT_EQ(s3_.open_uploads(), 0);
  auto stored = s3_.object(k_bucket, object_name(key));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->bytes, bytes);
  EXPECT_EQ(stored->metadata, installed_metadata(bytes));
  EXPECT_THAT(stored->etag, ::testing::EndsWith("-5\""));
}

TEST_F(S3TierTest, AMultipartUploadThatLosesTheRaceIsAlreadyPresentAndAborted) {
  auto tier = make();
  const auto key = make_key(7);
  const std::string bytes = random_bytes(2 * k_part + 1, 8);
  const std::string other = random_bytes(2 * k_part + 1, 9);
  // While the parts are on their way, another VM's upload of the same shard completes.
  std::atomic<bool> raced{false};
  s3_.on_request([&](const SeenRequest& r) {
    if (r.op == "UploadPart" && !raced.exchange(true))
      s3_.put_object(k_bucket, object_name(key), other, datavo_metadata(other));
  });
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::already_present);
  EXPECT_EQ(s3_.object(k_bucket, object_name(key))->bytes, other) << "the first VM's object stays";
  const auto requests = s3_.requests();
  ASSERT_EQ(of_op(requests, "CompleteMultipartUpload").size(), 1u);
  EXPECT_EQ(of_op(requests, "CompleteMultipartUpload")[0].status, 412);
  EXPECT_EQ(of_op(requests, "AbortMultipartUpload").size(), 1u) << "the losing upload's parts are freed";
  EXPECT_EQ(s3_.open_uploads(), 0);
}

TEST_F(S3TierTest, AFailedPartAbortsTheUploadAndStoresNothing) {
  auto tier = make({.concurrency = 1});
  const auto key = make_key(8);
  s3_.refuse_parts_from(2);  // 403 for every part after the first
  auto installed = install(*tier, key, random_bytes(3 * k_part + 1, 10));
  ASSERT_FALSE(installed);
  EXPECT_EQ(installed.error().code, ErrorCode::permission_denied) << installed.error().message;
  EXPECT_FALSE(s3_.object(k_bucket, object_name(key)));
  const auto requests = s3_.requests();
  EXPECT_EQ(of_op(requests, "UploadPart").size(), 2u) << "a refusal is not retried, and no part after it is sent";
  EXPECT_TRUE(of_op(requests, "CompleteMultipartUpload").empty());
  ASSERT_EQ(of_op(requests, "AbortMultipartUpload").size(), 1u);
  EXPECT_EQ(of_op(requests, "AbortMultipartUpload")[0].status, 204);
  EXPECT_EQ(s3_.open_uploads(), 0);
}

// S3 may answer CompleteMultipartUpload 200 and put the error in the body, having streamed whitespace while it
// worked: a failure (and the upload is aborted), or already_present when the error is the precondition.
TEST_F(S3TierTest, AnErrorInTheBodyOfA200ToCompleteMultipartUploadIsNotASuccess) {
  auto tier = make();
  s3_.complete_with_error_in_body("InternalError");
  const auto key = make_key(9);
  auto installed = install(*tier, key, random_bytes(k_part + 1, 11));
  ASSERT_FALSE(installed) << "an error in a 200 was taken for success";
  EXPECT_THAT(installed.error().message, HasSubstr("InternalError"));
  EXPECT_FALSE(s3_.object(k_bucket, object_name(key)));
  EXPECT_EQ(of_op(s3_.requests(), "AbortMultipartUpload").size(), 1u);
  EXPECT_EQ(s3_.open_uploads(), 0);

  s3_.complete_with_error_in_body("PreconditionFailed");
  auto raced = install(*tier, make_key(10), random_bytes(k_part + 1, 12));
  ASSERT_TRUE(raced) << raced.error().message;
  EXPECT_EQ(*raced, InstallOutcome::already_present);
  EXPECT_EQ(s3_.open_uploads(), 0);
}

TEST_F(S3TierTest, ListFollowsContinuationTokensAndKeepsOnlyEntries) {
  auto tier = make();
  s3_.set_page_size(2);
  std::set<std::string> want;
  for (int i = 0; i < 5; ++i) {
    const auto key = make_key(20 + i);
    ASSERT_TRUE(install(*tier, key, random_bytes(100 + i, 20 + i)));
    want.insert(key.hash.hex());
  }
  s3_.put_object(k_bucket, "local/.leases/abc", "lease");
  s3_.put_object(k_bucket, "unrelated.txt", "x");
  s3_.clear_requests();
  auto listed = tier->list();
  ASSERT_TRUE(listed) << listed.error().message;
  std::set<std::string> got;
  for (const auto& entry : *listed) got.insert(entry.hash.hex());
  EXPECT_EQ(got, want);
  const auto pages = of_op(s3_.requests(), "ListObjects");
  ASSERT_EQ(pages.size(), 4u) << "7 objects, 2 a page";
  EXPECT_EQ(pages[0].path, std::string("/") + k_bucket) << "path-style /bucket?list-type=2, as boto3 sends it";
  EXPECT_EQ(pages[0].param("list-type"), "2");
  EXPECT_FALSE(pages[0].has("continuation-token"));
  for (std::size_t i = 1; i < pages.size(); ++i) EXPECT_FALSE(pages[i].param("continuation-token").empty());
}

TEST_F(S3TierTest, AMissingBucketIsNotFoundNamingItAndAMissingKeyIsAMiss) {
  auto tier = make();
  MemorySink sink;
  auto miss = tier->read_into(make_key(30), sink);
  ASSERT_TRUE(miss) << miss.error().message;
  EXPECT_FALSE(*miss) << "NoSuchKey is a miss";

  auto gone = fakecloud::make_tier_on(s3_, "no-such-bucket", {}, env_);
  auto read = gone->read_into(make_key(30), sink);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::not_found);
  EXPECT_THAT(read.error().message, HasSubstr("the bucket no-such-bucket does not exist"));
  EXPECT_EQ(gone->list().error().code, ErrorCode::not_found);
  EXPECT_FALSE(install(*gone, make_key(30), "bytes"));
}

TEST_F(S3TierTest, ARefusedSignatureIsPermissionDeniedAfterOneRequest) {
  env_.set("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  auto tier = make();
  MemorySink sink;
  auto read = tier->read_into(make_key(40), sink);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(read.error().message, HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(read.error().message, ::testing::Not(HasSubstr("not-the-secret")));
  EXPECT_EQ(s3_.requests().size(), 1u) << "a refusal is not retried";

  env_.set("AWS_ACCESS_KEY_ID", "AKIDUNKNOWN");
  auto unknown = make()->contains(make_key(40));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::permission_denied);
}

TEST_F(S3TierTest, ASessionTokenIsSentAndSignedAndAnExpiredOneIsRefused) {
  env_.set("AWS_SESSION_TOKEN", "session-token-1");
  auto tier = make();
  ASSERT_TRUE(tier->contains(make_key(41)));
  const auto first = s3_.requests().at(0);
  EXPECT_EQ(first.header("x-amz-security-token"), "session-token-1");
  EXPECT_THAT(first.header("Authorization"), HasSubstr("x-amz-security-token"));

  s3_.expire_session_token("session-token-1");
  s3_.clear_requests();
  MemorySink sink;  // a GET: the answer to a HEAD has no body to name the error
  auto expired = tier->read_into(make_key(41), sink);
  ASSERT_FALSE(expired);
  EXPECT_THAT(expired.error().message, HasSubstr("ExpiredToken"));
  EXPECT_EQ(s3_.requests().size(), 2u) << "the credentials were asked again once, and were the same";
}

TEST_F(S3TierTest, ADamagedUploadIsRefusedThroughItsPayloadHashAndNothingIsStored) {
  auto tier = make();
  const auto key = make_key(43);
  s3_.corrupt_next_upload();
  auto installed = install(*tier, key, random_bytes(10'000, 43));
  ASSERT_FALSE(installed);
  EXPECT_THAT(installed.error().message, HasSubstr("XAmzContentSHA256Mismatch"));
  EXPECT_FALSE(s3_.object(k_bucket, object_name(key)));

  s3_.clear_requests();
  s3_.corrupt_next_upload();  // a part of a multipart upload
  auto multipart = install(*tier, key, random_bytes(k_part + 1, 44));
  ASSERT_FALSE(multipart);
  EXPECT_FALSE(s3_.object(k_bucket, object_name(key)));
  EXPECT_EQ(of_op(s3_.requests(), "AbortMultipartUpload").size(), 1u);
  EXPECT_EQ(s3_.open_uploads(), 0);
}

// S3's error bodies are worded, keeping the code, never pasted as XML.
TEST(S3ErrorWords, KnownCodesSayWhatToDoAndKeepTheCode) {
  auto body = [](const std::string& code, const std::string& message) {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code + "</Code><Message>" + message +
           "</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>";
  };
  const std::pair<std::string, std::string> cases[] = {
      {"NoSuchBucket",
       "the bucket does not exist (S3 NoSuchBucket: The specified bucket does not exist); check the "
       "tier's bucket and endpoint_url"},
      {"SignatureDoesNotMatch", "the server computed another signature (S3 SignatureDoesNotMatch: "},
      {"InvalidAccessKeyId", "the server does not know the access key id (S3 InvalidAccessKeyId: "},
      {"ExpiredToken", "the session token has expired (S3 ExpiredToken: "},
      {"AccessDenied", "access denied (S3 AccessDenied: "},
  };
  for (const auto& [code, words] : cases) {
    SCOPED_TRACE(code);
    const std::string message = code == "NoSuchBucket" ? "The specified bucket does not exist" : "Some text";
    const std::string text = describe_s3_error(403, body(code, message));
    EXPECT_THAT(text, ::testing::StartsWith(words));
    EXPECT_THAT(text, ::testing::Not(HasSubstr("<")));
    EXPECT_THAT(text, ::testing::Not(HasSubstr("RequestId")));
  }
  EXPECT_THAT(describe_s3_error(403, body("SignatureDoesNotMatch", "x")), HasSubstr("secret access key"));
  EXPECT_THAT(describe_s3_error(400, body("ExpiredToken", "x")), HasSubstr("renew the temporary credentials"));
  EXPECT_THAT(describe_s3_error(403, body("InvalidAccessKeyId", "x")), HasSubstr("AWS_ACCESS_KEY_ID"));
  EXPECT_THAT(describe_s3_error(403, body("AccessDenied", "x")), HasSubstr("s3:GetObject"));
  // Another code is the service's own words; a body that is not an S3 error is left to the HTTP layer's excerpt.
  EXPECT_EQ(describe_s3_error(503, body("SlowDown", "Please reduce your request rate.")),
            "S3 SlowDown: Please reduce your request rate.");
  EXPECT_EQ(describe_s3_error(502, "<html>Bad Gateway</html>"), "");
  EXPECT_EQ(describe_s3_error(500, ""), "");
}

}  // namespace
}  // namespace datavo::s3
