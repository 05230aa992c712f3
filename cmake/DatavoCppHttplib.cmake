# Defines the imported target Datavo::cpp_httplib when libcpp-httplib is found. Debian's libcpp-httplib-dev ships a
# compiled libcpp-httplib.so and a pkg-config file, but no CMake package. Included by Dependencies.cmake for the
# build, and by the installed DatavoConfig.cmake: libdatavo is static, so whoever links it links cpp-httplib too.
# The includer checks `TARGET Datavo::cpp_httplib` and reports a failure its own way.
if(NOT TARGET Datavo::cpp_httplib)
  find_library(DATAVO_CPP_HTTPLIB_LIBRARY NAMES cpp-httplib)
  if(DATAVO_CPP_HTTPLIB_LIBRARY)
    add_library(Datavo::cpp_httplib UNKNOWN IMPORTED)
    set_target_properties(Datavo::cpp_httplib PROPERTIES IMPORTED_LOCATION "${DATAVO_CPP_HTTPLIB_LIBRARY}")
  endif()
endif()
