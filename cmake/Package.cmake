# CPack: `cpack -G DEB` in a build directory (after the build) makes two Debian packages from the components of
# cmake/Install.cmake, installed under /usr:
#   datavo          the CLI; its Depends come from dpkg-shlibdeps (dpkg-dev), so that it installs on a fresh machine
#   libdatavo-dev   the headers, libdatavo.a, the CMake package and datavo.pc; it depends on the -dev packages of
#                   what libdatavo links, since a program linking it links those too
# tests/install/test_deb.sh builds, inspects, installs and removes them.
set(DATAVO_DEB_MAINTAINER "Datavo maintainers <maintainers@datavo.invalid>"
    CACHE STRING "The Maintainer field of the Debian packages")

set(CPACK_PACKAGE_NAME datavo)
set(CPACK_PACKAGE_VENDOR "Datavo")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)
set(CPACK_COMPONENTS_ALL cli dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DATAVO_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# gzip: fast to build in a test, and read by every dpkg.
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME datavo)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_PACKAGE_SHLIBDEPS ON)
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "The datavo command line: a cache of dataset shards in tiers (local folders, S3, GCS, Azure Blob) in front of an
origin server, read by content hash. Commands: cache info/check/fetch/put/ls/rm/gc/verify/stats, warm, read, pack,
serve.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdatavo-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libssl-dev, libcurl4-openssl-dev, libyaml-cpp-dev, libexpat1-dev, libcpp-httplib-dev, zlib1g-dev, libzstd-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "The Datavo C++ library: libdatavo.a, its public headers (datavo/), the CMake package (find_package(Datavo)
gives Datavo::datavo) and datavo.pc (pkg-config --static).")

include(CPack)
