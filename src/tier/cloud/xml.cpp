#include "tier/cloud/xml.hpp"

#include <expat.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace datavo::cloud {
namespace {

struct ParserDeleter {
  void operator()(XML_Parser parser) const noexcept { XML_ParserFree(parser); }
};

std::string_view local_name(const XML_Char* name) {
  std::string_view text(name);
  if (auto colon = text.rfind(':'); colon != std::string_view::npos) text.remove_prefix(colon + 1);
  return text;
}

struct Walk {
  XML_Parser parser = nullptr;
  std::string_view parent;
  int depth = 0;
  int parent_depth = -1;  // the depth of the <parent> being read, -1 before it
  bool done = false;      // the first <parent> has ended: the rest of the document is not read
  bool every = false;     // read every <parent>, not only the first
  std::string child;      // the child element being read, empty between children
  std::string text;
  std::map<std::string, std::string> out;
  std::vector<std::map<std::string, std::string>> records;  // with `every`
};

void on_start(void* user, const XML_Char* name, const XML_Char**) {
  auto& walk = *static_cast<Walk*>(user);
  ++walk.depth;
  if (walk.done) return;
  if (walk.parent_depth < 0) {
    if (local_name(name) == walk.parent) walk.parent_depth = walk.depth;
  } else if (walk.depth == walk.parent_depth + 1) {
    walk.child = std::string(local_name(name));
    walk.text.clear();
  }
}

void on_end(void* user, const XML_Char*) {
  auto& walk = *static_cast<Walk*>(user);
  if (!walk.done && walk.parent_depth >= 0) {
    if (walk.depth == walk.parent_depth + 1 && !walk.child.empty()) {
      walk.out.emplace(walk.child, walk.text);
      walk.child.clear();
    } else if (walk.depth == walk.parent_depth) {
      if (walk.every) {
        walk.records.push_back(std::move(walk.out));
        walk.out.clear();
        walk.parent_depth = -1;
      } else {
        walk.done = true;
        // What follows is not read, so a body cut short after the element (the transport keeps 64 KiB of an
        // error body) still answers.
        XML_StopParser(walk.parser, XML_FALSE);
      }
    }
  }
  --walk.depth;
}

void on_text(void* user, const XML_Char* data, int length) {
  auto& walk = *static_cast<Walk*>(user);
  // Only the direct text of a child: text inside its own children is not its value.
  if (!walk.done && !walk.child.empty() && walk.depth == walk.parent_depth + 1)
    walk.text.append(data, std::size_t(length));
}

}  // namespace

std::optional<std::map<std::string, std::string>> xml_child_texts(std::string_view document, std::string_view parent) {
  std::unique_ptr<XML_ParserStruct, ParserDeleter> parser(XML_ParserCreate("UTF-8"));
  if (!parser) return std::nullopt;
  Walk walk;
  walk.parser = parser.get();
  walk.parent = parent;
  XML_SetUserData(parser.get(), &walk);
  XML_SetElementHandler(parser.get(), on_start, on_end);
  XML_SetCharacterDataHandler(parser.get(), on_text);
  if (document.size() > std::size_t(INT32_MAX)) return std::nullopt;
  const auto status = XML_Parse(parser.get(), document.data(), int(document.size()), XML_TRUE);
  if (!walk.done && (status != XML_STATUS_OK || walk.parent_depth < 0)) return std::nullopt;
  return std::move(walk.out);
}

std::optional<std::vector<std::map<std::string, std::string>>> xml_records(std::string_view document,
                                                                           std::string_view element) {
  std::unique_ptr<XML_ParserStruct, ParserDeleter> parser(XML_ParserCreate("UTF-8"));
  if (!parser) return std::nullopt;
  Walk walk;
  walk.parser = parser.get();
  walk.parent = element;
  walk.every = true;
  XML_SetUserData(parser.get(), &walk);
  XML_SetElementHandler(parser.get(), on_start, on_end);
  XML_SetCharacterDataHandler(parser.get(), on_text);
  if (document.size() > std::size_t(INT32_MAX)) return std::nullopt;
  if (XML_Parse(parser.get(), document.data(), int(document.size()), XML_TRUE) != XML_STATUS_OK) return std::nullopt;
  return std::move(walk.records);
}

}  // namespace datavo::cloud
