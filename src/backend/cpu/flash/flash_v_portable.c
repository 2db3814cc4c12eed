// The attention kernel's portable variant (backend/cpu/flash/flash_body.h; target flags in CMakeLists.txt).
#define LC_FLASH_FN(name) lc_flash_##name##_portable
#include "backend/cpu/flash/flash_body.h"
