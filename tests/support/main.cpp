// doctest main shared by every suite.  After the run it releases the shared
// fixtures (tests/support/fixtures.hpp) while the Vulkan loader, the driver and
// the validation layer are still alive.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/support/fixtures.hpp"

int main(int argc, char** argv) {
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  const int rc = ctx.run();
  reach::test::release_fixtures();
  return rc;
}
