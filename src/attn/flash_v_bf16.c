// The attention kernel's bf16 variant (attn/flash_body.h; target flags in CMakeLists.txt).
#define LC_FLASH_BF16 1
#define LC_FLASH_FN(name) lc_flash_##name##_bf16
#include "attn/flash_body.h"
