#pragma once
// The model config of a GGUF file: llama-architecture metadata (llama.*,
// tokenizer.ggml.bos/eos_token_id, output.weight's presence) mapped to the
// ModelConfig that config.json gives, under the same rules (sizes in range,
// heads divide, token ids inside the vocabulary, ...).  Errors name the file
// and the GGUF key: format for malformed values, unsupported for valid files
// reach does not run yet (other architectures, experts, per-frequency rope
// factors).  Used by Model::load for GGUF files.
#include "runtime/config/model_config.hpp"
#include "runtime/formats/gguf.hpp"

namespace reach {

ModelConfig model_config_from_gguf(const GgufFile& file);

}  // namespace reach
