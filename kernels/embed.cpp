// The embed family (shaders/embed.comp): the embedding gather.  The table may be larger than one binding may span
// (maxStorageBufferRange, 128 MiB on lavapipe): it is bound as row chunks from
// split_rows, one dispatch per chunk; each dispatch writes only the tokens whose
// id falls in its chunk, so the dispatches write disjoint rows of y.
// Token ids are read on the device and cannot be checked on the host: an id
// outside [0, table.rows) yields a row of zeros (written by the first chunk).
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/spec.hpp"

namespace reach {

void Kernels::embed(CommandList& cmd, const Mat& table, const BufferRange& ids, uint32_t n_tokens, const Act& y) {
  const auto& caps = device_.caps();
  if (!table.buffer || !y.buffer) throw Error(ErrorCode::internal, "embed: table or y has no buffer");
  if (table.offset + table.bytes() > table.buffer->size())
    throw Error(ErrorCode::internal, "embed: table [" + std::to_string(table.rows) + ", " + std::to_string(table.cols) +
                                         "] " + wtype_name(table.type) + " overruns its buffer");
  if (y.cols != table.cols || y.rows < n_tokens)
    throw Error(ErrorCode::internal, "embed: y [" + std::to_string(y.rows) + ", " + std::to_string(y.cols) +
                                         "] cannot hold " + std::to_string(n_tokens) + " rows of " +
                                         std::to_string(table.cols));
  if (y.offset + y.bytes() > y.buffer->size()) throw Error(ErrorCode::internal, "embed: y overruns its buffer");
  if (ids.size < uint64_t(n_tokens) * 4)
    throw Error(ErrorCode::internal, "embed: ids hold " + std::to_string(ids.size / 4) + " int32, need " +
                                         std::to_string(n_tokens));
  if (wtype_is_quant(table.type)) return embed_q(cmd, table, ids, n_tokens, y);
  if (table.type != WType::f32) require_16bit_storage(caps, std::string("embed: a ") + wtype_name(table.type) + " table");
  if (n_tokens == 0 || table.cols == 0) return;
  if (table.rows == 0) throw Error(ErrorCode::internal, "embed: empty table");
  const uint64_t align = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 1);
  if (table.offset % align)
    throw Error(ErrorCode::internal, "embed: table offset " + std::to_string(table.offset) +
                                         " is not aligned to minStorageBufferOffsetAlignment");
  const uint64_t max_range = binding_span(caps, config_.max_binding);
  const ShaderId kernel = table.type == WType::f32   ? ShaderId::embed_f32
                          : table.type == WType::f16 ? ShaderId::embed_f16
                                                     : ShaderId::embed_bf16;
  // One workgroup per token; each invocation copies cols/wg values.  llvmpipe
  // drops loop trips past 65535 per invocation (see ops_norm.cpp): widen the
  // workgroup for (unrealistically) wide rows.
  uint32_t wg = std::max(config_.reduce_wg, 1u);
  const uint32_t max_wg = std::max(std::min(caps.max_workgroup_invocations, caps.max_workgroup_size[0]), 1u);
  while (groups_for(table.cols, wg) > 60000 && wg * 2 <= max_wg) wg *= 2;
  spec::ElementwiseSpec sc;
  sc.wg = wg;
  struct Push {
    uint32_t n_tokens, cols, first_row, chunk_rows, table_rows;
  };
  using B = spec::EmbedBindings;
  const auto& p = device_.pipelines().get({kernel, B::count, sizeof(Push), sc.constants()});
  const uint64_t row_bytes = uint64_t(table.cols) * wtype_size(table.type);
  const BufferRange ids_r{ids.buffer, ids.offset, uint64_t(n_tokens) * 4};
  const BufferRange y_r = y.buffer->range(y.offset, uint64_t(n_tokens) * y.cols * 4);
  // One workgroup per token on a 2D grid (token = y * num_x + x).
  const RowGrid g = row_grid(caps, n_tokens, "embed");
  for (const RowChunk& c : split_rows(table, max_range, align)) {
    const BufferRange t = table.buffer->range(table.offset + c.first_row * row_bytes, uint64_t(c.rows) * row_bytes);
    const Push push{n_tokens, table.cols, c.first_row, c.rows, table.rows};
    cmd.dispatch(p, spec::bound<B>({{B::B_TABLE, t}, {B::B_IDS, ids_r}, {B::B_Y, y_r}}), &push, sizeof push, g.x, g.y,
                 1, "embed");
  }
}

// A quantized table (kernels/quant_layout.hpp): each plane's row-chunk range is
// bound separately (bindings 0 and 3), from an aligned start plus a unit offset.
void Kernels::embed_q(CommandList& cmd, const Mat& table, const BufferRange& ids, uint32_t n_tokens, const Act& y) const {
  const auto& caps = device_.caps();
  const uint32_t be = wtype_block_elems(table.type);
  if (table.cols % be || table.offset % 16)
    throw Error(ErrorCode::internal, std::string("embed: a ") + wtype_name(table.type) + " table needs cols (" +
                                         std::to_string(table.cols) + ") a multiple of " + std::to_string(be) +
                                         " and a 16-byte aligned offset");
  require_16bit_storage(caps, std::string("embed: a ") + wtype_name(table.type) + " table");
  if (y.offset % 4) throw Error(ErrorCode::internal, "embed: y offset must be a multiple of 4");
  if (n_tokens == 0 || table.cols == 0) return;
  if (table.rows == 0) throw Error(ErrorCode::internal, "embed: empty table");
  const uint64_t align = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 16);
  const uint64_t max_range = binding_span(caps, config_.max_binding);
  if (max_range <= 2 * align) throw Error(ErrorCode::internal, "embed: max_binding too small");
  const QuantPlanes planes = quant_planes(table.type);
  const uint64_t blocks_per_row = table.cols / be;
  const uint64_t quant_total = uint64_t(table.rows) * blocks_per_row * planes.quant_bytes;
  uint32_t wg = std::max(config_.reduce_wg, 1u);
  const uint32_t max_wg = std::max(std::min(caps.max_workgroup_invocations, caps.max_workgroup_size[0]), 1u);
  while (groups_for(table.cols / 32, wg) > 60000 && wg * 2 <= max_wg) wg *= 2;
  spec::EmbedQSpec sc;
  sc.wg = wg;
  sc.qtype = static_cast<uint32_t>(table.type);
  struct Push {
    uint32_t n_tokens, cols, first_row, chunk_rows, table_rows, q_off, m_off, y_off;
  };
  using B = spec::EmbedQBindings;
  const auto& p = device_.pipelines().get({ShaderId::embed_q, B::count, sizeof(Push), sc.constants()});
  const BufferRange ids_r{ids.buffer, ids.offset, uint64_t(n_tokens) * 4};
  const Bound yb = bind_aligned(*y.buffer, y.offset, uint64_t(n_tokens) * y.cols * 4, 4, align);
  // (Only the table is cut into chunks; y must fit one binding of the device.)
  if (yb.range.size > binding_span(caps))
    throw Error(ErrorCode::unsupported, "embed: y of " + std::to_string(yb.range.size) +
                                            " bytes exceeds maxStorageBufferRange; embed fewer tokens at a time");
  const RowGrid g = row_grid(caps, n_tokens, "embed");
  for (const RowChunk& c : split_rows(table.rows, wtype_row_bytes(table.type, table.cols), max_range - align, 1)) {
    const uint64_t b0 = uint64_t(c.first_row) * blocks_per_row, nb = uint64_t(c.rows) * blocks_per_row;
    const Bound qb = bind_aligned(*table.buffer, table.offset + b0 * planes.quant_bytes, nb * planes.quant_bytes, 16,
                                  align);
    // Meta offsets in the kernels' meta units (bytes for mxfp4), bound as whole 16-bit units.
    Bound mb = bind_aligned(*table.buffer, table.offset + quant_total + b0 * planes.meta_bytes,
                            nb * planes.meta_bytes, quant_meta_unit_bytes(table.type), align);
    mb.range.size = (mb.range.size + 1) / 2 * 2;
    const Push push{n_tokens, table.cols, c.first_row, c.rows, table.rows, qb.elem_off, mb.elem_off, yb.elem_off};
    cmd.dispatch(p,
                 spec::bound<B>(
                     {{B::B_WQUANT, qb.range}, {B::B_IDS, ids_r}, {B::B_Y, yb.range}, {B::B_WMETA, mb.range}}),
                 &push, sizeof push, g.x, g.y, 1, "embed_q");
  }
}

}  // namespace reach
