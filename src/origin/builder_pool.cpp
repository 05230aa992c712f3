#include "origin/builder_pool.hpp"

#include <exception>

#include "util/log.hpp"

namespace datavo::origin {
namespace {

Refusal stopping() { return Refusal{503, "the server is stopping"}; }

}  // namespace

BuilderPool::BuilderPool(int threads, Build build) : build_(std::move(build)) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

BuilderPool::~BuilderPool() { stop(); }

BuilderPool::Outcome BuilderPool::request(const TicketFields& fields, Milliseconds wait) {
  std::shared_ptr<Preparation> preparation;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return stopping();
    auto& slot = preparing_[fields.content_hash];
    if (!slot) {
      slot = std::make_shared<Preparation>();
      slot->fields = fields;
      queue_.push_back(slot);
      wanted_.notify_one();
      // Without this, whether a zero wait sees its own build finished depends on the scheduler.
      if (wait <= Milliseconds{0}) return Pending{};
    }
    preparation = slot;
  }
  std::unique_lock lock(preparation->mu);
  if (!preparation->finished.wait_for(lock, wait, [&] { return preparation->done; })) return Pending{};
  if (const auto* tar = std::get_if<KeyGroupTar>(&preparation->result)) return *tar;
  return std::get<Refusal>(preparation->result);
}

void BuilderPool::run() {
  for (;;) {
    std::shared_ptr<Preparation> preparation;
    {
      std::unique_lock lock(mu_);
      wanted_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      preparation = std::move(queue_.front());
      queue_.pop_front();
    }
    finish(*preparation, build(preparation->fields));
  }
}

std::variant<KeyGroupTar, Refusal> BuilderPool::build(const TicketFields& fields) {
  try {
    return build_(fields);
  } catch (const std::exception& e) {
    LOG_ERROR("origin: building the tar of " << fields.content_hash << " failed: " << e.what());
    return Refusal{500, "the store failed: internal"};
  }
}

void BuilderPool::finish(Preparation& preparation, std::variant<KeyGroupTar, Refusal> result) {
  {
    std::lock_guard lock(mu_);
    // Built (or refused): from now on the store answers, or the next request queues a new build.
    auto it = preparing_.find(preparation.fields.content_hash);
    if (it != preparing_.end() && it->second.get() == &preparation) preparing_.erase(it);
  }
  {
    std::lock_guard lock(preparation.mu);
    preparation.result = std::move(result);
    preparation.done = true;
  }
  preparation.finished.notify_all();
}

void BuilderPool::stop() {
  std::lock_guard stop_lock(stop_mu_);
  std::deque<std::shared_ptr<Preparation>> abandoned;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    abandoned.swap(queue_);
  }
  wanted_.notify_all();
  for (auto& preparation : abandoned) finish(*preparation, stopping());
  for (auto& thread : threads_) thread.join();  // a build under way finishes first
  threads_.clear();
}

}  // namespace datavo::origin
