#include "runtime/quantize.hpp"

#include <string>

#include "engine/error.hpp"

namespace reach {

bool quantize_supported(WType) { return false; }

void quantize_matrix(WType t, const float*, uint32_t, uint32_t, void*, unsigned) {
  throw Error(ErrorCode::unsupported, std::string("quantizing to ") + wtype_name(t) + " is not available yet");
}

}  // namespace reach
