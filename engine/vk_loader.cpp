#include "engine/vk_loader.hpp"

#include <map>
#include <memory>
#include <mutex>

#include "base/error.hpp"
#include "base/platform/dynlib.hpp"

namespace reach {

namespace {

// "vkA, vkB" -> the error for a table that lacks them.
[[noreturn]] void throw_missing(const std::vector<const char*>& missing, const std::string& source, const char* level) {
  std::string names;
  for (const char* m : missing) names += std::string(names.empty() ? "" : ", ") + m;
  throw Error(ErrorCode::unsupported, source + " has no " + names + " (" + level +
                                          " functions reach needs): it is not a Vulkan 1.2 loader or driver; "
                                          "update the GPU's Vulkan driver and loader (libvulkan1)");
}

struct Loaded {
  DynamicLibrary library;
  VkGlobalTable global;
};

// The loader opened for a name ("" = the platform's search).  Reached
// through a static pointer and never destroyed: no exit-time destructor
// closes the library under an object that still uses it.
Loaded* open_loader(const Settings& settings) {
  const std::vector<std::string> names =
      settings.vulkan_library.empty() ? default_vulkan_libraries() : std::vector<std::string>{settings.vulkan_library};
  const std::string setting = settings.vulkan_library.empty() ? std::string()
                                                              : " (REACH_VULKAN_LIBRARY=" + settings.vulkan_library + ")";
  std::string tried;
  for (const std::string& name : names) {
    std::string why;
    DynamicLibrary lib = DynamicLibrary::open(name, &why);
    if (!lib.is_open()) {
      tried += "\n  " + (why.find(name) != std::string::npos ? why : name + ": " + why);   // dlerror names it
      continue;
    }
    auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(lib.symbol("vkGetInstanceProcAddr"));
    if (!gipa)
      throw Error(ErrorCode::unsupported, name + setting +
                                              " is not a Vulkan loader: it has no vkGetInstanceProcAddr; " +
                                              (settings.vulkan_library.empty()
                                                   ? "reinstall the Vulkan loader (libvulkan1)"
                                                   : "point REACH_VULKAN_LIBRARY at the Vulkan loader, or unset it"));
    auto loaded = std::make_unique<Loaded>();
    loaded->global = load_global_table(gipa, name + setting);
    loaded->library = std::move(lib);
    return loaded.release();
  }
  if (!settings.vulkan_library.empty())
    throw Error(ErrorCode::unsupported, "no Vulkan loader at REACH_VULKAN_LIBRARY=" + settings.vulkan_library + ":" +
                                            tried + "\nset REACH_VULKAN_LIBRARY to the path of a Vulkan loader, "
                                            "or unset it to use the system's");
  std::string list;
  for (const std::string& name : names) list += std::string(list.empty() ? "" : ", ") + name;
  throw Error(ErrorCode::unsupported, "no Vulkan loader found (" + list + "):" + tried +
                                          "\ninstall your GPU's Vulkan driver (CPU only: apt-get install libvulkan1 "
                                          "mesa-vulkan-drivers); on macOS, MoltenVK; or name the loader with "
                                          "REACH_VULKAN_LIBRARY");
}

}  // namespace

const std::vector<std::string>& default_vulkan_libraries() {
  static const std::vector<std::string> names =
#if defined(_WIN32)
      {"vulkan-1.dll"};
#elif defined(__APPLE__)
      {"libvulkan.1.dylib", "libMoltenVK.dylib"};
#else
      {"libvulkan.so.1"};
#endif
  return names;
}

const VkGlobalTable& vulkan_loader(const Settings& settings) {
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, Loaded*>();   // kept until exit, see open_loader
  std::lock_guard<std::mutex> lock(mu);
  Loaded*& entry = (*loaded)[settings.vulkan_library];
  if (!entry) entry = open_loader(settings);   // a failure stores nothing: the next call tries again
  return entry->global;
}

#define REACH_VK_LOAD(name) t.name = reinterpret_cast<PFN_##name>(gpa(handle, #name));
#define REACH_VK_LOAD_REQUIRED(name) \
  REACH_VK_LOAD(name)                \
  if (!t.name) missing.push_back(#name);

VkGlobalTable load_global_table(PFN_vkGetInstanceProcAddr gpa, const std::string& source) {
  if (!gpa) throw Error(ErrorCode::invalid_argument, source + " is NULL: a vkGetInstanceProcAddr is needed");
  VkGlobalTable t;
  const VkInstance handle = VK_NULL_HANDLE;
  std::vector<const char*> missing;
  t.vkGetInstanceProcAddr = gpa;
  REACH_VK_GLOBAL_FUNCTIONS(REACH_VK_LOAD_REQUIRED)
  REACH_VK_GLOBAL_OPTIONAL(REACH_VK_LOAD)
  if (!missing.empty()) throw_missing(missing, source, "global");
  return t;
}

VkInstanceTable load_instance_table(PFN_vkGetInstanceProcAddr gpa, VkInstance handle, const std::string& source) {
  if (!gpa) throw Error(ErrorCode::invalid_argument, source + " is NULL: a vkGetInstanceProcAddr is needed");
  VkInstanceTable t;
  std::vector<const char*> missing;
  t.instance = handle;
  t.vkGetInstanceProcAddr = gpa;
  REACH_VK_INSTANCE_FUNCTIONS(REACH_VK_LOAD_REQUIRED)
  REACH_VK_INSTANCE_OPTIONAL(REACH_VK_LOAD)
  if (!missing.empty()) throw_missing(missing, source, "instance");
  return t;
}

VkDeviceTable load_device_table(PFN_vkGetDeviceProcAddr gpa, VkDevice handle, const std::string& source) {
  if (!gpa) throw Error(ErrorCode::invalid_argument, source + " has no vkGetDeviceProcAddr");
  VkDeviceTable t;
  std::vector<const char*> missing;
  t.device = handle;
  REACH_VK_DEVICE_FUNCTIONS(REACH_VK_LOAD_REQUIRED)
  if (!missing.empty()) throw_missing(missing, source, "device");
  return t;
}

#undef REACH_VK_LOAD_REQUIRED
#undef REACH_VK_LOAD

}  // namespace reach
