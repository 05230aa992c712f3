// Temporary names: the one scheme for every file written under a temporary name before a rename makes it final
// (util::AtomicFile and write_file_atomic, a folder tier's staging files, its probe files). A temporary name
// carries its writer's tag, "<host>.<pid>.<random>" (host_name(), which has no dots; the writer's pid; 16 random hex
// digits), so that a sweep can tell the file of a writer that died from a live one's. Two placements:
//   - beside its target:               "<target>.tmp.<tag>"       temp_name_beside()
//   - in a directory of temporaries:   "<dir>/<tag>.<stem>.tmp"   temp_name_in() (a folder tier's .staging/)
// temp_writer() reads the tag back from either; a file of the second placement written before stems existed
// ("<tag>.tmp") reads the same.
//
// Thread safety: reentrant.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace datavo::util {

// "<host>.<pid>.<random>": this process's tag, with fresh random digits at each call.
std::string writer_tag();
// "<target>.tmp.<tag>": a temporary beside `target`, in its directory, so that the rename never crosses filesystems.
std::string temp_name_beside(const std::string& target);
// "<dir>/<tag>.<stem>.tmp". REQUIRES: `stem` is a valid file name part (no '/').
std::string temp_name_in(const std::string& dir, std::string_view stem);

struct TempWriter {
  std::string host;
  pid_t pid = 0;
};
// The writer of the temporary file called `file_name` (no directory), from the tag of either placement; nullopt
// when the name carries no tag.
std::optional<TempWriter> temp_writer(std::string_view file_name);
// Whether `file_name` is a temporary of a process of this host that no longer exists. False for a name without a
// tag, another host's (its pid says nothing here) and a live process's.
bool written_by_dead_local_process(std::string_view file_name);

}  // namespace datavo::util
