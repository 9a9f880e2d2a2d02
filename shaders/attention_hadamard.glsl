// The Walsh-Hadamard rotation of the KV cache's q4_0 blocks (HADK / HADV;
// base/kv_type.hpp, kv_hadamard): each block of 32 values x is stored as the
// q4_0 block of H·x, H[i][j] = (-1)^popcount(i & j) / sqrt(32).  A block whose
// largest value stands far above the rest (an outlier channel) sets a scale
// that rounds every other value of the block to 0 or ±d; H spreads the outlier
// over the block first.  H is orthonormal and its own inverse, so nothing
// needs to turn the values back one by one:
//   keys:   q·k = (H·q)·(H·k): the kernels rotate each query's blocks instead;
//   values: Σ p·v = H·Σ p·(H·v): they rotate the output's blocks back.
// Only where a kernel scores the stored key as it is (no rotary turn of a raw
// key inside the kernel, which H does not commute with).
//
// The butterfly order here is the order the CPU reference of the tests
// follows (tests/support/kv_quant_reference.cpp), so both round the same f32s.

#ifndef ATTN_HADAMARD
#define ATTN_HADAMARD

// a, c <- a + c, a - c.
void hadamard_pair(inout vec4 a, inout vec4 c) {
  const vec4 t = a;
  a = t + c;
  c = t - c;
}

// In place, the block of 32 values b[0..7] (value 4u + j is b[u][j]).  Every
// index is a constant: a dynamically indexed array would leave registers for
// memory in the kernels' key loops (llvmpipe does not unroll a loop whose
// counter doubles).
void hadamard32(inout vec4 b[8]) {
  [[unroll]] for (uint u = 0u; u < 8u; ++u) {
    const vec4 x = b[u];
    const vec4 y = vec4(x.x + x.y, x.x - x.y, x.z + x.w, x.z - x.w);          // bit 0
    b[u] = vec4(y.x + y.z, y.y + y.w, y.x - y.z, y.y - y.w);                  // bit 1
  }
  hadamard_pair(b[0], b[1]);   // bit 2
  hadamard_pair(b[2], b[3]);
  hadamard_pair(b[4], b[5]);
  hadamard_pair(b[6], b[7]);
  hadamard_pair(b[0], b[2]);   // bit 3
  hadamard_pair(b[1], b[3]);
  hadamard_pair(b[4], b[6]);
  hadamard_pair(b[5], b[7]);
  hadamard_pair(b[0], b[4]);   // bit 4
  hadamard_pair(b[1], b[5]);
  hadamard_pair(b[2], b[6]);
  hadamard_pair(b[3], b[7]);
  [[unroll]] for (uint u = 0u; u < 8u; ++u) b[u] *= 0.17677669529663687;   // 1 / sqrt(32)
}

// In place, every block of the vec4 array x, whose n4 vec4s (a multiple of 8) hold
// one row or several rows one after another.
#define HADAMARD_ROW(x, n4)                                                      \
  {                                                                              \
    [[unroll]] for (uint b_ = 0u; b_ < (n4) / 8u; ++b_) {                        \
      vec4 blk_[8];                                                              \
      [[unroll]] for (uint u_ = 0u; u_ < 8u; ++u_) blk_[u_] = x[b_ * 8u + u_];   \
      hadamard32(blk_);                                                          \
      [[unroll]] for (uint u_ = 0u; u_ < 8u; ++u_) x[b_ * 8u + u_] = blk_[u_];   \
    }                                                                            \
  }
#endif
