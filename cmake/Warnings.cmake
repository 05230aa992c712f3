# INTERFACE targets carrying warnings and sanitizer flags, linked by every project target.
add_library(datavo_warnings INTERFACE)
target_compile_options(datavo_warnings INTERFACE -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic)
if(DATAVO_WERROR)
  target_compile_options(datavo_warnings INTERFACE -Werror)
endif()
# In a unity batch every source is an included file, so g++ reports each class of a source whose members use a
# type of that source's anonymous namespace (an Impl holding a helper of its own file) as having "subobject
# linkage", a warning meant for such classes in headers. Both types stay inside one translation unit here.
if(DATAVO_UNITY_BUILD)
  target_compile_options(datavo_warnings INTERFACE -Wno-subobject-linkage)
endif()

add_library(datavo_sanitizers INTERFACE)
if(DATAVO_SANITIZE)
  target_compile_options(datavo_sanitizers INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                     -fno-sanitize-recover=undefined)
  target_link_options(datavo_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
if(DATAVO_TSAN)
  if(DATAVO_SANITIZE)
    message(FATAL_ERROR "DATAVO_TSAN and DATAVO_SANITIZE cannot be combined: ThreadSanitizer excludes AddressSanitizer")
  endif()
  target_compile_options(datavo_sanitizers INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(datavo_sanitizers INTERFACE -fsanitize=thread)
endif()
# A sanitizer build exists to run the unit tests, so it is built for build time: -O1 (what the ASan and TSan
# manuals recommend) and line tables only (-g1: a report still names file and line). Measured on 2 cores with g++ 12,
# this halves the compile time of a source file against -O2 -g. These options come after the build type's flags, so
# they win; a Debug build keeps -O0 -g. At -O1, g++ 12 reports std::optional<std::string> as "may be used
# uninitialized" where it is not (GCC bug 80635); the -O2 build keeps that warning, as an error under DATAVO_WERROR.
if(DATAVO_SANITIZE OR DATAVO_TSAN)
  target_compile_options(datavo_sanitizers INTERFACE "$<$<NOT:$<CONFIG:Debug>>:-O1;-g1;-Wno-maybe-uninitialized>")
endif()

# The test programs' own sources: GoogleTest macros expand into large functions whose speed never matters, so they
# are compiled without optimisation and with line tables only, whatever the build type (half the compile time of
# -O1 again; measured with tests/unit/net/test_http_client.cpp under ASan: 57 s at -O2 -g, 27 s at -O1 -g1, 13 s at
# -O0 -g1). The library they test keeps the build type's flags (or the sanitizer builds' above). Linked by the test
# targets only (tests/CMakeLists.txt).
add_library(datavo_test_code INTERFACE)
target_compile_options(datavo_test_code INTERFACE "$<$<NOT:$<CONFIG:Debug>>:-O0;-g1>")
