// Software prefetch of the next chunk of a convolution's weights (the knob `prefetch` of the
// schedule families deep and winograd, schedules/conv_params.h).
//
// The deep schedule (conv_schedule_cpu_deep.cpp) applies each chunk of a channel block's
// weights to every register tile of its task, one pass per tile row, while the chunk sits in
// L1; Winograd's with split=1 (conv_schedule_cpu_winograd.cpp) the weights of one of the
// alpha x alpha positions to every block of the task's tiles, one pass per block. In a network
// those weights come from memory, and the first pass over a chunk waits for them: the arithmetic of
// ResNet-50's 7x7 layers and the stream of their weights took the sum of their times, not the
// larger. With the prefetch, every reduction step of every pass issues one prefetch per weight line
// it loads, for a line of the next chunk: pass p of P, step r of a chunk of C, fetches line (p * C
// + r) / P of it, so the next chunk arrives spread evenly over the current one's passes, each line
// a few times in a row and never in bursts (Halide's `prefetch` directive fetches a whole box at
// one loop level, and on x86 as prefetchnta: lines that skip L2 and, evicted from L1, come from
// memory again).
//
// Halide has no schedule directive for this: it is a lowering pass (added to the kernel's
// Halide::Pipeline) that inserts the prefetches into the chunk's reduction loop, as calls to
// LLVM's prefetch intrinsic (into L1, for reading: prefetcht0). x86 targets only: there the call
// binds to the declaration of the intrinsic in Halide's x86 module (its own prefetch uses it;
// checked on the three CPU targets, tests/test_weight_prefetch.cpp); elsewhere it is not known
// to be present. Such a call may read any memory LLVM cannot prove apart from the prefetched
// address, so an accumulator that lives through the reduction must be a stack allocation no
// pointer escapes from, or its sums are stored back to memory after every multiply-add: the
// pass makes deep's one (Halide's register memory type: a stack array of its constant size) and
// inserts nothing where it is larger than kMaxPrefetchAcc. Winograd's register tile is on the
// stack already.
#pragma once

#include <string>
#include <vector>

#include "Halide.h"

namespace kiln::schedules {

// The largest accumulator (bytes) the pass keeps on the stack of the thread running a task.
inline constexpr int kMaxPrefetchAcc = 32 * 1024;

// Where the pass inserts prefetches. A loop name matches (stage, var) when it is
// "<stage><var>" or "<stage><var>.<a split or a rebase>", stage ending with '.' (Halide's
// "<func>.s<n>.").
struct WeightPrefetch {
  std::string weights;  // the weights buffer (an input of the pipeline)
  // The loop over a chunk's reduction steps: "<step_stage><step_var>", or the inner loop
  // step_var of a split ("<step_stage>r$x.rci").
  std::string step_stage, step_var;
  // The passes over a chunk: the loops around the step loop over any of these variables of
  // pass_stage.
  std::string pass_stage;
  std::vector<std::string> pass_vars;
  // The accumulator to keep on the stack (Func::name()), "" for none: the steps then take
  // prefetches wherever they are.
  std::string stack_acc;
  int element_bytes = 4;
};

// The lowering pass (for Halide::Pipeline::add_custom_lowering_pass, which takes ownership).
Halide::Internal::IRMutator* make_weight_prefetch_pass(const WeightPrefetch& w);

}  // namespace kiln::schedules
