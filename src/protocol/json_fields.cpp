#include "protocol/json_fields.hpp"

#include <limits>

namespace datavo::protocol {

Result<nlohmann::json> parse_object(std::string_view text, ErrorCode code, std::string_view context) {
  auto value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Error{code, std::string(context) + "not JSON"};
  if (!value.is_object()) return Error{code, std::string(context) + "not a JSON object"};
  return value;
}

std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

JsonFields::JsonFields(const nlohmann::json& object, ErrorCode code, std::string context, std::string path)
    : object_(object), code_(code), context_(std::move(context)), path_(std::move(path)) {}

Error JsonFields::refuse(std::string_view field, std::string_view problem) const {
  return Error{code_, context_ + "\"" + path_ + std::string(field) + "\" " + std::string(problem)};
}

bool JsonFields::has(const char* field) const { return object_.contains(field); }

Result<std::string> JsonFields::string(const char* field) const {
  auto it = object_.find(field);
  if (it == object_.end() || !it->is_string()) return refuse(field, "is missing or not a string");
  return it->get<std::string>();
}

Result<std::string> JsonFields::non_empty_string(const char* field) const {
  auto text = string(field);
  if (text && text->empty()) return refuse(field, "is empty");
  return text;
}

Result<std::uint64_t> JsonFields::unsigned_number(const char* field) const {
  auto it = object_.find(field);
  if (it == object_.end() || !it->is_number_unsigned())
    return refuse(field, "is missing or not a non-negative integer");
  return it->get<std::uint64_t>();
}

Result<std::uint64_t> JsonFields::positive_number(const char* field) const {
  auto it = object_.find(field);
  if (it == object_.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() == 0)
    return refuse(field, "is missing or not a positive integer");
  return it->get<std::uint64_t>();
}

Result<std::int64_t> JsonFields::integer(const char* field) const {
  auto it = object_.find(field);
  const bool fits = it != object_.end() && it->is_number_integer() &&
                    (!it->is_number_unsigned() ||
                     it->get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<std::int64_t>::max()));
  if (!fits) return refuse(field, "is missing or not an integer");
  return it->get<std::int64_t>();
}

Result<const nlohmann::json*> JsonFields::array(const char* field) const {
  auto it = object_.find(field);
  if (it == object_.end() || !it->is_array()) return refuse(field, "is missing or not an array");
  return &*it;
}

Result<const nlohmann::json*> JsonFields::object(const char* field) const {
  auto it = object_.find(field);
  if (it == object_.end() || !it->is_object()) return refuse(field, "is missing or not an object");
  return &*it;
}

JsonFields JsonFields::nested(const nlohmann::json& element, std::string path) const {
  return JsonFields(element, code_, context_, path_ + std::move(path));
}

Result<void> JsonFields::strings(const char* array_field, const nlohmann::json& array,
                                 std::vector<std::string>& out) const {
  for (std::size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_string())
      return refuse(std::string(array_field) + "[" + std::to_string(i) + "]", "is not a string");
    out.push_back(array[i].get<std::string>());
  }
  return ok();
}

}  // namespace datavo::protocol
