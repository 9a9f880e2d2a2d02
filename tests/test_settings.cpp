// Settings read once (base/settings.hpp): settings_from parses each REACH_* variable (a value it does not
// take keeps the default and is named in `ignored` with the reason), and the library itself reads no
// environment: a Device, its Kernels and the C API made without settings ignore REACH_DEVICE,
// REACH_MATVEC_ROWS, REACH_COOPMAT, ... in the environment, and follow them once an edge hands them over.
#include <doctest/doctest.h>
#include <reach.h>

#include <climits>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/settings.hpp"
#include "engine/device.hpp"
#include "engine/pipeline.hpp"
#include "kernels/kernels.hpp"
#include "tests/support/environment.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"

using namespace reach;

namespace {

using Env = std::map<std::string, std::string>;

// settings_from over a map, remembering which names it asked for.
Settings parse(const Env& env, std::set<std::string>* asked = nullptr) {
  return settings_from([&](const char* name) -> const char* {
    if (asked) asked->insert(name);
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The one `ignored` line naming `var`, or "" (and a failed check) when there is not exactly one.
std::string ignored_line(const Settings& s, const std::string& var) {
  std::string found;
  int n = 0;
  for (const std::string& line : s.ignored)
    if (line.compare(0, var.size() + 1, var + "=") == 0) found = line, ++n;
  CHECK_MESSAGE(n == 1, var << ": " << n << " ignored lines");
  return found;
}

// Sets environment variables for one scope and puts the old values back.
class ScopedEnv {
 public:
  explicit ScopedEnv(const Env& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      reach::test::set_environment(k, v);
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v) reach::test::set_environment(k, *v);
      else reach::test::unset_environment(k);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

DeviceOptions test_options() {
  DeviceOptions opt;
  opt.validation = test::validation_wanted();
  opt.on_validation = test::on_validation_message;
  return opt;
}

}  // namespace

TEST_CASE("settings_from: nothing set gives the defaults, and it asks for exactly the documented variables") {
  std::set<std::string> asked;
  const Settings s = parse({}, &asked);
  CHECK(s.device_index == -1);
  CHECK(s.device_name.empty());
  CHECK_FALSE(s.validation);
  CHECK_FALSE(s.pipeline_log);
  CHECK(s.pipeline_cache_dir.empty());   // no HOME: no cache folder
  CHECK(s.tuning_file == ".reach-tuning.json");
  CHECK(s.vulkan_library.empty());
  CHECK(s.device_profile.empty());
  CHECK(s.kernels.matvec_wg == 0);
  CHECK(s.kernels.matvec_rows == 0);
  CHECK_FALSE(s.kernels.matvec_xshared.has_value());
  CHECK(s.kernels.gemm_tile + s.kernels.gemm_tm + s.kernels.gemm_tn + s.kernels.gemm_bk == 0);
  CHECK(s.kernels.coopmat == CoopmatUse::device);
  CHECK(s.kernels.coopmat_xsplit);
  CHECK(s.ignored.empty());

  std::set<std::string> want(settings_variables().begin(), settings_variables().end());
  CHECK(want.size() == 19);
  want.insert("XDG_CACHE_HOME");
  want.insert("HOME");
  CHECK(asked == want);

  // Each one is in the README's table of variables.
  std::ifstream in(test::source_root() / "README.md");
  std::stringstream readme;
  readme << in.rdbuf();
  const std::string text = readme.str();
  const size_t env = text.find("## Environment");
  REQUIRE(env != std::string::npos);
  const std::string table = text.substr(env, text.find("\n## ", env + 1) - env);
  for (const char* v : settings_variables()) {
    CAPTURE(v);
    CHECK(table.find(std::string("`") + v) != std::string::npos);
  }
}

TEST_CASE("settings_from: the cache folders follow REACH_CACHE_DIR / REACH_TUNING_FILE, XDG_CACHE_HOME, HOME") {
  Settings s = parse({{"HOME", "/home/u"}});
  CHECK(s.pipeline_cache_dir == "/home/u/.cache/reach");
  CHECK(s.tuning_file == "/home/u/.cache/reach/tuning.json");
  s = parse({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}});
  CHECK(s.pipeline_cache_dir == "/xdg/reach");
  CHECK(s.tuning_file == "/xdg/reach/tuning.json");
  s = parse({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", ""}, {"REACH_CACHE_DIR", "/c"}, {"REACH_TUNING_FILE", "/t.json"}});
  CHECK(s.pipeline_cache_dir == "/c");
  CHECK(s.tuning_file == "/t.json");
  CHECK(parse({{"HOME", "/home/u"}, {"REACH_CACHE_DIR", "-"}}).pipeline_cache_dir == "-");   // no disk cache
  // Empty counts as unset.
  CHECK(parse({{"HOME", "/home/u"}, {"REACH_CACHE_DIR", ""}}).pipeline_cache_dir == "/home/u/.cache/reach");
  CHECK(s.ignored.empty());
}

TEST_CASE("settings_from: REACH_DEVICE_PROFILE names the profile file, empty counts as unset") {
  CHECK(parse({{"REACH_DEVICE_PROFILE", "/p/m1.json"}}).device_profile == "/p/m1.json");
  CHECK(parse({{"REACH_DEVICE_PROFILE", ""}}).device_profile.empty());
}

TEST_CASE("settings_from: REACH_DEVICE, REACH_VALIDATION, REACH_PIPELINE_LOG") {
  CHECK(parse({{"REACH_DEVICE", "2"}}).device_index == 2);
  CHECK(parse({{"REACH_DEVICE", "2"}}).device_name.empty());
  CHECK(parse({{"REACH_DEVICE", "llvmpipe"}}).device_name == "llvmpipe");
  CHECK(parse({{"REACH_DEVICE", "llvmpipe"}}).device_index == -1);
  CHECK(parse({{"REACH_DEVICE", "2x"}}).device_name == "2x");   // not a number: a name
  CHECK(parse({{"REACH_DEVICE", "99999999999999999999"}}).device_index == INT_MAX);   // "out of range" at create
  const Settings neg = parse({{"REACH_DEVICE", "-1"}});
  CHECK(neg.device_index == -1);
  CHECK(ignored_line(neg, "REACH_DEVICE").find("'-1' ignored") != std::string::npos);

  // Validation and the pipeline log: on unless unset, empty or "0", as before.
  for (const char* v : {"1", "yes"}) CHECK(parse({{"REACH_VALIDATION", v}}).validation);
  for (const char* v : {"0", ""}) CHECK_FALSE(parse({{"REACH_VALIDATION", v}}).validation);
  CHECK(parse({{"REACH_PIPELINE_LOG", "1"}}).pipeline_log);
  CHECK_FALSE(parse({{"REACH_PIPELINE_LOG", "0"}}).pipeline_log);
}

TEST_CASE("settings_from: REACH_COOPMAT, REACH_COOPMAT_XSPLIT, REACH_MATVEC_XSHARED") {
  CHECK(parse({{"REACH_COOPMAT", "0"}}).kernels.coopmat == CoopmatUse::off);
  CHECK(parse({{"REACH_COOPMAT", "1"}}).kernels.coopmat == CoopmatUse::all);
  CHECK(parse({{"REACH_COOPMAT", "quant"}}).kernels.coopmat == CoopmatUse::quant);
  const Settings bad = parse({{"REACH_COOPMAT", "yes"}, {"REACH_COOPMAT_XSPLIT", "no"}});
  CHECK(bad.kernels.coopmat == CoopmatUse::device);
  CHECK(ignored_line(bad, "REACH_COOPMAT") == "REACH_COOPMAT='yes' ignored: expected 0, 1 or quant");
  CHECK(bad.kernels.coopmat_xsplit);
  CHECK(ignored_line(bad, "REACH_COOPMAT_XSPLIT") == "REACH_COOPMAT_XSPLIT='no' ignored: expected 0 or 1");
  CHECK_FALSE(parse({{"REACH_COOPMAT_XSPLIT", "0"}}).kernels.coopmat_xsplit);
  CHECK(parse({{"REACH_COOPMAT_XSPLIT", "1"}}).kernels.coopmat_xsplit);
  CHECK(parse({{"REACH_MATVEC_XSHARED", "0"}}).kernels.matvec_xshared == std::optional<bool>(false));
  CHECK(parse({{"REACH_MATVEC_XSHARED", "1"}}).kernels.matvec_xshared == std::optional<bool>(true));
}

TEST_CASE("settings_from: the kernel shapes take whole numbers from 1 to 4096, and name the variable otherwise") {
  struct Shape {
    const char* var;
    uint32_t KernelSettings::*field;
  };
  const Shape shapes[] = {{"REACH_MATVEC_WG", &KernelSettings::matvec_wg},
                          {"REACH_MATVEC_ROWS", &KernelSettings::matvec_rows},
                          {"REACH_GEMM_TILE", &KernelSettings::gemm_tile},
                          {"REACH_GEMM_TM", &KernelSettings::gemm_tm},
                          {"REACH_GEMM_TN", &KernelSettings::gemm_tn},
                          {"REACH_GEMM_BK", &KernelSettings::gemm_bk}};
  for (const Shape& sh : shapes) {
    CAPTURE(sh.var);
    CHECK(parse({{sh.var, "128"}}).kernels.*sh.field == 128);
    CHECK(parse({{sh.var, "4096"}}).kernels.*sh.field == 4096);
    for (const char* v : {"abc", "0", "4097", "12x", "-8", "1.5"}) {
      CAPTURE(v);
      const Settings s = parse({{sh.var, v}});
      CHECK(s.kernels.*sh.field == 0);
      CHECK(ignored_line(s, sh.var) ==
            std::string(sh.var) + "='" + v + "' ignored: not a whole number from 1 to 4096");
    }
  }
}

TEST_CASE("a library's Device and Kernels ignore REACH_* in the environment unless settings ask for them") {
  // Variables that would change or break a device: an absent device, other shapes, no cooperative matrices.
  const std::string cache = (test::temp_dir("settings-cache") / "pipelines").string();
  ScopedEnv env({{"REACH_DEVICE", "no-such-gpu-xyz"}, {"REACH_MATVEC_ROWS", "3"}, {"REACH_COOPMAT", "0"},
                 {"REACH_TUNING_FILE", "/nonexistent/tuning.json"}, {"REACH_CACHE_DIR", cache}});
  {
    auto dev = Device::create(test_options());   // REACH_DEVICE is not read: the best device
    CHECK(dev->settings().device_name.empty());
    CHECK(dev->settings().tuning_file.empty());
    CHECK(dev->pipelines().cache_file().empty());   // no folder asked: no disk cache
    const KernelConfig plain = KernelConfig::from(dev->caps());
    Kernels k(*dev);
    CHECK(k.config().matvec_rows == plain.matvec_rows);
    CHECK(k.config().matvec_rows != 3);
    CHECK(k.config().coopmat_why.find("REACH_COOPMAT=0") == std::string::npos);
  }
  // An edge that reads the environment hands it over: REACH_DEVICE now picks (and names what it missed).
  DeviceOptions opt = test_options();
  opt.settings = settings_from(std::getenv);
  CHECK_HAS(test::error_of([&] { Device::create(opt); }, ErrorCode::invalid_argument), "no-such-gpu-xyz");
  // An explicit choice overrides it, as --device does; the rest of the settings reach the kernels.
  opt.name = "";
  opt.index = 0;
  auto dev = Device::create(opt);
  CHECK(dev->settings().tuning_file == "/nonexistent/tuning.json");
  CHECK(dev->pipelines().cache_file().rfind(cache + "/", 0) == 0);
  Kernels k(*dev);
  CHECK(k.config().matvec_rows == 3);
  CHECK_FALSE(k.config().coopmat.valid());
  CHECK(k.config().coopmat_why.find("REACH_COOPMAT=0") != std::string::npos);
}

TEST_CASE("settings a program builds itself reach the kernels without any environment") {
  DeviceOptions opt = test_options();
  opt.settings.kernels.matvec_rows = 5;
  opt.settings.kernels.coopmat = CoopmatUse::off;
  auto dev = Device::create(opt);
  Kernels k(*dev);
  CHECK(k.config().matvec_rows == 5);
  CHECK_FALSE(k.config().coopmat.valid());
  // What KernelConfig::from does with the same settings and no device.
  CHECK(KernelConfig::from(dev->caps(), opt.settings.kernels).matvec_rows == 5);
}

namespace {

struct Logged {
  std::vector<std::string> lines;
  static void callback(void* user, int level, const char* message) {
    if (level >= REACH_LOG_WARN) static_cast<Logged*>(user)->lines.emplace_back(message);
  }
  bool has(const std::string& needle) const {
    for (const std::string& l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
};

}  // namespace

TEST_CASE("C API: use_environment is the opt-in; the default reads no variable") {
  // use_environment took reserved[0], device_profile the words after it: the struct's size and the
  // other fields' offsets are what they were.
  CHECK(offsetof(reach_device_params, reserved0) == offsetof(reach_device_params, use_environment) + 4);
  CHECK(offsetof(reach_device_params, device_profile) % alignof(const char*) == 0);
  CHECK(offsetof(reach_device_params, reserved) == offsetof(reach_device_params, device_profile) + sizeof(const char*));
  CHECK(sizeof(reach_device_params) ==
        (offsetof(reach_device_params, use_environment) + 16 * 4 + alignof(reach_device_params) - 1) /
            alignof(reach_device_params) * alignof(reach_device_params));
  CHECK(offsetof(reach_adopt_params, reserved) == offsetof(reach_adopt_params, use_environment) + 4);
  CHECK(reach_device_default_params().use_environment == 0);
  CHECK(reach_adopt_default_params().use_environment == 0);

  ScopedEnv env(Env{{"REACH_DEVICE", "no-such-gpu-xyz"}});
  reach_device* dev = nullptr;
  reach_device_params dp = reach_device_default_params();
  REQUIRE(reach_device_create(&dp, &dev) == REACH_OK);   // REACH_DEVICE not read
  REQUIRE(reach_device_free(dev) == REACH_OK);
  REQUIRE(reach_device_create(nullptr, &dev) == REACH_OK);
  REQUIRE(reach_device_free(dev) == REACH_OK);
  dev = nullptr;
  dp.use_environment = 1;
  CHECK(reach_device_create(&dp, &dev) == REACH_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(reach_last_error()).find("no-such-gpu-xyz") != std::string::npos);
  CHECK(dev == nullptr);
  // A field the host sets still wins over the environment.
  dp.index = 0;
  REQUIRE(reach_device_create(&dp, &dev) == REACH_OK);
  REQUIRE(reach_device_free(dev) == REACH_OK);
}

TEST_CASE("C API: device_profile applies a profile; a malformed one fails creation naming the key") {
  reach_device_params dp = reach_device_default_params();
  CHECK(dp.device_profile == nullptr);
  dp.device_profile = "tests/data/device-profiles/VP_ANDROID_15_minimums.json";
  reach_device* dev = nullptr;
  REQUIRE(reach_device_create(&dp, &dev) == REACH_OK);
  REQUIRE(reach_device_free(dev) == REACH_OK);
  dev = nullptr;
  dp.device_profile = "tests/data/device-profiles/README.md";   // not JSON
  CHECK(reach_device_create(&dp, &dev) == REACH_ERROR_FORMAT);
  CHECK(std::string(reach_last_error()).find("README.md: not JSON") != std::string::npos);
  CHECK(dev == nullptr);
  // With use_environment, REACH_DEVICE_PROFILE is read; the field, when set, wins.
  ScopedEnv env(Env{{"REACH_DEVICE_PROFILE", "tests/data/device-profiles/no-such.json"}});
  dp.use_environment = 1;
  dp.device_profile = nullptr;
  CHECK(reach_device_create(&dp, &dev) == REACH_ERROR_IO);
  CHECK(std::string(reach_last_error()).find("no-such.json") != std::string::npos);
  dp.device_profile = "tests/data/device-profiles/VP_KHR_roadmap.json";
  REQUIRE(reach_device_create(&dp, &dev) == REACH_OK);
  REQUIRE(reach_device_free(dev) == REACH_OK);
}

TEST_CASE("C API: with use_environment a value reach does not take is logged with the variable and the reason") {
  ScopedEnv env(Env{{"REACH_MATVEC_WG", "abc"}});
  Logged log;
  reach_set_log_callback(&Logged::callback, &log);
  reach_device_params dp = reach_device_default_params();
  reach_device* dev = nullptr;
  REQUIRE(reach_device_create(&dp, &dev) == REACH_OK);
  REQUIRE(reach_device_free(dev) == REACH_OK);
  CHECK_FALSE(log.has("REACH_MATVEC_WG"));   // not read at all
  dp.use_environment = 1;
  REQUIRE(reach_device_create(&dp, &dev) == REACH_OK);
  REQUIRE(reach_device_free(dev) == REACH_OK);
  reach_set_log_callback(nullptr, nullptr);
  CHECK(log.has("REACH_MATVEC_WG='abc' ignored: not a whole number from 1 to 4096"));
}

TEST_CASE("settings_from: REACH_FAULT takes POINT:N:RESULT whole, else is ignored with the reason") {
  Settings s = parse({{"REACH_FAULT", "submit:7:device_lost"}});
  CHECK(s.fault.point == "submit");
  CHECK(s.fault.nth == 7);
  CHECK(s.fault.result == "device_lost");
  CHECK(s.ignored.empty());
  s = parse({{"REACH_FAULT", "alloc:1:out_of_device_memory"}});
  CHECK(s.fault.point == "alloc");
  CHECK(s.fault.result == "out_of_device_memory");
  for (const char* bad : {"submit", "submit:0:device_lost", "submit:x:device_lost", "flush:3:device_lost",
                          "wait:3:lost", "wait:3", "wait:-1:device_lost"}) {
    CAPTURE(bad);
    s = parse({{"REACH_FAULT", bad}});
    CHECK(s.fault.point.empty());
    REQUIRE(s.ignored.size() == 1);
    CHECK(s.ignored[0].find("REACH_FAULT") != std::string::npos);
  }
}
