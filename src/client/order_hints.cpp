#include "client/order_hints.hpp"

namespace datavo::client {
namespace {

std::vector<std::size_t> places_of(const std::vector<std::size_t>& order) {
  std::vector<std::size_t> place(order.size());
  for (std::size_t u = 0; u < order.size(); ++u) place[order[u]] = u;
  return place;
}

}  // namespace

OrderHints::OrderHints(const std::vector<std::size_t>& this_epoch, const std::vector<std::size_t>& next_epoch,
                       Milliseconds step, TimePoint anchor)
    : this_place_(places_of(this_epoch)), next_place_(places_of(next_epoch)), step_(step), anchor_(anchor) {}

OrderHints::TimePoint OrderHints::at_distance(std::size_t shards) const {
  return anchor_ - std::chrono::duration_cast<TimePoint::duration>(step_) * static_cast<std::int64_t>(shards);
}

OrderHints::TimePoint OrderHints::before_use(std::size_t position) const {
  return at_distance(this_place_.at(position));
}

OrderHints::TimePoint OrderHints::after_use(std::size_t position) const {
  return at_distance(this_place_.size() + next_place_.at(position));
}

}  // namespace datavo::client
