#pragma once
// How an embedding model turns its per-token hidden states into one vector: the pooling (mean over the
// tokens, the first token's (CLS), or the last token's) and whether the vector is L2-normalized.
// Read from sentence-transformers' files beside config.json (modules.json lists the modules; a Pooling
// module's <path>/config.json names the mode, as pooling_mode_* booleans or, from v6 on, "pooling_mode";
// a Normalize module normalizes), or from a GGUF's <arch>.pooling_type
// (llama.cpp's 0 none, 1 mean, 2 cls, 3 last; llama.cpp normalizes its embeddings, so reach does too).
#include <cstdint>
#include <filesystem>
#include <string>

#include "runtime/formats/gguf.hpp"

namespace reach {

enum class Pooling : uint8_t { none, mean, cls, last };

struct PoolingSpec {
  Pooling pooling = Pooling::none;   // none: the model says nothing (not an embedding model)
  bool normalize = false;
};

const char* pooling_name(Pooling p);   // "none", "mean", "cls", "last"
// "mean", "cls" or "last"; anything else throws Error(invalid_argument) naming it and the choices.
Pooling pooling_from_name(const std::string& name);

// A model directory's sentence-transformers modules; no modules.json: {none, false}.  Throws format (a
// file that is not the JSON it should be) or unsupported (max / weighted-mean pooling, several modes at
// once), naming the file and the key.
PoolingSpec pooling_of_folder(const std::filesystem::path& dir);
// A GGUF's <general.architecture>.pooling_type; absent: {none, false}.  Throws unsupported for rank
// pooling or an unknown value, naming the key.
PoolingSpec pooling_of_gguf(const GgufFile& file);

}  // namespace reach
