// libFuzzer target: arbitrary bytes through TarReader and SampleIterator, in both end-marker modes.
//
// Beyond "no crash, no sanitizer report" it checks properties that must hold for every input:
//   - every payload span lies inside the input;
//   - an error always comes with a TarFault and a bounded message that names a byte offset (0 for compressed data);
//   - members yielded and skipped never outnumber the header blocks;
//   - an archive read cleanly, rewritten by TarWriter, reads back to the same members, and tar_archive_size
//     predicts the rewritten size exactly.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "datavo/tar.hpp"

namespace {

using datavo::EndMarker;
using datavo::TarFault;

void check(bool condition) {
  if (!condition) std::abort();
}

struct Member {
  std::string name;
  std::span<const std::byte> data;
};

bool inside(std::span<const std::byte> part, std::span<const std::byte> whole) {
  const auto begin = reinterpret_cast<std::uintptr_t>(whole.data());
  const auto part_begin = reinterpret_cast<std::uintptr_t>(part.data());
  if (part.empty()) return true;
  return part_begin >= begin && part_begin + part.size() <= begin + whole.size();
}

void round_trip(const std::vector<Member>& members) {
  std::string rewritten;
  datavo::TarWriter writer([&rewritten](std::span<const std::byte> bytes) -> datavo::Result<void> {
    rewritten.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return datavo::ok();
  });
  std::vector<datavo::TarEntryInfo> entries;
  for (const Member& m : members) {
    // Every name the reader yields is one the writer accepts.
    check(static_cast<bool>(writer.add_member(m.name, m.data)));
    entries.push_back({m.name, datavo::Bytes{m.data.size()}});
  }
  check(static_cast<bool>(writer.finish()));
  auto predicted = datavo::tar_archive_size(entries);
  check(predicted && predicted->count() == rewritten.size());

  datavo::TarReader reader(std::as_bytes(std::span(rewritten)), "rewritten.tar");
  for (const Member& m : members) {
    auto again = reader.next();
    check(again && *again);
    check((*again)->name == m.name);
    check((*again)->data.size() == m.data.size());
    check(std::equal(m.data.begin(), m.data.end(), (*again)->data.begin()));
  }
  auto end = reader.next();
  check(end && !*end);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> archive = std::as_bytes(std::span(data, size));
  for (const EndMarker end_marker : {EndMarker::required, EndMarker::optional}) {
    datavo::TarReader reader(archive, "fuzz.tar", {.end_marker = end_marker});
    std::vector<Member> members;
    bool clean = false;
    for (;;) {
      auto member = reader.next();
      if (!member) {
        check(reader.fault() != TarFault::none);
        check(member.error().message.find("byte offset ") != std::string::npos);
        // Compressed data is recognised at the start of the archive only, and says so at offset 0.
        check(reader.fault() != TarFault::compressed ||
              member.error().message.find("at byte offset 0: ") != std::string::npos);
        // Messages stay bounded whatever the names: a path, two cut names and fixed text.
        check(member.error().message.size() < 1024);
        break;
      }
      if (!*member) {
        clean = true;
        break;
      }
      check(inside((*member)->data, archive));
      check(!(*member)->name.empty());
      // Every header takes a block: the members yielded and skipped can never outnumber them.
      const datavo::TarSkips& skipped = reader.skipped();
      check(members.size() + skipped.directories + skipped.symlinks + skipped.hard_links + skipped.other <
            size / 512 + 1);
      members.push_back({std::string((*member)->name), (*member)->data});
    }
    if (clean) round_trip(members);

    datavo::SampleIterator samples(archive, "fuzz.tar", {.end_marker = end_marker});
    for (;;) {
      auto sample = samples.next();
      if (!sample) {
        check(samples.fault() != TarFault::none);
        break;
      }
      if (*sample == nullptr) break;
      check(!(*sample)->id.empty() && !(*sample)->fields.empty());
      for (const datavo::SampleField& field : (*sample)->fields) {
        check(!field.key.empty());
        check(inside(field.data, archive));
      }
    }
  }
  return 0;
}
