// The S3 tier's configuration rules shared by its shards.yaml parser (s3_type.cpp) and its factory (s3_tier.cpp).
#pragma once

#include <string>

namespace datavo::s3 {

// Why `bucket` is not a valid S3 bucket name (roughly AWS's rules); empty when it is one.
std::string bucket_name_problem(const std::string& bucket);

}  // namespace datavo::s3
