// `datavo serve`: serves an origin store over origin protocol v1 (docs/protocol.md) until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/cli.hpp"
#include "datavo/origin.hpp"
#include "util/fs.hpp"

namespace datavo::cli {
namespace {

Error usage(std::string message) { return Error{ErrorCode::invalid_argument, std::move(message)}; }

struct ServeArgs {
  std::string store;
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string token_file;
  std::string port_file;
  std::int64_t ticket_ttl = 900;
  std::int64_t ticket_wait_ms = 5000;
  int threads = 8;
  std::uint64_t chunk_size = k_default_chunk_size.count();
  bool quiet = false;
  bool init = false;
};

std::string read_token(const std::string& path) {
  auto text = util::read_file(path);
  if (!text) throw Fatal{k_exit_usage, usage("--token-file " + path + ": " + text.error().message)};
  std::string token = text->substr(0, text->find('\n'));
  if (!token.empty() && token.back() == '\r') token.pop_back();
  if (token.empty()) throw Fatal{k_exit_usage, usage("--token-file " + path + ": the first line is empty")};
  return token;
}

// A directory `serve` may use as its store: one that is a store already (it has instance.json), an empty or
// missing one (created), or any directory with --init. Anything else is most likely a typo for the store, e.g. the
// source directory of `datavo pack`, and serving it would write the store's files among the user's.
void check_store_dir(const ServeArgs& args) {
  struct stat st {};
  if (::stat(args.store.c_str(), &st) != 0) {
    if (errno != ENOENT) throw Fatal{k_exit_failed, Error::from_errno(errno, "cannot read the store " + args.store)};
    require(util::make_dirs(args.store, 0755));
    return;
  }
  if (!S_ISDIR(st.st_mode)) throw Fatal{k_exit_usage, usage("the store " + args.store + " is not a directory")};
  if (args.init || ::access((args.store + "/instance.json").c_str(), F_OK) == 0) return;
  std::error_code error;
  if (std::filesystem::is_empty(args.store, error) && !error) return;
  throw Fatal{k_exit_usage, usage(args.store +
                                  " is not a Datavo store (it has no instance.json) and is not empty; "
                                  "nothing was written into it. Give the store directory made by "
                                  "`datavo pack --root`, or pass --init to make " +
                                  args.store + " a store")};
}

void cmd_serve(const ServeArgs& args) {
  check_store_dir(args);
  if (args.ticket_ttl < 1) throw Fatal{k_exit_usage, usage("--ticket-ttl must be at least 1 second")};
  OriginServerOptions options;
  options.store = args.store;
  options.host = args.host;
  options.port = args.port;
  if (!args.token_file.empty()) options.token = read_token(args.token_file);
  options.ticket_ttl = Seconds{args.ticket_ttl};
  options.ticket_wait = Milliseconds{args.ticket_wait_ms};
  options.log_requests = !args.quiet;
  options.threads = args.threads;
  options.chunk_size = Bytes{args.chunk_size};

  // SIGINT and SIGTERM are taken by sigwait() on a thread of our own: the server's threads inherit the mask, so
  // no handler ever runs in the middle of a request.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto server = require(OriginServer::start(options));
  std::cout << "listening on " << server->base_url() << std::endl;
  if (!args.port_file.empty()) {
    require(util::write_file_atomic(args.port_file, std::to_string(server->port()) + "\n", 0644));
  }

  std::atomic<int> received{0};
  std::thread waiter([&] {
    int sig = 0;
    if (sigwait(&stop_signals, &sig) == 0) received = sig;
    server->stop();
  });
  server->wait();
  if (received == 0) pthread_kill(waiter.native_handle(), SIGTERM);  // the server stopped by itself
  waiter.join();
  server->stop();
  if (received != 0) std::cerr << "datavo-serve: stopped by signal " << received.load() << "\n";
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto serve_args = std::make_shared<ServeArgs>();
  auto* serve = app.add_subcommand("serve", "serve an origin store over origin protocol v1");
  serve->add_option("store", serve_args->store, "the store directory (created when missing)")->required();
  serve->add_option("--host", serve_args->host, "address to bind (default 127.0.0.1, loopback only)");
  serve->add_option("--port", serve_args->port, "port to bind; 0 picks a free one (default 0)");
  serve->add_option("--token-file", serve_args->token_file,
                    "require `Authorization: Bearer <first line of this file>` on every API call");
  serve->add_option("--port-file", serve_args->port_file, "write the bound port here (atomically) once listening");
  serve->add_option("--ticket-ttl", serve_args->ticket_ttl, "lifetime of stream tickets in seconds (default 900)");
  serve
      ->add_option("--ticket-wait-ms", serve_args->ticket_wait_ms,
                   "how long a ticket request waits for its shard's tar to be built before it is answered 202 "
                   "(preparing) and the client asks again (default 5000, at most 20000)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{20'000}));
  serve->add_option("--threads", serve_args->threads, "worker threads (default 8)")->check(CLI::Range(1, 1024));
  serve
      ->add_option("--chunk-size", serve_args->chunk_size,
                   "bytes per chunk of the chunk digests in tickets (default 4194304, from 4096 to 1073741824)")
      ->check(CLI::Range(k_min_chunk_size.count(), k_max_chunk_size.count()));
  serve->add_flag("--quiet", serve_args->quiet, "do not log one line per request on stderr");
  serve->add_flag("--init", serve_args->init,
                  "make STORE a store even though it is not empty (without it, serve refuses a non-empty directory "
                  "that is not a store)");
  serve->callback([serve_args] { cmd_serve(*serve_args); });
}

}  // namespace datavo::cli
