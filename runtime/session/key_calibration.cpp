#include "runtime/session/key_calibration.hpp"

#include <algorithm>

#include "engine/device.hpp"
#include "engine/transfer.hpp"
#include "kernels/attention.hpp"

namespace reach {

namespace {

AttentionSpec shape_of(uint32_t n_kv_heads, uint32_t head_dim) {
  AttentionSpec s;
  s.n_heads = s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  return s;
}

}  // namespace

KeyCalibration::KeyCalibration(Allocator& allocator, uint32_t n_layers, uint32_t n_kv_heads, uint32_t head_dim,
                               bool refine)
    : allocator_(&allocator),
      n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      refine_(refine),
      cap_(refine ? kKeyCalibMaxRows : 0) {
  const AttentionSpec shape = shape_of(n_kv_heads, head_dim);
  layer_bytes_ = key_calib_bytes(shape);
  const uint64_t align = std::max<uint64_t>(allocator.device().caps().min_storage_buffer_offset_alignment, 16);
  stride_ = (layer_bytes_ + align - 1) / align * align;
  buffer_ = allocator.allocate(Arena::cache, stride_ * std::max<uint32_t>(n_layers, 1), "key calibration");
  const std::vector<float> identity = key_calib_identity(shape, false, cap_);
  Transfer T(allocator);
  for (uint32_t l = 0; l < n_layers; ++l) T.upload(buffer_, l * stride_, identity.data(), layer_bytes_);
}

BufferRange KeyCalibration::layer(size_t l) const {
  if (!buffer_ || l >= n_layers_) return {};
  return buffer_.range(l * stride_, layer_bytes_);
}

// The session records kv_calibrate for every prefill step of more than one row (Session::record_store_kv);
// the kernel takes the step's rows when it sets mu and s, or while under the cap.
void KeyCalibration::before_step(uint32_t rows) {
  if (!buffer_) return;
  const bool recorded = rows > 1;
  if (recorded && (open_ || seen_ < cap_)) seen_ += rows;
  if (!open_) return;
  open_ = false;
  if (recorded) {
    set_at_ = seen_;
    return;
  }
  write_flag(2);
}

void KeyCalibration::restart() {
  // Nothing would change only when no statistics came since mu and s were set and none will be taken.
  if (!buffer_ || !refine_ || open_ || (seen_ == set_at_ && seen_ >= cap_)) return;
  open_ = true;
  write_flag(0);
}

void KeyCalibration::write_flag(uint32_t flag) {
  Transfer T(*allocator_);
  for (uint32_t l = 0; l < n_layers_; ++l) T.upload(buffer_, l * stride_, &flag, 4);
}

void KeyCalibration::upload(uint32_t layer, const std::vector<float>& data) {
  Transfer T(*allocator_);
  T.upload(buffer_, layer * stride_, data.data(), std::min<uint64_t>(layer_bytes_, data.size() * 4));
}

std::vector<float> KeyCalibration::read(size_t l) const {
  if (!buffer_ || l >= n_layers_) return {};
  std::vector<float> out(size_t(layer_bytes_ / 4));
  Transfer T(*allocator_);
  T.download(buffer_, l * stride_, out.data(), layer_bytes_);
  return out;
}

}  // namespace reach
