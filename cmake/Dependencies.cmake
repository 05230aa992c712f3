# Every dependency comes from a Debian package; scripts/install-deps.sh installs them.
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(CURL REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
# expat reads the XML of AWS answers (S3 errors, STS credentials).
find_package(EXPAT REQUIRED)
# zlib and libzstd decompress the .tar.gz and .tar.zst shards `datavo pack` reads.
find_package(ZLIB REQUIRED)
find_package(zstd REQUIRED)
# cpp-httplib, the origin server's HTTP library.
include(${CMAKE_CURRENT_LIST_DIR}/DatavoCppHttplib.cmake)
if(NOT TARGET Datavo::cpp_httplib)
  message(FATAL_ERROR "libcpp-httplib not found (Debian: libcpp-httplib-dev, see scripts/install-deps.sh)")
endif()
if(DATAVO_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(DATAVO_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
