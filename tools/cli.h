// Shared pieces of the kiln command's subcommands: argument parsing with clear usage errors,
// and loading a model (an .onnx file, or `example` for the built-in reference model).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/schedule_db.h"
#include "graph/ir.h"
#include "graph/passes/pipeline.h"
#include "kiln/runtime.h"

namespace kiln::cli {

// A command-line mistake: printed as one line plus a pointer to --help, exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Minimal parser: `--flag value`, `--flag=value`, boolean `--flag`, positionals. Options not
// declared are usage errors, so a typo never silently does nothing.
class Args {
 public:
  Args(int argc, char** argv, int first, std::vector<std::string> value_flags,
       std::vector<std::string> bool_flags);
  bool has(const std::string& flag) const;
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  std::vector<std::string> get_all(const std::string& flag) const;  // repeated flags
  int get_int(const std::string& flag, int fallback, int lo, int hi) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  bool help() const { return help_; }

 private:
  std::multimap<std::string, std::string> values_;
  std::vector<std::string> positionals_;
  bool help_ = false;
};

int parse_int(const std::string& what, const std::string& s, int lo, int hi);
// A positive byte count: plain bytes, or with a binary suffix K, M, G or T ("512M", "4G").
// UsageError naming `what` for anything else, including 0 and sizes over int64.
int64_t parse_byte_size(const std::string& what, const std::string& s);

// The one MODEL positional of run / bench / inspect / compile.
std::string single_model(const Args& args);
// A backend's name (cpu, cuda, opencl) given to `flag`; a usage error for any other.
Backend parse_backend_name(const std::string& flag, const std::string& name);
// --target cpu|cuda|opencl, --fallback, --threads, --max-memory and --schedules into
// `options`, and the kernel generator below (with the database's schedules). Returns the
// database (nullptr without --schedules).
std::shared_ptr<const codegen::ScheduleDb> parse_backend(const Args& args, ModelOptions* options);

// The database --schedules names (a missing file is an error here: a typo must not silently
// leave every kernel at its default), or none.
std::shared_ptr<const codegen::ScheduleDb> schedule_db(const Args& args);

// --precision f32|bf16 (default f32): the arithmetic of the convolutions' multiply-adds
// (graph::PipelineOptions::precision). UsageError for any other value.
graph::Precision parse_precision(const Args& args);
// One precision name given to --precision; a UsageError saying the flag takes `accepted`.
graph::Precision parse_precision_name(const std::string& name, const std::string& accepted);
// `g` with every node's output a graph output: each survives a run (the arena plan keeps graph
// outputs alive to the end) and comes back from it, from the reference as from the kernels.
graph::Graph expose_all(graph::Graph g);
// Whether any convolution of the optimized graph runs in bf16 (Conv2d::bf16).
bool has_bf16(const graph::Graph& optimized);
// The line `kiln run` and `bench` print for a bf16 model: how many convolutions run in bf16 and
// whether this CPU runs them with the dot-product instruction (AVX512_BF16) or converts the
// products to float32 multiply-adds on CPU target `cpu_target` (-1: the best this CPU has).
std::string precision_note(const graph::Graph& optimized, int cpu_target);
// The pass options of a compile at `precision` on this machine: in bf16, whether the bf16
// convolutions will run on AMX tiles is this CPU's answer (runtime::amx_usable), which moves
// use_bf16's line between bf16 and float32 Winograd.
graph::PipelineOptions pass_options(graph::Precision precision);
// Whether bf16 convolutions run AVX512_BF16 dot products with CPU target `cpu_target` (-1: the
// best this CPU runs).
bool runs_bf16_dot_products(int cpu_target);

// The CPU target a name means: a full Halide target string of the build's list, or a short
// name: avx512 or avx2 for the first target of the list with that feature and none better,
// baseline (also accepted as sse41) for the last one. UsageError for anything else; graph::Error when this CPU cannot run it.
int parse_cpu_target(const std::string& flag, const std::string& name);

// Error unless the graph's inputs fit in options.max_memory_bytes (0: physical memory): run
// and bench check before they read or generate them (the Model checks its arena).
void check_inputs_fit(const graph::Graph& g, const ModelOptions& options);

// The shapes --input-shape NAME=D0,D1,... (repeatable) gives graph inputs with symbolic
// dimensions, in order; then, for an ONNX file `model`, the `implied` shapes (`kiln run`'s input
// files, for its inputs with free dimensions) of inputs --input-shape does not name, and batch 1
// for each input with a dynamic batch that none of them binds
// (graph::onnx::default_batch_shapes), each with a note on stderr. UsageError for a value that
// is not NAME= and positive sizes.
using InputShapes = std::vector<std::pair<std::string, graph::Shape>>;
InputShapes parse_input_shapes(const Args& args, const std::string& model,
                               const InputShapes& implied = {});
// Prints a command's --help text, with a line "  {input-shape:N}" replaced by the option
// --input-shape and its description indented to column N (one text for every command).
void print_help(const char* help);

// `example` builds the reference model; anything else is read as an ONNX file, its symbolic
// dimensions bound by `shapes`. Throws graph::Error with a clear message for a missing or
// malformed file, an unbound symbolic dimension or a shape that does not fit the model.
graph::Graph load_model(const std::string& model, const InputShapes& shapes = {});

// Kiln's per-user cache directory ($XDG_CACHE_HOME/kiln, else ~/.cache/kiln); "" if neither
// is set. Nothing is created here.
std::string cache_dir();

// The generator of the kernels a model needs for its shapes (codegen::kernel_generator), for
// run / bench / example: compiled sets are kept in cache_dir()/kernels, and each kernel
// compiled prints a progress line on stderr. With a schedule database, its records apply, and
// the records that name a kernel of the model but do not apply are listed on stderr first.
KernelGenerator kernel_generator(std::shared_ptr<const codegen::ScheduleDb> db = nullptr);

// The output check of a model's Winograd layers (check_winograd_tiles) that compile_cached
// runs: the options its kernels are generated with, and the schedule database they apply.
struct OutputCheck {
  ModelOptions options;
  std::shared_ptr<const codegen::ScheduleDb> db;
};

// The optimized graph of `model` (import with `shapes` + run_passes at `precision`, then
// check_winograd_tiles with `check` where given, its lines on stderr), from the compile cache
// when this model (its bytes and external data), these input shapes, this target, this
// precision, the check and its database's records, and this Kiln build (its version and
// codegen::generator_identity, the hash of the program) were compiled before; stored there
// otherwise. A cache that cannot be read or written is skipped, never an error. *from_cache
// says which. `imported`: load_model(model, shapes) where the caller has it already.
graph::Graph compile_cached(const std::string& model, const InputShapes& shapes,
                            const std::string& target, graph::Precision precision, bool* from_cache,
                            const OutputCheck* check = nullptr,
                            const graph::Graph* imported = nullptr);
// The graph compile_cached would take from the cache for these arguments, if it holds one (a
// damaged entry: none). Compiles nothing.
std::optional<graph::Graph> cached_graph(const std::string& model, const InputShapes& shapes,
                                         const std::string& target, graph::Precision precision,
                                         const OutputCheck* check);

}  // namespace kiln::cli
