#include "tests/support/linear_check.hpp"

#include <algorithm>
#include <cstring>

#include "tests/support/fixtures.hpp"

namespace reach::test {

void check_linear(const LinearCheck& c) {
  auto& g = gpu();
  const uint32_t M = c.M, N = c.N, K = c.K;
  const size_t front = c.y_off / 4, back = 5, y_total = front + size_t(M) * N + back;
  const float sentinel = -12345.0f;
  check_kernel({
      .op = c.op,
      .params = c.params,
      .seed = c.seed,
      .tol = c.tol,
      .device =
          [&] {
            std::vector<uint8_t> xbytes(c.x_off + c.x->size() * 4, 0xCD);
            std::memcpy(xbytes.data() + c.x_off, c.x->data(), c.x->size() * 4);
            std::vector<uint8_t> wbytes(c.w_off + c.w->size() + c.w_tail, 0xCD);
            std::memcpy(wbytes.data() + c.w_off, c.w->data(), c.w->size());
            Buffer bx = g.upload_bytes(xbytes.data(), xbytes.size());
            Buffer bw = g.upload_bytes(wbytes.data(), wbytes.size(), Arena::weights);
            Buffer by = g.upload_f32(std::vector<float>(y_total, sentinel));
            const Act ax{&bx, c.x_off, M, K}, ay{&by, c.y_off, M, N};
            const Mat mw{&bw, c.w_off, c.type, N, K};
            g.run([&](CommandList& cmd) { c.record(cmd, ax, mw, ay); });
            return Values::of(g.download_f32(by, y_total));
          },
      .reference =
          [&] {
            std::vector<double> y(y_total, sentinel);
            const std::vector<double> inner = c.reference();
            std::copy(inner.begin(), inner.end(), y.begin() + ptrdiff_t(front));
            return Values::of(std::move(y));
          },
      .guard_front = front,
      .guard_back = back,
      .where = [front, M, N](size_t i) {
        if (i < front || i >= front + size_t(M) * N) return str("element ", i, " of the Y buffer, outside Y");
        return str("(m,n)=(", (i - front) / N, ",", (i - front) % N, ")");
      },
  });
}

}  // namespace reach::test
