// Soft capping (Gemma 2's attention and final logits): cap·tanh(x/cap), so
// |result| < cap.  Shared by elementwise_softcap.comp and the attention kernels.
//
// tanh(y) for |y| >= 1/8 is 1 - 2/(exp(2|y|) + 1) with the sign put back: a
// large |y| makes exp overflow to inf and gives exactly ±1, where a driver's
// tanh may form inf/inf = NaN.  Below 1/8 that form cancels (an absolute
// error of ~1e-7 on a small value), so the odd Taylor series to y^7 is used
// there: its first dropped term, 62/2835·y^9, is below 2e-9·|y|.
float softcap(float x, float cap) {
  const float y = x / cap, a = abs(y), y2 = y * y;
  const float big = sign(y) * (1.0 - 2.0 / (exp(2.0 * a) + 1.0));
  const float small = y * (1.0 + y2 * (-1.0 / 3.0 + y2 * (2.0 / 15.0 + y2 * (-17.0 / 315.0))));
  return cap * (a < 0.125 ? small : big);
}
