#pragma once
// Which activations (exact f32 or int8 with integer dot products) each phase of a model runs on a device, as
// `reach tune` measured them.  The int8 path's worth depends on the device, the weight types and the phase: on
// lavapipe it is slower for Q4_1 and faster for the K-quants, and a GPU may differ again; so reach does not
// guess.  A session asked for the device's default (QuantActivations::device) looks its model up here and runs
// exact where nothing was measured.
//
// The file is JSON: {"version": 1, "entries": {KEY: {"prefill": "int8"|"exact", "decode": ..., "measured": {...}}}}
// with KEY = device | driver | weight types | hidden size (tuning_key).  Sessions read the file the device's
// settings name (Settings::tuning_file: REACH_TUNING_FILE, else $XDG_CACHE_HOME/reach/tuning.json, else
// ~/.cache/reach/tuning.json where an edge read the environment; none by default).
#include <filesystem>
#include <optional>
#include <string>

#include "kernels/kernels.hpp"

namespace reach {

class Model;

struct PhaseActivations {
  QuantActivations prefill = QuantActivations::exact;
  QuantActivations decode = QuantActivations::exact;
};

// tokens/s of one phase under each choice, as reach tune measured them (0 = not measured).
struct PhaseSpeeds {
  double exact = 0, int8 = 0;
};

struct TunedEntry {
  PhaseActivations choice;
  PhaseSpeeds prefill, decode;
  std::string when;   // ISO date of the measurement
};

std::string tuning_key(const Model& model);

// The entry for `key` in `file`; nullopt when the file or the key is absent.  A file that is not the JSON above
// throws format naming the file and what is wrong (delete it or run reach tune again).
std::optional<TunedEntry> load_tuning(const std::filesystem::path& file, const std::string& key);
// Adds or replaces `key`, keeping the other entries; writes a temporary file and renames it over `file`.
void save_tuning(const std::filesystem::path& file, const std::string& key, const TunedEntry& entry);

// The activations a session runs for each phase: `asked` itself unless it is QuantActivations::device, else the
// choice for this model in the tuning file of the model's device's settings (exact where none).  `source` (optional) says where the choice came from.
PhaseActivations resolve_activations(const Model& model, QuantActivations asked, std::string* source = nullptr);

const char* activations_name(QuantActivations a);

}  // namespace reach
