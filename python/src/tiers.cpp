// The tiers: datavo::Tier as datavo_sdk's native tier object, built from shards.yaml-style arguments.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "datavo/config.hpp"
#include "datavo/tier.hpp"
#include "datavo/tier_registry.hpp"

namespace datavo::python {
namespace {

// The same parser as shards.yaml's, so that a keyword and a YAML field can never disagree. No I/O.
std::shared_ptr<Tier> make_tier_from_arguments(const std::string& type,
                                               const std::vector<std::tuple<std::string, std::string, bool>>& arguments,
                                               const std::string& origin) {
  std::vector<TierArgument> args;
  for (const auto& [key, value, quoted] : arguments) args.push_back(TierArgument{key, value, quoted});
  auto config = parse_tier_arguments(type, args, origin);
  if (!config) raise(config.error());
  return unwrap(make_tier(*config));
}

py::list tier_stat_names() {
  py::list out;
  TierStats{}.for_each([&](const char* name, std::uint64_t) { out.append(name); });
  return out;
}

}  // namespace

void bind_tiers(py::module_& m) {
  m.def("tier_stat_names", &tier_stat_names, "The names of the per-tier counters, in order.");
  m.def("tier_fields", &tier_fields, py::arg("type"),
        "The shards.yaml keys a tier of `type` takes (all but `type`): the tier class's arguments.");
  py::class_<Tier, std::shared_ptr<Tier>>(m, "Tier", "A cache tier (C++ datavo::Tier).")
      .def_property_readonly("name", [](const Tier& t) { return t.name(); })
      .def_property_readonly("type", [](const Tier& t) { return std::string(t.type()); })
      .def_property_readonly("max_bytes", [](const Tier& t) { return optional_bytes(t.max_bytes()); })
      .def_property_readonly("supports_direct_read", &Tier::supports_direct_read)
      .def_property_readonly("read_only", &Tier::read_only)
      .def_property_readonly("location", &Tier::location);
  m.def("make_tier", &make_tier_from_arguments, py::arg("type"), py::arg("arguments"), py::arg("origin"),
        "Builds a tier from shards.yaml-style (key, value text, quoted) settings. No I/O.");
}

}  // namespace datavo::python
