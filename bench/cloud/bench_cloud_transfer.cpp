// bench_cloud_transfer: one download or upload of one object through a cloud tier (make_s3_tier, make_gcs_tier or
// make_azure_blob_tier), timed in-process, for bench/s3/run_benchmarks.sh and bench/cloud/run_benchmarks.sh. The
// download is read_into() into a file written positionally (pwrite), as the hierarchy's staging file is written,
// without the SHA-256 that staging computes on a second thread (the `datavo cache fetch` runs of the S3 benchmark
// measure the whole path); the upload is install_copy() of a file.
//
//   bench_cloud_transfer download|upload [--tier s3|gcs|azure_blob] --endpoint URL --bucket NAME --hash HEX
//       --file PATH [--concurrency N] [--part-size BYTES] [--instance NAME]
// --tier defaults to s3. --bucket is the S3 or GCS bucket, or the Azure container (the tier's container_url is
// <endpoint>/<bucket>, so --endpoint is Azurite's http://host:port/<account>). Concurrency and part size default
// to the tiers' defaults (CloudTierOptions: 8 and 16 MiB).
// Prints one JSON line: {"op", "tier", "bytes", "seconds", "cpu_seconds", "mb_per_s", "concurrency", "part_size"}
// (cpu: user + system of this process during the transfer, every thread). Credentials: each tier's own chain
// (S3: AWS_ACCESS_KEY_ID, ...; GCS: none when STORAGE_EMULATOR_HOST is set; Azure: AZURE_STORAGE_CONNECTION_STRING,
// ...).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>

#include "datavo/azure_blob_tier.hpp"
#include "datavo/gcs_tier.hpp"
#include "datavo/s3_tier.hpp"
#include "util/fs.hpp"

namespace {

using namespace datavo;

// Writes at offsets into a file, as a staging file takes parallel ranges.
class FileSink final : public ByteSink, public PositionalSink {
 public:
  explicit FileSink(int fd) : fd_(fd) {}
  Result<void> write(const void* data, std::size_t size) override {
    DATAVO_TRY(write_at(appended_, data, size));
    appended_ += size;
    return {};
  }
  Bytes written() const override { return positional_ ? prefix_ : Bytes{appended_}; }
  Result<void> restart() override {
    appended_ = 0;
    prefix_ = Bytes{0};
    if (::ftruncate(fd_, 0) != 0) return Error::from_errno(errno, "ftruncate");
    return {};
  }
  PositionalSink* positional() override {
    positional_ = true;
    return this;
  }
  Result<void> write_at(std::uint64_t offset, const void* data, std::size_t size) override {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      ssize_t n = ::pwrite(fd_, p, size, off_t(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Error::from_errno(errno, "pwrite");
      }
      p += n;
      offset += std::uint64_t(n);
      size -= std::size_t(n);
    }
    return {};
  }
  Result<void> prefix_complete(Bytes size) override {
    prefix_ = size;
    return {};
  }

 private:
  int fd_;
  std::uint64_t appended_ = 0;
  Bytes prefix_;
  bool positional_ = false;
};

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto secs = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return secs(usage.ru_utime) + secs(usage.ru_stime);
}

[[noreturn]] void usage_error(const std::string& why) {
  std::cerr << "bench_cloud_transfer: " << why
            << "\nusage: bench_cloud_transfer download|upload [--tier s3|gcs|azure_blob] --endpoint URL --bucket NAME "
               "--hash HEX --file PATH [--concurrency N] [--part-size BYTES] [--instance NAME]\n";
  std::exit(2);
}

template <typename T>
T require(Result<T> result, const char* what) {
  if (!result) {
    std::cerr << "bench_cloud_transfer: " << what << ": " << result.error().message << "\n";
    std::exit(1);
  }
  return std::move(result).value();
}

Result<std::shared_ptr<Tier>> make_tier(const std::string& type, const std::string& endpoint, const std::string& bucket,
                                        CloudTierOptions remote) {
  if (type == "s3") {
    S3TierOptions options;
    options.bucket = bucket;
    options.endpoint_url = endpoint;
    options.region = "us-east-1";
    options.addressing_style = AddressingStyle::path;
    options.remote = std::move(remote);
    return make_s3_tier(options);
  }
  if (type == "gcs") {
    GcsTierOptions options;
    options.bucket = bucket;
    options.endpoint_url = endpoint;
    options.remote = std::move(remote);
    return make_gcs_tier(options);
  }
  if (type == "azure_blob") {
    AzureBlobTierOptions options;
    options.container_url = endpoint + "/" + bucket;
    options.remote = std::move(remote);
    return make_azure_blob_tier(options);
  }
  usage_error("unknown --tier " + type + " (s3, gcs or azure_blob)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage_error("no operation");
  const std::string op = argv[1];
  std::string type = "s3", endpoint, bucket, hash, file, instance = "local";
  CloudTierOptions remote;  // the tiers' defaults unless given
  remote.name = "bench";
  remote.single_flight = false;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) usage_error(std::string("no value for ") + argv[i]);
    const std::string name = argv[i], value = argv[i + 1];
    if (name == "--tier")
      type = value;
    else if (name == "--endpoint")
      endpoint = value;
    else if (name == "--bucket")
      bucket = value;
    else if (name == "--hash")
      hash = value;
    else if (name == "--file")
      file = value;
    else if (name == "--instance")
      instance = value;
    else if (name == "--concurrency")
      remote.concurrency = std::stoul(value);
    else if (name == "--part-size")
      remote.part_size = Bytes{std::stoull(value)};
    else
      usage_error("unknown option " + name);
  }
  if ((op != "download" && op != "upload") || endpoint.empty() || bucket.empty() || hash.empty() || file.empty()) {
    usage_error("missing arguments");
  }

  const std::size_t concurrency = remote.concurrency;
  const std::uint64_t part_size = remote.part_size.count();
  auto tier = require(make_tier(type, endpoint, bucket, std::move(remote)), "make tier");
  const ShardKey key{require(Instance::parse(instance), "instance"), require(ContentHash::parse(hash), "hash")};

  double seconds = 0, cpu = 0;
  std::uint64_t bytes = 0;
  if (op == "download") {
    util::UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) usage_error("cannot create " + file);
    FileSink sink(fd.get());
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto got = require(tier->read_into(key, sink), "read_into");
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu = cpu_seconds() - cpu0;
    if (!got) usage_error("the object is not in the bucket");
    bytes = sink.written().count();
  } else {
    util::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) usage_error("cannot open " + file);
    struct stat st {};
    ::fstat(fd.get(), &st);
    bytes = std::uint64_t(st.st_size);
    // The digest is known before an upload (staging computed it): not part of the timed transfer.
    auto digest = require(util::sha256_of_fd(fd.get()), "sha256");
    ShardHandle source(::dup(fd.get()), file, Bytes{bytes});
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto outcome = require(tier->install_copy(key, source, digest), "install_copy");
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu = cpu_seconds() - cpu0;
    if (outcome != InstallOutcome::installed) usage_error("the object was already there: use a fresh --hash");
  }
  std::printf(
      "{\"op\": \"%s\", \"tier\": \"%s\", \"bytes\": %llu, \"seconds\": %.4f, \"cpu_seconds\": %.4f, "
      "\"mb_per_s\": %.1f, \"concurrency\": %zu, \"part_size\": %llu}\n",
      op.c_str(), type.c_str(), static_cast<unsigned long long>(bytes), seconds, cpu, double(bytes) / 1e6 / seconds,
      concurrency, static_cast<unsigned long long>(part_size));
  return 0;
}
