// The attention kernel's bf16 variant (backend/cpu/flash/flash_body.h; target flags in CMakeLists.txt).
// Off x86 there is no AVX512_BF16: the same entry points run the portable algorithm (the
// level is never selected there: lc_kern_supported).
#if defined(__x86_64__)
#define LC_FLASH_BF16 1
#endif
#define LC_FLASH_FN(name) lc_flash_##name##_bf16
#include "backend/cpu/flash/flash_body.h"
