#pragma once
// Training processes keep their host tensors on transparent huge pages. glibc does that
// for every heap and mmap chunk when the tunable glibc.malloc.hugetlb=1 is set, but reads
// tunables only when a process starts, so a command that trains restarts itself once
// with it set (its rank processes inherit it).
//
// Measured on the medium GPT (8 layers, hidden 512), reference run, 1 thread, on this
// project's 2-core VMs: a step takes 1.2k page faults instead of 75k, and the later
// steps ~8 % less CPU (fewer TLB misses in the GEMMs). The first step still pays for
// fresh memory (the hypervisor backs it on first touch): the warm-up step
// (--warmup-steps) is what keeps that out of the timed steps. PW_HUGE_PAGES=0 turns
// huge pages off.

namespace pw::tools {

// Returns only when no restart is needed (or possible); otherwise replaces the process.
void RestartWithHugePages(char** argv);

}  // namespace pw::tools
