#pragma once
// What a training process takes from its machine: threads for its kernels, and memory it
// keeps once freed. The reference runner and every rank process set both the same way.

namespace pw {

// The threads one process computes with (ops::SetKernelThreads): `requested` when > 0, else
// $OPENBLAS_NUM_THREADS, else $OMP_NUM_THREADS, else the machine's cores shared among the
// `local_processes` training on it; at least 1.
int ComputeThreads(int requested, int local_processes);

// Blocks up to 32 MiB come from the heap, and freed ones stay there for the next
// allocation instead of going back to the kernel. Every pipeweave command sets it: planning
// frees and allocates tens of megabytes per phase, and handing them back cost a TLB
// shootdown across the planning threads and a fault per page when they were taken again.
void KeepFreedBlocksInHeap();

// KeepFreedBlocksInHeap, and one malloc arena for every thread. Freed tensors stay in the
// process: by default glibc hands every micro-batch's large buffers back to the kernel and
// faults them in again on the next one (a page-fault storm costing seconds of system time
// per step on a medium model). Only the allocator changes, never a result bit. Call it
// before the process starts its threads.
void KeepFreedMemory();

}  // namespace pw
