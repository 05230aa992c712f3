// The little XML the cloud tiers read (an S3 <Error>, an STS <Credentials>, ListObjectsV2 and List Blobs
// pages), over expat.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace datavo::cloud {

// The text of each child element of the first element named `parent` (at any depth; namespace prefixes
// ignored), by child name: for "<Error><Code>NoSuchKey</Code>...</Error>" and "Error", {"Code": "NoSuchKey", ...}.
// Entities are decoded; a child that occurs twice keeps its first text. nullopt when `document` is not
// well-formed XML or has no such element.
std::optional<std::map<std::string, std::string>> xml_child_texts(std::string_view document, std::string_view parent);

// The child texts of EVERY element named `element`, in document order (the <Contents> of a ListObjectsV2 page).
// nullopt when `document` is not well-formed XML; an empty list when there is no such element.
std::optional<std::vector<std::map<std::string, std::string>>> xml_records(std::string_view document,
                                                                           std::string_view element);

}  // namespace datavo::cloud
