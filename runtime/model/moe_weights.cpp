// The experts of a sparse layer: the router, then gate / up / down of every expert as a matrix of its own,
// read from GGUF's 3-D ffn_*_exps tensors, transformers 4's per-expert tensors or transformers 5's fused 3-D
// gate_up_proj / down_proj.  Each expert is a view of its rows (contiguous in every layout), uploaded as any
// matrix (quantized blocks kept, float types converted as the loader does for dense weights).
#include "base/error.hpp"
#include "runtime/model/model_loader.hpp"

namespace reach {

std::vector<Mat> ModelLoader::experts_of(const SourceTensor& t, int64_t n, int64_t rows_total, int64_t row0,
                                         int64_t rows, int64_t cols) {
  const uint64_t row_bytes = t.nbytes / uint64_t(n * rows_total);
  std::vector<Mat> out;
  for (int64_t e = 0; e < n; ++e) {
    SourceTensor part = t;
    part.name = t.name + " (expert " + std::to_string(e) + ")";
    part.shape = {rows, cols};
    part.data = t.data + (uint64_t(e * rows_total) + uint64_t(row0)) * row_bytes;
    part.nbytes = uint64_t(rows) * row_bytes;
    out.push_back(matrix_from(part, rows, cols, 0));
  }
  return out;
}

void ModelLoader::moe_layer(LayerWeights& lw, int64_t i, const std::string& why_in) {
  const ModelConfig& c = m_.config_;
  const int64_t H = c.hidden_size, E = c.n_experts, F = c.expert_intermediate_size;
  const std::string why = why_in + ", " + std::to_string(E) + " experts of ffn " + std::to_string(F);
  lw.router = matrix(Role::router, i, E, H, why);
  lw.expert_gate.clear(), lw.expert_up.clear(), lw.expert_down.clear();
  const std::string per_expert = src_.expert_name(Role::expert_down, i, 0);
  if (!per_expert.empty() && src_.has(per_expert)) {   // transformers 4: a tensor per expert
    for (int64_t e = 0; e < E; ++e) {
      auto one = [&](Role r, int64_t rows, int64_t cols) {
        return matrix_from(src_.get(src_.expert_name(r, i, e), {rows, cols}, why), rows, cols, 0);
      };
      lw.expert_gate.push_back(one(Role::expert_gate, F, H));
      lw.expert_up.push_back(one(Role::expert_up, F, H));
      lw.expert_down.push_back(one(Role::expert_down, H, F));
    }
    return;
  }
  const std::string fused = src_.name(Role::expert_gate_up, i);
  if (!fused.empty() && src_.has(fused)) {   // transformers 5: gate rows then up rows, per expert
    const SourceTensor gu = src_.get(fused, {E, 2 * F, H}, why);
    lw.expert_gate = experts_of(gu, E, 2 * F, 0, F, H);
    lw.expert_up = experts_of(gu, E, 2 * F, F, F, H);
  } else if (!src_.name(Role::expert_gate, i).empty()) {   // GGUF
    lw.expert_gate = experts_of(src_.get(src_.name(Role::expert_gate, i), {E, F, H}, why), E, F, 0, F, H);
    lw.expert_up = experts_of(src_.get(src_.name(Role::expert_up, i), {E, F, H}, why), E, F, 0, F, H);
  } else {
    throw Error(ErrorCode::format, "the experts of layer " + std::to_string(i) + " are missing from " +
                                       src_.where() + ": neither " + per_expert + " (one tensor per expert) nor " +
                                       fused + " (all experts in one) is there (" + why + ")");
  }
  lw.expert_down = experts_of(src_.get(src_.name(Role::expert_down, i), {E, H, F}, why), E, H, 0, H, F);
}

}  // namespace reach
