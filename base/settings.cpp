#include "base/settings.hpp"

#include <charconv>
#include <climits>
#include <cstring>

namespace reach {

namespace {

// The value of `name`, or nullptr when unset or empty (an empty variable counts as unset).
const char* value_of(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v && *v ? v : nullptr;
}

void ignore(Settings& s, const char* name, const char* value, const std::string& why) {
  s.ignored.push_back(std::string(name) + "='" + value + "' ignored: " + why);
}

// A whole number from 1 to 4096 (the kernel-shape variables), else 0 and a note.
uint32_t count_of(Settings& s, const EnvLookup& env, const char* name) {
  const char* v = value_of(env, name);
  if (!v) return 0;
  uint32_t n = 0;
  const char* end = v + std::strlen(v);
  const auto r = std::from_chars(v, end, n);
  if (r.ec != std::errc() || r.ptr != end || n == 0 || n > 4096) {
    ignore(s, name, v, "not a whole number from 1 to 4096");
    return 0;
  }
  return n;
}

// "0" or "1" (an on/off switch whose default is on); anything else keeps the default.
bool switch_of(Settings& s, const EnvLookup& env, const char* name, bool dflt) {
  const char* v = value_of(env, name);
  if (!v) return dflt;
  if (std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  ignore(s, name, v, "expected 0 or 1");
  return dflt;
}

// $XDG_CACHE_HOME/reach, else $HOME/.cache/reach, else "".
std::string cache_home(const EnvLookup& env) {
  if (const char* x = value_of(env, "XDG_CACHE_HOME")) return std::string(x) + "/reach";
  if (const char* h = value_of(env, "HOME")) return std::string(h) + "/.cache/reach";
  return "";
}

}  // namespace

const std::vector<const char*>& settings_variables() {
  static const std::vector<const char*> names = {
      "REACH_DEVICE",       "REACH_VALIDATION",  "REACH_CACHE_DIR",      "REACH_COOPMAT",
      "REACH_COOPMAT_XSPLIT", "REACH_MATVEC_WG", "REACH_MATVEC_ROWS",    "REACH_MATVEC_XSHARED",
      "REACH_GEMM_TILE",    "REACH_GEMM_TM",     "REACH_GEMM_TN",        "REACH_GEMM_BK",
      "REACH_PIPELINE_LOG", "REACH_TUNING_FILE", "REACH_VULKAN_LIBRARY", "REACH_FAULT",
      "REACH_SUBMIT_MS",    "REACH_SUBMIT_LAYERS",
      "REACH_DEVICE_PROFILE"};
  return names;
}

Settings settings_from(const EnvLookup& env) {
  Settings s;

  // REACH_DEVICE: an index (a whole number), else a name substring.
  if (const char* v = value_of(env, "REACH_DEVICE")) {
    long long n = 0;
    const char* end = v + std::strlen(v);
    const auto r = std::from_chars(v, end, n);
    if (r.ptr == end && r.ec == std::errc::result_out_of_range) s.device_index = INT_MAX;   // "out of range" later
    else if (r.ptr != end || r.ec != std::errc()) s.device_name = v;
    else if (n < 0) ignore(s, "REACH_DEVICE", v, "a device index is 0 or more (reach info lists them)");
    else s.device_index = n > INT_MAX ? INT_MAX : int(n);
  }

  // On unless unset, empty or "0" (as before: any other value turns them on).
  if (const char* v = value_of(env, "REACH_VALIDATION")) s.validation = std::strcmp(v, "0") != 0;
  if (const char* v = value_of(env, "REACH_PIPELINE_LOG")) s.pipeline_log = *v != '0';

  if (const char* d = value_of(env, "REACH_CACHE_DIR")) s.pipeline_cache_dir = d;
  else s.pipeline_cache_dir = cache_home(env);

  if (const char* f = value_of(env, "REACH_TUNING_FILE")) s.tuning_file = f;
  else if (const std::string home = cache_home(env); !home.empty()) s.tuning_file = home + "/tuning.json";
  else s.tuning_file = ".reach-tuning.json";

  if (const char* v = value_of(env, "REACH_VULKAN_LIBRARY")) s.vulkan_library = v;
  if (const char* v = value_of(env, "REACH_DEVICE_PROFILE")) s.device_profile = v;

  // REACH_FAULT=POINT:N:RESULT (a test hook): all three parts or nothing.
  if (const char* v = value_of(env, "REACH_FAULT")) {
    const std::string f = v;
    const size_t a = f.find(':'), b = a == std::string::npos ? a : f.find(':', a + 1);
    Settings::Fault fault;
    uint64_t n = 0;
    if (b != std::string::npos) {
      fault.point = f.substr(0, a);
      fault.result = f.substr(b + 1);
      const auto r = std::from_chars(f.data() + a + 1, f.data() + b, n);
      if (r.ec != std::errc() || r.ptr != f.data() + b) n = 0;
    }
    fault.nth = n;
    const bool point_ok = fault.point == "submit" || fault.point == "wait" || fault.point == "alloc";
    const bool result_ok = fault.result == "device_lost" || fault.result == "out_of_device_memory" ||
                           fault.result == "out_of_host_memory";
    if (point_ok && result_ok && n > 0) s.fault = fault;
    else ignore(s, "REACH_FAULT", v, "expected submit|wait|alloc:N:device_lost|out_of_device_memory|out_of_host_memory, N >= 1");
  }

  // Bounded submissions: "0" turns each off, so these are read as numbers from 0 (count_of starts at 1).
  auto from_zero = [&](const char* name, uint32_t max, const char* why, uint32_t& out) {
    const char* v = value_of(env, name);
    if (!v) return;
    uint32_t n = 0;
    const char* end = v + std::strlen(v);
    const auto r = std::from_chars(v, end, n);
    if (r.ec != std::errc() || r.ptr != end || n > max) ignore(s, name, v, why);
    else out = n;
  };
  from_zero("REACH_SUBMIT_MS", 60000, "not a whole number of ms from 0 (no bound) to 60000", s.submit_ms);
  from_zero("REACH_SUBMIT_LAYERS", 4096, "not a whole number from 0 (no cap) to 4096", s.submit_layers);

  KernelSettings& k = s.kernels;
  if (const char* v = value_of(env, "REACH_COOPMAT")) {
    if (std::strcmp(v, "0") == 0) k.coopmat = CoopmatUse::off;
    else if (std::strcmp(v, "1") == 0) k.coopmat = CoopmatUse::all;
    else if (std::strcmp(v, "quant") == 0) k.coopmat = CoopmatUse::quant;
    else ignore(s, "REACH_COOPMAT", v, "expected 0, 1 or quant");
  }
  k.coopmat_xsplit = switch_of(s, env, "REACH_COOPMAT_XSPLIT", true);
  // Any value but "0" asks for X in shared memory (the kernel takes it only in the modes that can).
  if (const char* v = value_of(env, "REACH_MATVEC_XSHARED")) k.matvec_xshared = std::strcmp(v, "0") != 0;
  k.matvec_wg = count_of(s, env, "REACH_MATVEC_WG");
  k.matvec_rows = count_of(s, env, "REACH_MATVEC_ROWS");
  k.gemm_tile = count_of(s, env, "REACH_GEMM_TILE");
  k.gemm_tm = count_of(s, env, "REACH_GEMM_TM");
  k.gemm_tn = count_of(s, env, "REACH_GEMM_TN");
  k.gemm_bk = count_of(s, env, "REACH_GEMM_BK");
  return s;
}

}  // namespace reach
