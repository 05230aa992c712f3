// The "--flag value" pairs of a small benchmark program's command line.
// Header-only.
#pragma once

#include <string>

// Calls take(flag, value) for each pair of argv[1..], in order. A flag without a value, and one that take() does not
// know (it returns false), end the program through usage(why), which must not return.
template <typename Usage, typename Take>
void for_each_flag(int argc, char** argv, Usage&& usage, Take&& take) {
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) usage(std::string("no value for ") + argv[i]);
    const std::string flag = argv[i];
    if (!take(flag, std::string(argv[i + 1]))) usage("unknown flag " + flag);
  }
}
