// The attention kernel's avx512 variant (backend/cpu/flash/flash_body.h; target flags in CMakeLists.txt).
#define LC_FLASH_FN(name) lc_flash_##name##_avx512
#include "backend/cpu/flash/flash_body.h"
