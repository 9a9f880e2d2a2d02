#pragma once
// The knobs the REACH_* environment variables set, as one plain struct the
// library is handed: the library never reads the environment itself.  An
// edge (the CLI, the C API when its host asks with use_environment, the test
// harness, the tools) calls settings_from(std::getenv) once and passes the
// result down: DeviceOptions::settings / AdoptedDevice::settings, which the
// Device keeps (Device::settings()) for the pipeline cache, the kernels
// (KernelConfig::from) and the sessions (the tuning file).  A program that
// builds Settings itself, or keeps the defaults, is not changed by what the
// environment holds.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace reach {

// Which prefill GEMMs use cooperative matrices (REACH_COOPMAT).
enum class CoopmatUse : uint8_t {
  device,   // unset: quantized weights on GPUs, none on a CPU device
  off,      // "0": none
  all,      // "1": every weight type, on every device
  quant,    // "quant": the block types, on any device
};

// Kernel shapes, to compare them on a device.  0 / unset: the device's
// default.  KernelConfig::from takes a value only where the kernel and the
// device accept it (a power-of-two workgroup within the device's limit, ...)
// and ignores it otherwise.
struct KernelSettings {
  uint32_t matvec_wg = 0;               // REACH_MATVEC_WG: the decode mat-vec's workgroup size
  uint32_t matvec_rows = 0;             // REACH_MATVEC_ROWS: its rows per workgroup (<= 64)
  std::optional<bool> matvec_xshared;   // REACH_MATVEC_XSHARED: X staged in shared memory ("0": not)
  uint32_t gemm_tile = 0;               // REACH_GEMM_TILE: the shared-memory GEMM's square tile
  uint32_t gemm_tm = 0, gemm_tn = 0;    // REACH_GEMM_TM / _TN: its per-invocation sub-tile
  uint32_t gemm_bk = 0;                 // REACH_GEMM_BK: its K depth
  CoopmatUse coopmat = CoopmatUse::device;   // REACH_COOPMAT
  bool coopmat_xsplit = true;           // REACH_COOPMAT_XSPLIT=0: X as one f16 in those GEMMs, not two halves
};

struct Settings {
  // The device Device::create picks when DeviceOptions names none (REACH_DEVICE: an index, else a
  // case-insensitive substring of the name).  -1 and "": the best type.
  int device_index = -1;
  std::string device_name;
  bool validation = false;          // REACH_VALIDATION: the Khronos validation layer
  // Where the pipeline cache is kept when DeviceOptions names no folder: REACH_CACHE_DIR, else
  // $XDG_CACHE_HOME/reach, else $HOME/.cache/reach.  "" or "-": no cache on disk.
  std::string pipeline_cache_dir;
  bool pipeline_log = false;        // REACH_PIPELINE_LOG: each pipeline's creation time on stderr
  KernelSettings kernels;
  // Where `reach tune` keeps its choices, which a session asked for the device's default activations
  // reads: REACH_TUNING_FILE, else $XDG_CACHE_HOME/reach/tuning.json, else
  // $HOME/.cache/reach/tuning.json, else .reach-tuning.json.  "": none (such a session runs exact).
  std::string tuning_file;
  // The Vulkan loader to open (REACH_VULKAN_LIBRARY: a file name or path), instead of the platform's
  // own (libvulkan.so.1, vulkan-1.dll, libvulkan.1.dylib then libMoltenVK.dylib).  "": those.
  std::string vulkan_library;
  // A test hook (REACH_FAULT=POINT:N:RESULT, engine/fault_injection.hpp): the Nth queue submission
  // ("submit"), fence wait ("wait") or memory allocation ("alloc") of the first device the process makes
  // fails with RESULT ("device_lost", "out_of_device_memory", "out_of_host_memory").  point "": none.
  struct Fault {
    std::string point;
    uint64_t nth = 0;
    std::string result;
  } fault;
  // Bounded submissions (runtime/session/submit_plan.hpp): the GPU time one submission of a forward pass
  // aims to stay under, in ms (REACH_SUBMIT_MS; 0: one submission per pass, unbounded), and at most this
  // many of a pass's steps (the embedding, each layer, the head) per submission (REACH_SUBMIT_LAYERS; 0: no cap).
  uint32_t submit_ms = 500;
  uint32_t submit_layers = 0;
  // A Vulkan Profiles JSON file (REACH_DEVICE_PROFILE): the device then uses only what both it and
  // that profile allow (engine/device_profile.hpp).  "": the device as it is.
  std::string device_profile;
  // One line per variable whose value was not taken, naming it, the value and why
  // ("REACH_MATVEC_WG='abc' ignored: not a whole number from 1 to 4096").  The edge reports them.
  std::vector<std::string> ignored;
};

// Looks a variable up: its value, or nullptr when unset (std::getenv fits).
using EnvLookup = std::function<const char*(const char* name)>;

// Settings from the REACH_* variables (and XDG_CACHE_HOME / HOME for the default folders) as `env`
// gives them.  Never throws on a bad value: the variable keeps its default and `ignored` says why.
Settings settings_from(const EnvLookup& env);

// The variables settings_from reads, in the order of the README's table.
const std::vector<const char*>& settings_variables();

}  // namespace reach
