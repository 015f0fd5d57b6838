// Measuring schedules for `kiln tune`: one kernel of a model cut out as a graph of its own,
// each candidate schedule compiled (in parallel), checked against the reference interpreter
// and timed interleaved with another, so machine noise hits both alike.
//
// Measurement sits behind the Measurer interface (schedules in, checks and timings out):
// the tuner's search never touches a Model, so a later Measurer can farm candidates out to
// other machines (docs/design.md).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_library.h"
#include "graph/ir.h"
#include "graph/kernel_spec.h"
#include "graph/reference.h"
#include "kiln/runtime.h"

namespace kiln::cli {

struct Timing {
  double median_us = 0;
  double spread = 0;  // (p90 - p10) / median of the samples
  std::vector<double> samples_us;
};

class Measurer {
 public:
  virtual ~Measurer() = default;
  // Compiles every schedule not compiled yet (in parallel where the Measurer can). Returns,
  // for each, "" or why it cannot run (refused, failed to compile, wrong results).
  virtual std::vector<std::string> prepare(const std::vector<std::string>& schedules) = 0;
  // Times prepared schedules `a` and `b`: `rounds` calls of each, alternating, after a
  // warm-up.
  virtual std::pair<Timing, Timing> compare(const std::string& a, const std::string& b,
                                            int rounds) = 0;
};

// A kernel's node cut out of the optimized graph it lives in: its non-constant inputs become
// graph inputs, its constants stay, its output is the graph's output.
graph::Graph kernel_graph(const graph::Graph& optimized, const std::string& node_name);

struct LocalMeasurerOptions {
  int cpu_target = -1;      // index into runtime::cpu_targets()
  int threads = 0;          // the kernel's threads (0: one per core)
  int compile_jobs = 1;     // candidates compiled at once (separate processes)
  std::string cache_dir;    // the kernel cache; empty: a temporary one
  bool evict = false;       // write a 64 MiB buffer before each call: the weights and inputs
                            // come from memory, not from caches
  // Time the kernel where it runs: inside this graph (the whole optimized model), every kernel
  // with the tuned kernel's schedule signature taking the schedule under test, the others
  // `others`' (the database's records so far, else their defaults), each call a run of the
  // whole model and its time the mean time of those kernels. Empty: time the kernel alone.
  // Checks against the reference are of the kernel alone either way.
  std::shared_ptr<const graph::Graph> network;
  std::string signature;  // graph::schedule_signature of the kernel tuned
  codegen::ScheduleLookup others;
};

// Runs candidates on this machine, each in a Model of `kernel` (kernel_graph) on seeded random
// inputs, or of the options' network; a candidate whose output is beyond rtol 1e-3 / atol 1e-4
// of the reference interpreter's (the kernel alone) is refused.
std::unique_ptr<Measurer> local_measurer(graph::Graph kernel, const LocalMeasurerOptions& options);

// oneDNN's time for the kernel's op on this machine, for the tuning table: its convolution
// (dense or depthwise, with bias, a residual sum and ReLU/ReLU6 as post-ops, NHWC) on `threads`
// OpenMP threads, `rounds` calls after a warm-up (the caches evicted before each when
// `evict`); nullopt, with *why set, where it has no such op. Defined by bench/onednn_peer.cpp,
// which the kiln tool is built with when the build has oneDNN (KILN_WITH_ONEDNN).
std::optional<Timing> onednn_time(const graph::KernelSpec& kernel, int threads, int rounds,
                                  bool evict, std::string* why);

}  // namespace kiln::cli
