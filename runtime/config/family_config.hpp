#pragma once
// The config.json keys particular to some families (Gemma 2 / 3, SmolLM3's NoPE layers, mixtures of
// experts), read into ModelConfig by parse_model_config.
#include <cstdint>
#include <vector>

#include "runtime/config/config_reader.hpp"
#include "runtime/config/model_config.hpp"

namespace reach::config_detail {

void parse_gemma2(const Reader& r, ModelConfig& c);
void parse_gemma3(const Reader& r, ModelConfig& c);
std::vector<bool> parse_nope_layers(const Reader& r, int64_t n_layers);
void parse_moe(const Reader& r, ModelConfig& c);
// gpt-oss's keys beyond the MoE ones: the clamped SwiGLU, alternating local layers, sinks.
void parse_gpt_oss(const Reader& r, ModelConfig& c);

}  // namespace reach::config_detail
