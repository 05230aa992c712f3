// cpp-httplib as Debian builds it. Debian ships it split into this header and libcpp-httplib.so, built with the
// flags below (`pkg-config --cflags cpp-httplib`). They change the layout of httplib::Request, so every translation
// unit that includes the header must define them too: include this file, never <httplib.h> directly. HTTPS is not
// used: the server speaks plain HTTP.
#pragma once

#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <httplib.h>
