// Running a helper program (the Azure CLI) without a shell: argv exactly as given, stdin from /dev/null, stdout and
// stderr captured, bounded in time and in output, the child killed (its whole process group) when time runs out.
// Thread safety: reentrant; any number of threads may run programs at once.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo::util {

struct ProgramOutput {
  int exit_code = -1;  // the exit status, -1 when the program was ended by a signal
  std::string out;     // stdout, at most RunOptions::max_output bytes
  std::string err;     // stderr, likewise
};

struct RunOptions {
  Milliseconds timeout{10'000};
  std::size_t max_output = std::size_t{1} << 20;  // per stream; more is read and dropped
};

// The first executable `name` in the ':'-separated directories of `path_value`. Relative and empty entries are
// skipped: a credential helper is never taken from the current directory. nullopt when there is none.
std::optional<std::string> find_in_path(std::string_view name, std::string_view path_value);

// Runs `program` (an absolute path) with `argv` (argv[0] included), in this process's environment. Errors: timeout (the
// time ran out: the child's process group was sent SIGKILL and the child reaped), io (pipes or spawn failed). A
// non-zero exit status is not an Error: see ProgramOutput::exit_code.
Result<ProgramOutput> run_program(const std::string& program, const std::vector<std::string>& argv,
                                  const RunOptions& options = {});

}  // namespace datavo::util
