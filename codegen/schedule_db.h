// The schedule database: what `kiln tune` measured, one record per kernel and target, kept in a
// text file of one JSON object per line (sorted, so two databases diff line by line). A record
// applies to a kernel only when both its signature (graph::schedule_signature: the op, every
// attribute and shape, but not the Winograd tile cap of the model's output check) and its Halide
// target string match exactly; anything else is stale and reported, never applied.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_library.h"
#include "graph/kernel_spec.h"

namespace kiln::codegen {

struct ScheduleRecord {
  std::string kernel;     // the kernel's name where it was tuned (reports only; not a key)
  std::string signature;  // key: graph::schedule_signature of the kernel
  std::string target;     // key: the Halide target string it was compiled and measured for
  std::string schedule;   // the winner, in text form (schedules/conv_params.h)
  std::string default_schedule;  // what the kernel had without the record
  double median_us = 0;          // the winner's median time, microseconds
  double spread = 0;             // its (p90 - p10) / median over the measured calls
  double default_us = 0;         // the default's median in the same interleaved run
  int threads = 0;               // threads the kernel ran with
  int candidates = 0;            // schedules measured
  std::string kiln_version;
  std::string cpu;  // the CPU's model name
};

class ScheduleDb {
 public:
  // Reads `path`; a file that does not exist is an empty database. Throws graph::Error naming
  // the line of a malformed record.
  static ScheduleDb load(const std::string& path);
  // Writes every record (sorted by kernel name, signature and target) to a temporary file and
  // renames it over `path`, so an interrupted write never leaves half a database.
  void save(const std::string& path) const;
  // What save writes: one JSON record per line, sorted.
  std::string text() const;

  const ScheduleRecord* find(const std::string& signature, const std::string& target) const;
  void put(ScheduleRecord record);  // replaces the record with the same key
  const std::vector<ScheduleRecord>& records() const { return records_; }

  // For CodegenOptions::schedules: the matching record's schedule when it still applies to
  // the kernel on that target (resolve_schedule accepts it), else "" (the default).
  ScheduleLookup lookup() const;

 private:
  std::vector<ScheduleRecord> records_;
};

// Where each kernel's schedule comes from for one target.
struct ScheduleUse {
  std::string kernel;    // distinct kernels only
  std::string schedule;  // canonical text; "" for kernels without knobs
  std::string origin;    // "default", "tuned (DB)", "spec" (ConvKernelSpec::schedule)
  // The schedule of the kernel's half-width kernel (GeneratedKernel::half_fn) on this target,
  // which CPUs that split 512-bit multiply-adds run instead; "" where it gets none.
  std::string half_width;
};
std::vector<ScheduleUse> schedule_uses(const std::vector<graph::KernelSpec>& specs,
                                       const std::string& target, const ScheduleDb* db);

// The loop nest Halide makes of `spec` on `target` with `schedule` (the text build_kernel_pipeline
// takes): every Func's loops, their order and what is split, vectorized, unrolled, parallel.
std::string schedule_loop_nest(const graph::KernelSpec& spec, const std::string& target,
                               const std::string& schedule);

// Records that name one of `specs`' kernels but do not apply to it on any of `targets`: tuned
// for another target, for a changed signature, or no longer a valid schedule. One line each,
// saying why, for `kiln compile` to print before it uses the defaults.
std::vector<std::string> stale_records(const ScheduleDb& db,
                                       const std::vector<graph::KernelSpec>& specs,
                                       const std::vector<std::string>& targets);

}  // namespace kiln::codegen
