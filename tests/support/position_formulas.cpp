#include "tests/support/position_formulas.hpp"

#include <algorithm>
#include <cmath>

namespace reach::test {

double logn_factor(int64_t pos, double train_len) {
  if (!(train_len > 1)) return 1.0;
  return std::max(1.0, std::log(static_cast<double>(pos) + 1.0) / std::log(train_len));
}

}  // namespace reach::test
