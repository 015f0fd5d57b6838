// Kiln's thread pool: the generated kernels' parallel loops (Halide's halide_do_par_for) run on
// it instead of Halide's default pool. Two differences, measured on the zoo (2 threads, 3
// alternating rounds, docs/benchmarks.md):
//
// - Idle workers spin (a pause instruction, and every 16th step a yield of the core to any
//   other thread that wants it) for kSpinMicroseconds before they sleep, as OpenMP's and
//   onnxruntime's pools do. A model runs its kernels back to back, and Halide's
//   default workers went to sleep almost at once, so each kernel's loop had to wake them first;
//   on a virtual machine that costs tens of microseconds (a one-pixel 1x1 convolution took 31 us
//   on 2 threads, 0.8 us on 1). Models 1.02-1.14x faster.
// - Each participant (the caller and each worker) first runs a contiguous share of the loop's
//   iterations, the same share of every loop, then takes what is left of the others' shares.
//   The kernels split their work by rows of their output, so the rows a kernel reads are mostly
//   those the same thread wrote in the kernel before, in its own core's cache; handed out one at
//   a time, they were as often in the other core's. Models another 1.01-1.17x faster.
//
// A loop that starts inside another (a kernel's nested parallel loop), or while another thread's
// loop holds the pool, runs its iterations in order on the calling thread: same results, no
// deadlock.
#pragma once

#include <cstdint>

namespace kiln::runtime {

// Microseconds an idle worker spins, waiting for the next loop, before it sleeps: far more
// than the gap between a model's kernels (microseconds), little CPU burnt after a run, and
// other threads (another Model's) get the core back soon. 1000 measured the same on four
// models (2 threads, alternating).
inline constexpr int kSpinMicroseconds = 250;

// Makes the pool the Halide runtime's do_par_for (once per process; thread-safe) and sizes it:
// threads > 0 threads in all (the caller and threads - 1 workers); 0 keeps the current size,
// or, the first time, takes HL_NUM_THREADS if set, else one per core. Every Model in the process
// shares the pool: the last size set wins. Waits for a loop in flight to end before resizing.
void use_thread_pool(int threads);

// The pool's size (threads, the caller included); 0 before use_thread_pool.
int thread_pool_size();

// The pool's parallel loop, as Halide calls it: task(user_context, i, closure) for every i in
// [min, min + size). Returns 0, or the non-zero value one of the failing iterations returned.
int thread_pool_par_for(void* user_context, int (*task)(void*, int, uint8_t*), int min, int size,
                        uint8_t* closure);

}  // namespace kiln::runtime
