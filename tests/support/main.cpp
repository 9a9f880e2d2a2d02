// doctest main shared by every suite.  After the run it releases the shared
// fixtures (tests/support/fixtures.hpp) while the Vulkan loader, the driver and
// the validation layer are still alive.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#ifdef REACH_TEST_LSAN
#include <dlfcn.h>
#endif

#include "tests/support/fixtures.hpp"

int main(int argc, char** argv) {
#ifdef REACH_TEST_LSAN
  // The Vulkan loader unloads the driver and the layers with each VkInstance, and
  // LeakSanitizer cannot name an unloaded library, so tests/lsan.supp could not
  // match their process-lifetime allocations: keep them loaded (as tests/test_capi.c does).
  for (const char* lib : {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so", "libVkLayer_MESA_device_select.so"})
    dlopen(lib, RTLD_NOW | RTLD_NODELETE);
#endif
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  const int rc = ctx.run();
  reach::test::release_fixtures();
  return rc;
}
