// KILN_TEST_ASAN is defined where the tests are built with AddressSanitizer: GCC defines
// __SANITIZE_ADDRESS__, clang answers __has_feature(address_sanitizer) instead.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define KILN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_TEST_ASAN 1
#endif
#endif
