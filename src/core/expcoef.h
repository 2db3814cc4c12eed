// The constants of lc_fast_expf (the element-wise ops' exp: SwiGLU, the loss), in one place
// for the CPU's scalar and 8-lane forms (backend/cpu/ops/fastexp.h, vec8.h) and the CUDA
// kernels (backend/cuda/cuda_fastexp.cuh), so every backend evaluates the same polynomial
// and gets the same bits. exp(x) = 2^n exp(r), n = round(x log2e), r = x - n ln2 with ln2 in
// two parts (Cody-Waite, exact for |n| < 512), exp(r) on |r| <= ln2/2 by the Cephes expf
// minimax polynomial P0 r^7 + ... as a Horner chain: p = P0; p = p r + P1 .. P5;
// exp(r) = p r^2 + r + 1.
#ifndef LC_EXPCOEF_H
#define LC_EXPCOEF_H

#define LC_EXP_LO (-87.0f)               // below: 0 (true value < 1.7e-38)
#define LC_EXP_HI 88.0f                  // above: saturates at exp(88)
#define LC_EXP_LOG2E 1.44269504088896341f
#define LC_EXP_SHIFTER 12582912.0f       // 1.5 * 2^23: t = x log2e + it rounds to an integer in t's low bits
#define LC_EXP_LN2_HI 0.693359375f
#define LC_EXP_LN2_LO (-2.12194440e-4f)
#define LC_EXP_P0 1.9875691500e-4f
#define LC_EXP_P1 1.3981999507e-3f
#define LC_EXP_P2 8.3334519073e-3f
#define LC_EXP_P3 4.1665795894e-2f
#define LC_EXP_P4 1.6666665459e-1f
#define LC_EXP_P5 5.0000001201e-1f

#endif
