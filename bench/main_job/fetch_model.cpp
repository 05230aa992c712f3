// fetch_model: a stand-alone model of a verified, durable shard download, to tell apart what the cold fetch of
// `datavo warm` spends its time on (docs/BENCHMARKS-main-job.md, item 1b). It is not Datavo code: it uses libcurl,
// OpenSSL and POSIX directly, one knob per design choice of the product's fetch path.
//
//   fetch_model URL OUT_FILE [--buffer BYTES] [--hash none|inline|thread] [--sync none|fdatasync|range]
//
//   --buffer   CURLOPT_BUFFERSIZE, the most bytes handed to the write callback at once (libcurl's default is
//              16 KiB, which is what Datavo's HttpClient uses; the curl tool asks for 100 KiB).
//   --hash     none: no digest; inline: SHA-256 in the write callback, on the receiving thread (as Datavo's
//              StagingFile::write does); thread: the bytes are copied into 1 MiB blocks that a second thread
//              hashes while the first one keeps receiving and writing.
//   --sync     none: nothing (as `curl -o`); fdatasync: one fdatasync before close (as the folder tier's commit);
//              range: sync_file_range(SYNC_FILE_RANGE_WRITE) after every 8 MiB, so that writeback runs during the
//              download, then the same final fdatasync.
//
// Prints one JSON line: {"bytes": N, "seconds": S, "sha256": "..."}; exits 1 on any failure.
#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "fetch_model: %s\n", message.c_str());
  std::exit(1);
}

enum class Hash { none, inline_, thread };
enum class Sync { none, fdatasync, range };

constexpr std::size_t k_block = std::size_t{1} << 20;  // hand-off unit of --hash thread
constexpr std::size_t k_blocks_in_flight = 16;         // bounds the memory of --hash thread to 16 MiB
constexpr std::size_t k_range_sync_every = std::size_t{8} << 20;

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) die("EVP_DigestInit_ex failed");
  }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  void update(const void* data, std::size_t size) {
    if (EVP_DigestUpdate(ctx_, data, size) != 1) die("EVP_DigestUpdate failed");
  }
  std::string hex() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx_, out, &n) != 1) die("EVP_DigestFinal_ex failed");
    std::string text;
    char byte[3];
    for (unsigned int i = 0; i < n; ++i) {
      std::snprintf(byte, sizeof byte, "%02x", out[i]);
      text += byte;
    }
    return text;
  }

 private:
  EVP_MD_CTX* ctx_;
};

// A second thread that hashes 1 MiB blocks in order; the receiving thread blocks when 16 are waiting.
class HashThread {
 public:
  HashThread() : worker_([this] { run(); }) {}
  ~HashThread() { finish(); }

  void add(const char* data, std::size_t size) {
    while (size > 0) {
      std::size_t n = std::min(size, k_block - current_.size());
      current_.insert(current_.end(), data, data + n);
      data += n;
      size -= n;
      if (current_.size() == k_block) push();
    }
  }
  std::string finish() {
    if (!worker_.joinable()) return digest_;
    if (!current_.empty()) push();
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    worker_.join();
    digest_ = sha_.hex();
    return digest_;
  }

 private:
  void push() {
    std::unique_lock lock(mu_);
    space_.wait(lock, [this] { return queue_.size() < k_blocks_in_flight; });
    queue_.push_back(std::move(current_));
    current_ = {};
    current_.reserve(k_block);
    cv_.notify_all();
  }
  void run() {
    while (true) {
      std::vector<char> block;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return done_ || !queue_.empty(); });
        if (queue_.empty()) return;
        block = std::move(queue_.front());
        queue_.pop_front();
      }
      space_.notify_all();
      sha_.update(block.data(), block.size());
    }
  }

  Sha256 sha_;
  std::vector<char> current_;
  std::mutex mu_;
  std::condition_variable cv_, space_;
  std::deque<std::vector<char>> queue_;
  bool done_ = false;
  std::string digest_;
  std::thread worker_;
};

struct State {
  int fd = -1;
  Hash hash = Hash::inline_;
  Sync sync = Sync::fdatasync;
  Sha256 sha;
  HashThread* hasher = nullptr;
  std::uint64_t written = 0;
  std::uint64_t synced_to = 0;
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto& s = *static_cast<State*>(user);
  const std::size_t length = size * count;
  if (s.hash == Hash::inline_) s.sha.update(data, length);
  if (s.hash == Hash::thread) s.hasher->add(data, length);
  for (std::size_t done = 0; done < length;) {
    ssize_t n = ::write(s.fd, data + done, length - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return 0;
    }
    done += static_cast<std::size_t>(n);
  }
  s.written += length;
  if (s.sync == Sync::range && s.written - s.synced_to >= k_range_sync_every) {
    ::sync_file_range(s.fd, static_cast<off_t>(s.synced_to), static_cast<off_t>(s.written - s.synced_to),
                      SYNC_FILE_RANGE_WRITE);
    s.synced_to = s.written;
  }
  return length;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    die("usage: fetch_model URL OUT_FILE [--buffer BYTES] [--hash none|inline|thread] "
        "[--sync none|fdatasync|range]");
  }
  const std::string url = argv[1];
  const std::string out = argv[2];
  long buffer = 16 * 1024;
  State state;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--buffer") {
      buffer = std::stol(value);
    } else if (flag == "--hash") {
      state.hash = value == "none" ? Hash::none : value == "thread" ? Hash::thread : Hash::inline_;
      if (value != "none" && value != "thread" && value != "inline") die("bad --hash " + value);
    } else if (flag == "--sync") {
      state.sync = value == "none" ? Sync::none : value == "range" ? Sync::range : Sync::fdatasync;
      if (value != "none" && value != "range" && value != "fdatasync") die("bad --sync " + value);
    } else {
      die("unknown flag " + flag);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  state.fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (state.fd < 0) die("cannot create " + out);
  HashThread* hasher = state.hash == Hash::thread ? new HashThread : nullptr;
  state.hasher = hasher;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURL* curl = curl_easy_init();
  if (!curl) die("curl_easy_init failed");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, buffer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) die(std::string("download failed: ") + curl_easy_strerror(rc));
  curl_easy_cleanup(curl);

  std::string digest;
  if (state.hash == Hash::inline_) digest = state.sha.hex();
  if (hasher) {
    digest = hasher->finish();
    delete hasher;
  }
  if (state.sync != Sync::none && ::fdatasync(state.fd) != 0) die("fdatasync failed");
  ::close(state.fd);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"bytes\": %llu, \"seconds\": %.6f, \"sha256\": \"%s\"}\n",
              static_cast<unsigned long long>(state.written), seconds, digest.c_str());
  return 0;
}
