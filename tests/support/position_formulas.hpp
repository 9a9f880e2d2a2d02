#pragma once
// Position-scheme formulas the float64 references use where the engine has no
// host-side counterpart (the shaders compute them from push constants), each
// checked against the hand values of docs EXTRAPOLATION.md §9 in test_schemes.
#include <cstdint>

namespace reach::test {

// §3.6 log-n query factor max(1, ln(pos+1)/ln(train_len)); 1 when train_len <= 1.
double logn_factor(int64_t pos, double train_len);

}  // namespace reach::test
