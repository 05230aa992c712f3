# INTERFACE targets carrying warnings and sanitizer flags, linked by every project target.
add_library(datavo_warnings INTERFACE)
target_compile_options(datavo_warnings INTERFACE -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic)
if(DATAVO_WERROR)
  target_compile_options(datavo_warnings INTERFACE -Werror)
endif()

add_library(datavo_sanitizers INTERFACE)
if(DATAVO_SANITIZE)
  target_compile_options(datavo_sanitizers INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                                     -fno-sanitize-recover=undefined)
  target_link_options(datavo_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
