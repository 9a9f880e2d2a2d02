// `reach info`: one readable line per Vulkan device (or JSON).
#include <cstdio>

#include "engine/device.hpp"
#include "cli/commands.hpp"

namespace reach::cli {

int cmd_info(const Args& args) {
  bool json = false;
  for (const auto& a : args) {
    if (a == "--json") json = true;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: reach info [--json]\n");
      return 0;
    } else {
      std::fprintf(stderr, "reach info: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  auto devices = Device::list();
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < devices.size(); ++i) {
      std::string obj = devices[i].caps.to_json();
      obj.insert(1, "\"index\":" + std::to_string(i) + ",");
      std::printf("%s%s", i ? "," : "", obj.c_str());
    }
    std::printf("]\n");
  } else {
    for (const auto& d : devices) std::printf("%u: %s\n", d.index, d.caps.summary().c_str());
  }
  return 0;
}

}  // namespace reach::cli
