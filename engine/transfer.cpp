#include "engine/transfer.hpp"

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "engine/command.hpp"
#include "engine/device.hpp"

namespace reach {

Transfer::Transfer(Allocator& allocator, VkDeviceSize staging_bytes)
    : allocator_(allocator), staging_bytes_(staging_bytes) {}

Transfer::~Transfer() = default;

void Transfer::ensure_staging() {
  if (!staging_) staging_ = allocator_.allocate(Arena::staging, staging_bytes_, "staging");
  if (!cmd_) cmd_ = std::make_unique<CommandList>(allocator_.device());
}

static void check_range(const Buffer& b, VkDeviceSize off, VkDeviceSize bytes, const char* what) {
  if (off > b.size() || bytes > b.size() - off)
    throw Error(ErrorCode::internal, std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
                                         std::to_string(off) + " overruns buffer '" + b.label() + "' (" +
                                         std::to_string(b.size()) + " bytes)");
}

void Transfer::upload(const Buffer& dst, VkDeviceSize dst_offset, const void* src, VkDeviceSize bytes,
                      const std::function<void(uint64_t)>& progress) {
  check_range(dst, dst_offset, bytes, "upload");
  const auto* in = static_cast<const char*>(src);
  if (dst.mapped() && !force_staging_) {
    // Chunked so a progress bar can move during a multi-GiB upload.
    const VkDeviceSize chunk = 64ull << 20;
    for (VkDeviceSize done = 0; done < bytes;) {
      VkDeviceSize n = std::min(chunk, bytes - done);
      std::memcpy(static_cast<char*>(dst.mapped()) + dst_offset + done, in + done, n);
      done += n;
      if (progress) progress(done);
    }
    return;
  }
  ensure_staging();
  for (VkDeviceSize done = 0; done < bytes;) {
    VkDeviceSize n = std::min(staging_bytes_, bytes - done);
    std::memcpy(staging_.mapped(), in + done, n);
    cmd_->begin();
    cmd_->copy(staging_.range(0, n), dst.range(dst_offset + done, n));
    cmd_->end();
    cmd_->run();
    done += n;
    if (progress) progress(done);
  }
}

void Transfer::download(const Buffer& src, VkDeviceSize src_offset, void* dst, VkDeviceSize bytes) {
  check_range(src, src_offset, bytes, "download");
  auto* out = static_cast<char*>(dst);
  if (src.mapped() && !force_staging_) {
    std::memcpy(out, static_cast<const char*>(src.mapped()) + src_offset, bytes);
    return;
  }
  ensure_staging();
  for (VkDeviceSize done = 0; done < bytes;) {
    VkDeviceSize n = std::min(staging_bytes_, bytes - done);
    cmd_->begin();
    cmd_->copy(src.range(src_offset + done, n), staging_.range(0, n));
    cmd_->end();
    cmd_->run();
    std::memcpy(out + done, staging_.mapped(), n);
    done += n;
  }
}

}  // namespace reach
