// The attention kernel's amx variant (backend/cpu/flash/flash_body.h with the bf16 kernel's
// layouts and AMX tile products, backend/cpu/flash/flash_amx.h; target flags in
// CMakeLists.txt). Run only where the CPU has AMX-BF16 and Linux granted the tile data
// state (lc_flash_amx_ready). Off x86 the same entry points run the portable algorithm (the
// level is never selected there).
#if defined(__x86_64__)
#define LC_FLASH_BF16 1
#define LC_FLASH_AMX 1
#endif
#define LC_FLASH_FN(name) lc_flash_##name##_amx
#include "backend/cpu/flash/flash_body.h"
