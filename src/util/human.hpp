// Numbers for people, in messages and text reports. Thread safety: pure functions.
#pragma once

#include <string>

#include "datavo/units.hpp"

namespace datavo::util {

// A byte count in binary units, one decimal above bytes: "512 B", "1.5 MiB", "2.0 GiB".
std::string human_bytes(Bytes size);
// `value` with exactly `digits` decimals: fixed_point(2.5, 2) is "2.50".
std::string fixed_point(double value, int digits);

}  // namespace datavo::util
