#pragma once
// Typed errors for every failure in reach.  Nothing in the library calls
// exit() or abort(): a failure becomes a reach::Error whose message names the
// call, file, tensor, key or limit at fault and says what the user can do.
#include <stdexcept>
#include <string>

namespace reach {

enum class ErrorCode {
  vulkan = 1,         // a Vulkan call failed
  out_of_memory,      // host or device allocation failed
  invalid_argument,   // the caller passed something unusable
  io,                 // a file could not be opened / read / mapped
  format,             // a file's content is malformed (safetensors, JSON, ...)
  unsupported,        // valid input that reach does not handle (yet)
  context_overflow,   // more tokens than the KV cache holds
  cancelled,          // a callback asked to stop
  internal,           // a bug in reach
  device_lost,        // the GPU was lost (driver reset, timeout): the device and all on it are unusable
  kv_pool_full,       // a shared KV pool has no block free now: retry when another sequence ends or rewinds
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace reach
