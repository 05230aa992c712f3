#include "datavo/tar.hpp"
#include "tar/format.hpp"

namespace datavo {

std::optional<SampleName> split_sample_name(std::string_view member_name) {
  const std::size_t slash = member_name.rfind('/');
  const std::size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  const std::size_t dot = member_name.find('.', base);
  // WebDataset skips such members too: a leading dot leaves no id, a trailing one no key.
  if (dot == std::string_view::npos || dot == base || dot + 1 == member_name.size()) return std::nullopt;
  return SampleName{member_name.substr(0, dot), member_name.substr(dot + 1)};
}

SampleIterator::SampleIterator(std::span<const std::byte> archive, std::string shard_name, TarReaderOptions options)
    : reader_(archive, std::move(shard_name), options) {}

TarSkips SampleIterator::skipped() const {
  TarSkips skips = reader_.skipped();
  skips.unnamed = unnamed_;
  return skips;
}

Result<const Sample*> SampleIterator::next() {
  if (error_) return *error_;
  if (done_) return static_cast<const Sample*>(nullptr);

  pending_.clear();
  if (lookahead_) {
    arena_.erase(0, lookahead_->name_begin);
    lookahead_->name_begin = 0;
    pending_.push_back(*lookahead_);
    lookahead_.reset();
  } else {
    arena_.clear();
  }

  const auto id_of = [this](const PendingField& field) {
    return std::string_view(arena_).substr(field.name_begin, field.id_size);
  };
  const auto key_of = [this](const PendingField& field) {
    return std::string_view(arena_).substr(field.name_begin + field.id_size + 1, field.name_size - field.id_size - 1);
  };

  for (;;) {
    auto member = reader_.next();
    if (!member) {
      error_ = member.error();
      return *error_;
    }
    if (!*member) {
      done_ = true;
      break;
    }
    const TarMember& m = **member;
    const std::optional<SampleName> split = split_sample_name(m.name);
    if (!split) {
      ++unnamed_;
      continue;
    }
    const PendingField field{arena_.size(), split->id.size(), m.name.size(), m.data, m.header_offset};
    if (!pending_.empty() && id_of(pending_.front()) != split->id) {
      arena_ += m.name;
      lookahead_ = field;
      break;
    }
    for (const PendingField& seen : pending_) {
      if (key_of(seen) == split->key) {
        fault_ = TarFault::duplicate_key;
        error_ =
            Error{ErrorCode::integrity,
                  tar_format::error_message(reader_.shard_name(), m.name, m.header_offset,
                                            "sample \"" + tar_format::escape_name(split->id) + "\" has the key \"" +
                                                tar_format::escape_name(split->key) + "\" twice")};
        return *error_;
      }
    }
    arena_ += m.name;
    pending_.push_back(field);
  }

  if (pending_.empty()) return static_cast<const Sample*>(nullptr);
  sample_.id = id_of(pending_.front());
  sample_.fields.clear();
  for (const PendingField& field : pending_) {
    sample_.fields.push_back(SampleField{key_of(field), field.data, field.header_offset});
  }
  return static_cast<const Sample*>(&sample_);
}

Result<void> for_each_sample(std::span<const std::byte> archive, std::string shard_name,
                             const std::function<Result<void>(const Sample&)>& visit, TarReaderOptions options) {
  SampleIterator samples(archive, std::move(shard_name), options);
  for (;;) {
    auto sample = samples.next();
    if (!sample) return std::move(sample).error();
    if (*sample == nullptr) return ok();
    DATAVO_TRY(visit(**sample));
  }
}

}  // namespace datavo
