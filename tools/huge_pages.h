#pragma once
// Training processes keep their host tensors on transparent huge pages. glibc does that
// for every heap and mmap chunk when the tunable glibc.malloc.hugetlb=1 is set, but reads
// tunables only when a process starts, so a command that trains restarts itself once
// with it set (its rank processes inherit it).
//
// Measured on the medium GPT (8 layers, hidden 512), reference run, 1 thread: the first
// step took 75k page faults and ~8 % more CPU than a later one; with huge pages it takes
// 1.2k faults and the same time as the others, and every step is ~12 % faster (fewer TLB
// misses in the GEMMs). PW_HUGE_PAGES=0 turns it off.

namespace pw::tools {

// Returns only when no restart is needed (or possible); otherwise replaces the process.
void RestartWithHugePages(char** argv);

}  // namespace pw::tools
