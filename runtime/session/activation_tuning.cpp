#include "runtime/session/activation_tuning.hpp"

#include <fstream>
#include <sstream>
#include <system_error>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "base/platform/process.hpp"
#include "engine/device.hpp"
#include "runtime/formats/json_parse.hpp"
#include "runtime/model/model.hpp"

namespace reach {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kVersion = 1;

[[noreturn]] void bad(const fs::path& file, const std::string& what) {
  throw Error(ErrorCode::format, "tuning file " + platform::path_to_utf8(file) + ": " + what +
                                     " - delete it or run `reach tune -m MODEL` again");
}

QuantActivations parse_choice(const fs::path& file, const json& e, const char* phase) {
  const auto it = e.find(phase);
  if (it == e.end() || !it->is_string()) bad(file, std::string("an entry has no string '") + phase + "'");
  const std::string v = it->get<std::string>();
  if (v == "exact") return QuantActivations::exact;
  if (v == "int8") return QuantActivations::int8;
  bad(file, std::string("'") + phase + "' is \"" + v + "\", expected \"exact\" or \"int8\"");
}

double speed(const json& m, const char* phase, const char* kind) {
  const auto p = m.find(phase);
  if (p == m.end() || !p->is_object()) return 0;
  const auto v = p->find(kind);
  return v != p->end() && v->is_number() ? v->get<double>() : 0;
}

json read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return json();
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = parse_json_bounded(ss.str(), 8, 1u << 20);
  } catch (const std::exception& e) {
    bad(file, std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_object()) bad(file, "no object 'entries'");
  if (!j.contains("version") || j["version"] != kVersion)
    bad(file, "version is not " + std::to_string(kVersion));
  return j;
}

}  // namespace

const char* activations_name(QuantActivations a) {
  switch (a) {
    case QuantActivations::exact: return "exact";
    case QuantActivations::int8: return "int8";
    case QuantActivations::device: return "device";
  }
  return "?";
}

std::string tuning_key(const Model& model) {
  const Capabilities& caps = model.device().caps();
  return caps.device_name + " | " + caps.driver_name + " " + caps.driver_info + " | " + model.weight_types() +
         " | hidden " + std::to_string(model.config().hidden_size);
}

std::optional<TunedEntry> load_tuning(const fs::path& file, const std::string& key) {
  const json j = read_file(file);
  if (j.is_null()) return std::nullopt;
  const auto it = j["entries"].find(key);
  if (it == j["entries"].end()) return std::nullopt;
  if (!it->is_object()) bad(file, "the entry for '" + key + "' is not an object");
  TunedEntry e;
  e.choice.prefill = parse_choice(file, *it, "prefill");
  e.choice.decode = parse_choice(file, *it, "decode");
  if (const auto m = it->find("measured"); m != it->end() && m->is_object()) {
    e.prefill = {speed(*m, "prefill", "exact"), speed(*m, "prefill", "int8")};
    e.decode = {speed(*m, "decode", "exact"), speed(*m, "decode", "int8")};
  }
  if (const auto w = it->find("when"); w != it->end() && w->is_string()) e.when = w->get<std::string>();
  return e;
}

void save_tuning(const fs::path& file, const std::string& key, const TunedEntry& entry) {
  json j = read_file(file);
  if (j.is_null()) j = json{{"version", kVersion}, {"entries", json::object()}};
  j["entries"][key] = json{
      {"prefill", activations_name(entry.choice.prefill)},
      {"decode", activations_name(entry.choice.decode)},
      {"measured", {{"prefill", {{"exact", entry.prefill.exact}, {"int8", entry.prefill.int8}}},
                    {"decode", {{"exact", entry.decode.exact}, {"int8", entry.decode.int8}}},
                    {"unit", "tokens/s"}}},
      {"when", entry.when}};
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  fs::path tmp = file;
  tmp += ".tmp." + std::to_string(platform::process_id());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out.flush())
      throw Error(ErrorCode::io, "cannot write the tuning file " + platform::path_to_utf8(tmp) + " - is its folder writable? "
                                 "(REACH_TUNING_FILE names another place)");
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(ErrorCode::io, "cannot replace the tuning file " + platform::path_to_utf8(file) + ": " + ec.message());
  }
}

PhaseActivations resolve_activations(const Model& model, QuantActivations asked, std::string* source) {
  if (asked != QuantActivations::device) {
    if (source) *source = "asked";
    return {asked, asked};
  }
  const fs::path file = model.device().settings().tuning_file;
  if (file.empty()) {
    if (source) *source = "exact: no tuning file in the device's settings (REACH_TUNING_FILE)";
    return {};
  }
  std::optional<TunedEntry> e;
  try {
    e = load_tuning(file, tuning_key(model));
  } catch (const Error& err) {
    // A broken tuning file must not stop a model from running: exact is always right, only maybe slower.
    if (source) *source = std::string("exact: ") + err.what();
    return {};
  }
  if (!e) {
    if (source) *source = "exact: not tuned for this device and model (reach tune -m MODEL measures it)";
    return {};
  }
  PhaseActivations p = e->choice;
  // A file written for a device with integer dot products cannot ask for it on one without (a changed driver).
  if (!model.device().caps().integer_dot) p = {};
  if (source) *source = "tuned " + (e->when.empty() ? std::string() : e->when + " ") + "(" + platform::path_to_utf8(file) + ")";
  return p;
}

}  // namespace reach
