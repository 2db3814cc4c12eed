// The private backend, for tests: a second CPU backend whose buffers live in one private
// mapping that host code has no pointer to. A handle is an offset into it; the mapping is
// readable and writable only inside the backend's own calls (PROT_NONE otherwise), so a
// host access behind the backend's back faults instead of passing. Its ops are the kernel
// table's, so it gives the CPU backend's bits: a run that matches the CPU backend under it
// reads and writes its buffers only through the interface.
#ifndef LC_PRIVATE_BACKEND_H
#define LC_PRIVATE_BACKEND_H

#include "backend/backend.h"

// Device memory is counted in an arena of the backend's own (the cap of `host`, the run's
// arena, which also serves its host memory); its mapping reserves the cap (or 16 GiB).
lc_status lc_backend_private_open(lc_arena *host, lc_backend **out);
// How many times the mapping was opened to the backend's own code (tests: it moves).
size_t lc_backend_private_opens(const lc_backend *be);

#endif
