// The experts of a sparse layer: the router, then gate / up / down of every expert, read from GGUF's 3-D
// ffn_*_exps tensors, transformers 4's per-expert tensors, transformers 5's fused 3-D gate_up_proj /
// down_proj, or gpt-oss's transposed and interleaved ones (with biases).  The experts of one projection are
// stacked in one buffer at a fixed stride (stack_experts): the decode kernel reads whichever expert the router
// chose from one binding; each expert stays a Mat of its own for the prefill kernels.  Quantized blocks are
// kept, float types converted as the loader does for dense weights.
#include <cstring>

#include "base/error.hpp"
#include "kernels/quant_layout.hpp"
#include "runtime/model/expert_layout.hpp"
#include "runtime/model/model_loader.hpp"

namespace reach {

std::vector<SourceTensor> ModelLoader::experts_of(const SourceTensor& t, int64_t n, int64_t rows_total, int64_t row0,
                                                  int64_t rows, int64_t cols) {
  const uint64_t row_bytes = t.nbytes / uint64_t(n * rows_total);
  std::vector<SourceTensor> out;
  for (int64_t e = 0; e < n; ++e) {
    SourceTensor part = t;
    part.name = t.name + " (expert " + std::to_string(e) + ")";
    part.shape = {rows, cols};
    part.data = t.data + (uint64_t(e * rows_total) + uint64_t(row0)) * row_bytes;
    part.nbytes = uint64_t(rows) * row_bytes;
    out.push_back(part);
  }
  return out;
}

std::vector<Mat> ModelLoader::stack_experts(const std::vector<SourceTensor>& parts, int64_t rows, int64_t cols) {
  std::vector<WType> types;
  for (const SourceTensor& p : parts) types.push_back(target_type(p, cols));
  for (size_t e = 1; e < parts.size(); ++e)
    if (types[e] != types[0] || parts[e].type != parts[0].type)
      throw Error(ErrorCode::format, "tensor " + parts[e].name + " in " + parts[e].file.string() + " is " +
                                         wtype_name(parts[e].type) + " where expert 0 is " + wtype_name(parts[0].type) +
                                         ": reach needs every expert of a projection in one type");
  const WType wt = types[0];
  const uint64_t mbytes = wtype_is_quant(wt) ? quant_device_bytes(wt, uint32_t(rows), uint32_t(cols))
                                             : uint64_t(rows) * uint64_t(cols) * wtype_size(wt);
  // 256: every device's binding and texel offset alignment, so any group of experts binds at its first.
  const uint64_t stride = (mbytes + 255) / 256 * 256, n = parts.size();
  plan(stride * n);
  stack_padding_ += (stride - mbytes) * n;
  matrix_bytes_[wt] += mbytes * n;
  if (dry_) return std::vector<Mat>(n);
  std::string label = parts[0].name;
  if (const auto at = label.rfind(" (expert "); at != std::string::npos) label.resize(at);
  m_.storage_.push_back(m_.allocator_.allocate(Arena::weights, stride * n, label + " (" + std::to_string(n) +
                                                                                " experts)"));
  const Buffer& buf = m_.storage_.back();
  std::vector<Mat> out;
  for (uint64_t e = 0; e < n; ++e) {
    const SourceTensor& t = parts[e];
    if (wtype_is_quant(t.type)) upload_quant(t.data, wt, uint32_t(rows), uint32_t(cols), buf, t.nbytes, e * stride);
    else if (wtype_is_quant(wt)) upload_quantized(t.data, t.type, uint32_t(rows), uint32_t(cols), buf, wt, e * stride);
    else upload_float(t.data, t.type, uint64_t(rows) * uint64_t(cols), buf, wt, e * stride);
    out.push_back(Mat{&buf, e * stride, wt, uint32_t(rows), uint32_t(cols)});
  }
  return out;
}

void ModelLoader::moe_layer(LayerWeights& lw, int64_t i, const std::string& why_in) {
  const ModelConfig& c = m_.config_;
  const int64_t H = c.hidden_size, E = c.n_experts, F = c.expert_intermediate_size;
  const std::string why = why_in + ", " + std::to_string(E) + " experts of ffn " + std::to_string(F);
  if (c.arch == ModelArch::gpt_oss) return gpt_oss_moe_layer(lw, i, why);
  lw.router = matrix(Role::router, i, E, H, why);
  lw.expert_gate.clear(), lw.expert_up.clear(), lw.expert_down.clear();
  const std::string per_expert = src_.expert_name(Role::expert_down, i, 0);
  if (!per_expert.empty() && src_.has(per_expert)) {   // transformers 4: a tensor per expert
    std::vector<SourceTensor> gate, up, down;
    for (int64_t e = 0; e < E; ++e) {
      gate.push_back(src_.get(src_.expert_name(Role::expert_gate, i, e), {F, H}, why));
      up.push_back(src_.get(src_.expert_name(Role::expert_up, i, e), {F, H}, why));
      down.push_back(src_.get(src_.expert_name(Role::expert_down, i, e), {H, F}, why));
    }
    lw.expert_gate = stack_experts(gate, F, H);
    lw.expert_up = stack_experts(up, F, H);
    lw.expert_down = stack_experts(down, H, F);
    return;
  }
  const std::string fused = src_.name(Role::expert_gate_up, i);
  if (!fused.empty() && src_.has(fused)) {   // transformers 5: gate rows then up rows, per expert
    const SourceTensor gu = src_.get(fused, {E, 2 * F, H}, why);
    lw.expert_gate = stack_experts(experts_of(gu, E, 2 * F, 0, F, H), F, H);
    lw.expert_up = stack_experts(experts_of(gu, E, 2 * F, F, F, H), F, H);
  } else if (!src_.name(Role::expert_gate, i).empty()) {   // GGUF
    lw.expert_gate = stack_experts(experts_of(src_.get(src_.name(Role::expert_gate, i), {E, F, H}, why), E, F, 0, F, H), F, H);
    lw.expert_up = stack_experts(experts_of(src_.get(src_.name(Role::expert_up, i), {E, F, H}, why), E, F, 0, F, H), F, H);
  } else {
    throw Error(ErrorCode::format, "the experts of layer " + std::to_string(i) + " are missing from " +
                                       src_.where() + ": neither " + per_expert + " (one tensor per expert) nor " +
                                       fused + " (all experts in one) is there (" + why + ")");
  }
  lw.expert_down =
      stack_experts(experts_of(src_.get(src_.name(Role::expert_down, i), {E, H, F}, why), E, H, 0, H, F), H, F);
}

namespace {

// `name` with its last ".weight" (GGUF) replaced by ".bias", or `suffix` appended (transformers' "_bias").
std::string bias_name(const std::string& name, const char* suffix) {
  const std::string w = ".weight";
  if (name.size() > w.size() && name.compare(name.size() - w.size(), w.size(), w) == 0)
    return name.substr(0, name.size() - w.size()) + ".bias";
  return name + suffix;
}

SourceTensor view(const SourceTensor& t, const std::string& name, const std::vector<std::byte>& bytes,
                  std::vector<int64_t> shape) {
  return SourceTensor{name, t.type, std::move(shape), bytes.data(), bytes.size(), t.file};
}

}  // namespace

// gpt-oss: router logits + bias; each expert's gate / up (+ bias) under the clamped SwiGLU, down (+ bias).
// transformers keeps gate_up_proj [E, H, 2F] (x @ W, gate and up interleaved along the last axis) and
// down_proj [E, F, H]; llama.cpp's GGUF the usual ffn_*_exps [E, F, H] / [E, H, F] with .bias tensors.
void ModelLoader::gpt_oss_moe_layer(LayerWeights& lw, int64_t i, const std::string& why) {
  const ModelConfig& c = m_.config_;
  const int64_t H = c.hidden_size, E = c.n_experts, F = c.expert_intermediate_size;
  lw.expert_gate.clear(), lw.expert_up.clear(), lw.expert_down.clear();
  const std::string down_name = src_.name(Role::expert_down, i);
  if (!src_.name(Role::expert_gate, i).empty()) {   // GGUF
    const std::string router = src_.name(Role::router, i), gate = src_.name(Role::expert_gate, i),
                      up = src_.name(Role::expert_up, i);
    lw.router = matrix(Role::router, i, E, H, why);
    lw.router_bias = floats_f32(src_.get(bias_name(router, ""), {E}, why), uint64_t(E));
    lw.expert_gate = stack_experts(experts_of(src_.get(gate, {E, F, H}, why), E, F, 0, F, H), F, H);
    lw.expert_up = stack_experts(experts_of(src_.get(up, {E, F, H}, why), E, F, 0, F, H), F, H);
    lw.expert_down = stack_experts(experts_of(src_.get(down_name, {E, H, F}, why), E, H, 0, H, F), H, F);
    lw.expert_gate_bias = floats_f32(src_.get(bias_name(gate, ""), {E, F}, why), uint64_t(E * F));
    lw.expert_up_bias = floats_f32(src_.get(bias_name(up, ""), {E, F}, why), uint64_t(E * F));
    lw.expert_down_bias = floats_f32(src_.get(bias_name(down_name, ""), {E, H}, why), uint64_t(E * H));
    return;
  }
  // transformers: "<layer>.mlp.experts.down_proj" -> "<layer>.mlp."
  const std::string mlp = down_name.substr(0, down_name.size() - std::string("experts.down_proj").size());
  const SourceTensor rw = src_.get(mlp + "router.weight", {E, H}, why);
  lw.router = matrix_from(rw, E, H, 0);
  lw.router_bias = floats_f32(src_.get(mlp + "router.bias", {E}, why), uint64_t(E));
  const std::string gu_name = mlp + "experts.gate_up_proj";
  if (!src_.has(gu_name) && src_.has(gu_name + "_blocks")) {
    // OpenAI's MXFP4 checkpoint: [E, out, in / 32, 16] codes and [E, out, in / 32] scales, gate / up rows
    // interleaved; kept MXFP4 on the device (ggml's block layout).
    if (H % 32 || F % 32)
      throw Error(ErrorCode::format, "tensor " + gu_name + "_blocks in " + src_.where() + ": MXFP4 experts need "
                                         "hidden (" + std::to_string(H) + ") and expert ffn (" + std::to_string(F) +
                                         ") multiples of 32 (" + why + ")");
    const SourceTensor gq = src_.get_u8(gu_name + "_blocks", {E, 2 * F, H / 32, 16}, why),
                       gs = src_.get_u8(gu_name + "_scales", {E, 2 * F, H / 32}, why),
                       dq = src_.get_u8(down_name + "_blocks", {E, H, F / 32, 16}, why),
                       ds = src_.get_u8(down_name + "_scales", {E, H, F / 32}, why);
    auto u8 = [](const SourceTensor& t) { return reinterpret_cast<const uint8_t*>(t.data); };
    const std::vector<std::byte> g = mxfp4_experts_from_openai(u8(gq), u8(gs), E, 2 * F, H, 0, 2),
                                 u = mxfp4_experts_from_openai(u8(gq), u8(gs), E, 2 * F, H, 1, 2),
                                 d = mxfp4_experts_from_openai(u8(dq), u8(ds), E, H, F, 0, 1);
    auto blocks = [](const SourceTensor& t, const std::string& name, const std::vector<std::byte>& b) {
      return SourceTensor{name, WType::mxfp4, {}, b.data(), b.size(), t.file};
    };
    lw.expert_gate = stack_experts(experts_of(blocks(gq, gu_name + " (gate)", g), E, F, 0, F, H), F, H);
    lw.expert_up = stack_experts(experts_of(blocks(gq, gu_name + " (up)", u), E, F, 0, F, H), F, H);
    lw.expert_down = stack_experts(experts_of(blocks(dq, down_name, d), E, H, 0, H, F), H, F);
    return gpt_oss_biases(lw, gu_name, down_name, why);
  }
  const SourceTensor gu = src_.get(gu_name, {E, H, 2 * F}, why);
  const SourceTensor dn = src_.get(down_name, {E, F, H}, why);
  if (!wtype_is_quant(gu.type) && !wtype_is_quant(dn.type)) {
    // x @ W with W [H, 2F]: the kernels' [rows = out, cols = in] is its transpose; gate columns are even.
    const uint64_t es = wtype_size(gu.type), ds = wtype_size(dn.type);
    const std::vector<std::byte> g = experts_transposed(gu.data, es, E, H, 2 * F, 0, 2),
                                 u = experts_transposed(gu.data, es, E, H, 2 * F, 1, 2),
                                 d = experts_transposed(dn.data, ds, E, F, H, 0, 1);
    lw.expert_gate = stack_experts(experts_of(view(gu, gu_name + " (gate)", g, {E, F, H}), E, F, 0, F, H), F, H);
    lw.expert_up = stack_experts(experts_of(view(gu, gu_name + " (up)", u, {E, F, H}), E, F, 0, F, H), F, H);
    lw.expert_down = stack_experts(experts_of(view(dn, down_name, d, {E, H, F}), E, H, 0, H, F), H, F);
  } else {
    throw Error(ErrorCode::unsupported, "tensor " + gu_name + " in " + src_.where() + " is " + wtype_name(gu.type) +
                                            "; gpt-oss's experts are read as F32, F16 or BF16 here");
  }
  gpt_oss_biases(lw, gu_name, down_name, why);
}

// gate_up_proj_bias [E, 2F] (gate / up interleaved) and down_proj_bias [E, H].
void ModelLoader::gpt_oss_biases(LayerWeights& lw, const std::string& gu_name, const std::string& down_name,
                                 const std::string& why) {
  const ModelConfig& c = m_.config_;
  const int64_t H = c.hidden_size, E = c.n_experts, F = c.expert_intermediate_size;
  const SourceTensor gub = src_.get(gu_name + "_bias", {E, 2 * F}, why);
  if (!wtype_is_quant(gub.type) && gub.nbytes != uint64_t(E * 2 * F) * wtype_size(gub.type))
    throw Error(ErrorCode::format, "tensor " + gub.name + " in " + gub.file.string() + " has " +
                                       std::to_string(gub.nbytes) + " bytes for [" + std::to_string(E) + ", " +
                                       std::to_string(2 * F) + "] (" + why + ")");
  if (wtype_is_quant(gub.type)) floats_f32(gub, uint64_t(E * 2 * F));   // refused there, naming the tensor
  const uint64_t bs = wtype_size(gub.type);
  const std::vector<std::byte> gb = columns_every(gub.data, bs, E, 2 * F, 0, 2), ub = columns_every(gub.data, bs, E, 2 * F, 1, 2);
  lw.expert_gate_bias = floats_f32(view(gub, gub.name + " (gate)", gb, {E, F}), uint64_t(E * F));
  lw.expert_up_bias = floats_f32(view(gub, gub.name + " (up)", ub, {E, F}), uint64_t(E * F));
  lw.expert_down_bias = floats_f32(src_.get(down_name + "_bias", {E, H}, why), uint64_t(E * H));
}

}  // namespace reach
