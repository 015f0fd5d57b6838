// `kiln compile`: turns a model into NAME.a + NAME.h + NAME.weights, which a program links
// without Halide or LLVM: the kernels generated for the model, the runtime, and the optimized
// graph as data.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "cli.h"
#include "codegen/file_cache.h"
#include "codegen/kernel_library.h"
#include "codegen/process.h"
#include "commands.h"
#include "compile_codegen.h"
#include "compile_emit.h"
#include "compile_object.h"
#include "graph/builder.h"
#include "graph/file_io.h"
#include "graph/memory_plan.h"
#include "graph/onnx/onnx_export.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "graph/serialize.h"
#include "kiln/runtime.h"
#include "kiln_compile_config.h"
#include "runtime/kernels.h"

extern char** environ;

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
namespace cfg = compile_config;

constexpr const char* kHelp = R"(usage: kiln compile MODEL -o OUTDIR [options]

MODEL is an .onnx file, or `example` for the built-in reference model. Optimizes it (float32:
with the Winograd output check of `kiln run`, run on this CPU with the first target of
--targets it supports, its result kept in the compile cache; docs/tuning.md) and writes
  OUTDIR/NAME.a        static library: the model's C++ API, the kernels generated for its
                       shapes (for every requested CPU target, picked at run time, and for
                       CUDA when asked), Kiln's runtime and the Halide runtime (link with
                       -lpthread -ldl)
  OUTDIR/NAME.h        the API: class NAME::Model (includes only the standard library)
  OUTDIR/NAME.weights  the optimized graph with its weights, loaded by NAME::Model at run time
Nothing in OUTDIR changes unless every step succeeds. Each compiled kernel (per target list and
schedule) and the compiled model source are kept in $XDG_CACHE_HOME/kiln (else ~/.cache/kiln),
so compiling an unchanged model again, or one whose schedules changed for a few kernels, only
compiles what changed, whatever OUTDIR; a kernel or model source taken from there is marked
(cached).

options:
  -o, --output DIR    where to write (created if missing)
  {input-shape:22}
  --name NAME         C++ namespace and file names (default: the model file's name)
  --targets LIST      comma-separated: cpu (default: every CPU target of this Kiln build,
                      picked at run time), cuda (CUDA kernels too, with fallback to the
                      CPU), or some of the build's CPU Halide target strings (the first one
                      the CPU supports runs)
  --threads N         the default thread count of NAME::Model (default 0: one per core)
  --emit LIST         also write: plan (NAME.plan.txt, the arena plan), dot (NAME.dot, the
                      optimized graph), stmt (NAME.stmt/, the Halide IR of the kernels used,
                      per target), assembly (NAME.assembly/, their x86 or PTX assembly),
                      onnx (NAME.onnx, the optimized graph for Netron; weights left out,
                      they are in NAME.weights)
  --schedules FILE    a schedule database (`kiln tune` writes one): each kernel whose
                      signature and CPU target have a record gets its tuned schedule; records
                      that name a kernel of the model but were tuned for another target or a
                      changed kernel are listed as stale, and that kernel gets the default
  --precision f32|bf16
                      the convolutions' multiply-adds: f32 (default), or bf16 where a
                      convolution can (dense, one group): weights stored in
                      NAME.weights as bfloat16 (half the bytes) and packed for
                      the kernels when the model loads, inputs rounded to bfloat16,
                      float32 sums and epilogues; each
                      AVX-512 target gets a variant with AVX512_BF16 (vdpbf16ps) and an
                      AMX kernel (tdpbf16ps) where the amx schedule takes the layer, picked
                      at run time where the CPU has them. Prints the outputs' bf16 error
                      against float32 (the reference interpreter on a seeded random input,
                      max abs difference / max |float32 output|) and warns, naming the
                      convolutions that add the most, above --max-bf16-error
  --max-bf16-error E  the error above which --precision bf16 warns (default 0.02)
  --depfile FILE      write a Makefile-style depfile of NAME.a (for build systems)
  -h, --help          this text
)";

struct CompileArgs {
  std::string model, outdir, name, depfile;
  InputShapes input_shapes;
  std::shared_ptr<const codegen::ScheduleDb> schedules;  // null: every kernel's default
  Targets targets;
  int threads = 0;
  std::set<std::string> emit;
  graph::Precision precision = graph::Precision::f32;
  double max_bf16_error = 2e-2;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string available_targets() {
  std::string s = "cpu (" + join(runtime::cpu_targets(), ", ") + ")";
  if (cfg::kHaveCuda) return s + ", cuda (" + cfg::kCudaTarget + ")";
  return s + "; no cuda (this build has KILN_BUILD_CUDA=OFF)";
}

Targets parse_targets(const std::string& list) {
  Targets t;
  bool all_cpu = false;
  const std::vector<std::string>& cpu = runtime::cpu_targets();
  for (const std::string& item : split(list, ',')) {
    const auto it = std::find(cpu.begin(), cpu.end(), item);
    if (item == "cpu") {
      all_cpu = true;
    } else if ((item == "cuda" || item == cfg::kCudaTarget) && cfg::kHaveCuda) {
      t.cuda = true;
    } else if (it != cpu.end()) {
      const int index = static_cast<int>(it - cpu.begin());
      if (std::find(t.cpu.begin(), t.cpu.end(), index) == t.cpu.end()) t.cpu.push_back(index);
    } else {
      throw UsageError("--targets: '" + item + "' is not a target of this Kiln build; it has " +
                       available_targets());
    }
  }
  if (all_cpu) t.cpu.clear();  // `cpu` means all of them, with dispatch
  if (split(list, ',').empty()) throw UsageError("--targets is empty; this Kiln build has " + available_targets());
  return t;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  // The name becomes a namespace next to these.
  static const std::set<std::string> taken = {"kiln", "std", "Halide", "halide", "int", "float",
                                              "class", "namespace", "new", "delete", "main"};
  return taken.count(s) == 0;
}

std::string default_name(const std::string& model) {
  std::string name = fs::path(model).stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "model_" + name;
  return name;
}

CompileArgs parse(const Args& args) {
  CompileArgs a;
  if (args.positionals().size() != 1)
    throw UsageError(args.positionals().empty() ? "expected a MODEL (an .onnx file or `example`)"
                                                : "unexpected argument '" + args.positionals()[1] + "'");
  a.model = args.positionals()[0];
  a.input_shapes = parse_input_shapes(args, a.model);
  a.outdir = args.get("--output");
  if (a.outdir.empty()) throw UsageError("-o OUTDIR is required");
  a.name = args.get("--name", default_name(a.model));
  if (!is_identifier(a.name))
    throw UsageError("--name '" + a.name + "' is not usable as a C++ namespace and file name "
                     "(letters, digits and _, not starting with a digit, not a reserved word)");
  a.targets = parse_targets(args.get("--targets", "cpu"));
  a.threads = args.get_int("--threads", 0, 0, 1024);
  a.depfile = args.get("--depfile");
  a.precision = parse_precision(args);
  if (a.precision == graph::Precision::bf16 && a.targets.cuda)
    throw UsageError("--precision bf16 is for CPU targets only; compile a CUDA model in f32");
  if (args.has("--max-bf16-error")) {
    const std::string v = args.get("--max-bf16-error");
    char* end = nullptr;
    a.max_bf16_error = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(a.max_bf16_error > 0) || a.max_bf16_error >= 1)
      throw UsageError("--max-bf16-error takes a number between 0 and 1, not '" + v + "'");
    if (a.precision != graph::Precision::bf16)
      throw UsageError("--max-bf16-error only applies with --precision bf16");
  }
  a.schedules = schedule_db(args);
  for (const std::string& e : split(args.get("--emit"), ',')) {
    if (e != "plan" && e != "dot" && e != "stmt" && e != "assembly" && e != "onnx")
      throw UsageError("--emit: unknown output '" + e + "' (supported: plan, dot, stmt, assembly, onnx)");
    a.emit.insert(e);
  }
  return a;
}

// ---- Files and tools ----

// MRI scripts have no quoting: a path with one of these characters cannot be written there.
void check_mri_path(const std::string& p) {
  if (p.find_first_of(" \t\n,;*+()'\"") != std::string::npos)
    throw graph::Error("cannot archive with ar -M: the path '" + p +
                       "' contains a character MRI scripts cannot express; use a plain path");
}

// NAME.a: the model's object, its generated kernels' archives, then Kiln's libraries.
void archive(const fs::path& out, const fs::path& object, const std::vector<fs::path>& kernels,
             const fs::path& dir) {
  std::string script = "CREATE " + out.string() + "\nADDMOD " + object.string() + "\n";
  check_mri_path(out.string());
  check_mri_path(object.string());
  for (const fs::path& k : kernels) {
    check_mri_path(k.string());
    script += "ADDLIB " + k.string() + "\n";
  }
  for (const char* lib : cfg::kLibraries) {
    check_mri_path(lib);
    if (!fs::exists(lib)) throw graph::Error("Kiln library '" + std::string(lib) + "' is missing; rebuild Kiln");
    script += "ADDLIB " + std::string(lib) + "\n";
  }
  script += "SAVE\nEND\n";
  write_file(dir / "archive.mri", script);
  codegen::run_tool({cfg::kAr, "-M"}, "archiving " + out.filename().string(), (dir / "archive.mri").string());
  codegen::run_tool({cfg::kAr, "s", out.string()}, "indexing " + out.filename().string());
}

// ---- Steps ----

// A directory in OUTDIR holding everything until the end; removed on any failure.
class Staging {
 public:
  explicit Staging(fs::path dir) : dir_(std::move(dir)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Staging() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

std::string mb(int64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << bytes / 1e6 << " MB";
  return s.str();
}

void report_kernels(const graph::Graph& input, const Model& probe, const CompileArgs& a) {
  int conv = 0, layout = 0, bf16 = 0;
  for (const graph::KernelSpec& k : probe.kernels()) {
    const auto* c = std::get_if<graph::ConvKernelSpec>(&k);
    conv += c != nullptr;
    bf16 += c && c->bf16;
    layout += std::holds_alternative<graph::LayoutKernelSpec>(k);
  }
  std::cout << "      " << input.num_nodes() << " nodes -> " << probe.kernels().size()
            << " generated Halide kernels (" << conv << " convolutions, " << layout
            << " layout transforms), arena " << mb(probe.arena_plan().arena_bytes) << "\n";
  std::vector<std::string> names;
  for (int t : a.targets.cpu) names.push_back(runtime::cpu_targets()[t]);
  std::cout << "      targets: " << (a.targets.cuda ? "cuda, falling back to " : "")
            << (names.empty() ? "cpu (" + join(runtime::cpu_targets(), ", ") + "; the best this CPU supports)"
                              : join(names, ", ") + " (the first this CPU supports)")
            << "\n";
  if (a.precision == graph::Precision::bf16)
    std::cout << "      precision: bf16 in " << bf16 << " of " << conv
              << " convolutions (each AVX-512 target also gets an AVX512_BF16 variant of them, and an "
                 "AMX kernel where the amx schedule takes one, picked at run time where the CPU "
                 "has them)\n";
}

bool same_file_content(const fs::path& a, const fs::path& b) {
  if (!fs::is_regular_file(a) || !fs::is_regular_file(b) || fs::file_size(a) != fs::file_size(b)) return false;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  return std::equal(std::istreambuf_iterator<char>(fa), std::istreambuf_iterator<char>(),
                    std::istreambuf_iterator<char>(fb));
}

// Moves everything from the staging directory into OUTDIR, the archive last. A file identical
// to the one already there is left alone, so build systems see no change and rebuild nothing.
void commit(const fs::path& staging, const fs::path& outdir, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (same_file_content(staging / n, outdir / n)) continue;
    if (fs::is_directory(outdir / n)) fs::remove_all(outdir / n);
    fs::rename(staging / n, outdir / n);
  }
}

// max |a - b| / max |b| over the finite elements of b.
double normwise_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, largest = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(b[i])) continue;
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    largest = std::max(largest, std::fabs(static_cast<double>(b[i])));
  }
  return diff / std::max(largest, 1e-30);
}

// The bf16 model's error: the reference interpreter runs the optimized graph as it is (its bf16
// convolutions rounding their operands, graph::Conv2d::bf16) and with every flag cleared, on one
// seeded random input; the same arithmetic as the kernels up to the order of float32 sums.
// Prints the outputs' error (max abs difference / max |float32 output|) and, above `limit`,
// warns and names the convolutions that add the most error (their output's error less their
// input's).
void check_bf16_error(const graph::Graph& bf16, double limit) {
  graph::Graph f32 = bf16;
  std::vector<graph::Node> nodes = f32.nodes();
  for (graph::Node& n : nodes)
    if (auto* c = std::get_if<graph::Conv2d>(&n.op)) c->bf16 = false;
  f32.rebuild(std::move(nodes));
  std::vector<graph::Tensor> inputs;
  for (size_t i = 0; i < bf16.inputs.size(); ++i) {
    const graph::Value& v = bf16.value(bf16.inputs[i]);
    inputs.push_back({v.shape, v.layout, graph::random_uniform(graph::num_elements(v.shape), -1.0f, 1.0f, 1 + i)});
  }
  std::cout << "      bf16 accuracy: the reference interpreter on a seeded random input, bf16 "
               "against float32 ...\n" << std::flush;
  const graph::Graph a = expose_all(bf16), b = expose_all(f32);
  const std::vector<graph::Tensor> got = graph::run_reference(a, inputs);
  const std::vector<graph::Tensor> want = graph::run_reference(b, inputs);
  std::map<uint32_t, double> error;  // by value id
  for (size_t i = 0; i < got.size(); ++i) error[a.outputs[i].index] = normwise_error(got[i].data, want[i].data);
  double worst = 0;
  for (size_t i = 0; i < bf16.outputs.size(); ++i) {
    const double e = error[bf16.outputs[i].index];
    worst = std::max(worst, e);
    std::cout << "      bf16 error of output '" << graph::printable(bf16.value(bf16.outputs[i]).name)
              << "': " << std::setprecision(3) << e << " (max abs difference / max |float32|)\n";
  }
  if (worst <= limit) return;
  std::vector<std::pair<double, std::string>> added;
  for (const graph::Node& n : a.nodes()) {
    const auto* c = std::get_if<graph::Conv2d>(&n.op);
    if (!c || !c->bf16) continue;
    const auto in = error.find(n.inputs[0].index);
    added.emplace_back(error[n.outputs[0].index] - (in == error.end() ? 0.0 : in->second), n.name);
  }
  std::sort(added.rbegin(), added.rend());
  std::string names;
  for (size_t i = 0; i < std::min<size_t>(3, added.size()); ++i) {
    std::ostringstream e;
    e << std::setprecision(2) << added[i].first;
    names += (i ? ", " : "") + graph::printable(added[i].second) + " (+" + e.str() + ")";
  }
  std::cerr << "kiln compile: warning: the bf16 model's outputs differ from float32 by up to "
            << std::setprecision(3) << worst << ", more than " << limit
            << " (--max-bf16-error); the convolutions adding the most error: " << names
            << "; compile the model with --precision f32 if that is too much\n";
}

int run_compile(const CompileArgs& a) {
  std::cout << "[1/3] optimizing " << graph::printable(a.model) << "\n";
  const graph::Graph input = load_model(a.model, a.input_shapes);
  // Float32 models get the Winograd output check, run on this CPU with the kernels of the first
  // of the targets it can run (the library's first CPU target decides the Winograd weights).
  // A CPU that runs none of them (not x86-64) cannot check: its models keep every tile.
  const int best = runtime::best_cpu_target();
  OutputCheck check{ModelOptions{}, a.schedules};
  check.options.generate_kernels = kernel_generator(a.schedules);
  check.options.threads = a.threads;
  if (!a.targets.cpu.empty()) check.options.cpu_target = std::max(a.targets.cpu[0], best);
  bool cached = false;
  const graph::Graph g =
      compile_cached(a.model, a.input_shapes, "cpu", a.precision, &cached,
                     a.precision == graph::Precision::f32 && best >= 0 ? &check : nullptr, &input);
  // Lowering and the runtime's own checks now, so an unsupported model fails here, not in the
  // user's program.
  ModelOptions lower_only;
  lower_only.lower_only = true;
  const Model probe(g, lower_only);
  report_kernels(input, probe, a);
  if (a.precision == graph::Precision::bf16) check_bf16_error(g, a.max_bf16_error);

  const fs::path outdir = fs::absolute(a.outdir);
  fs::create_directories(outdir);
  Staging staging(outdir / ("." + a.name + ".kiln-tmp"));
  const fs::path& tmp = staging.dir();
  const uint64_t weights_checksum = graph::write_graph_file(g, (tmp / (a.name + ".weights")).string());
  // The header describes inputs and outputs in comments: names escaped, so none ends a comment.
  write_file(tmp / (a.name + ".h"),
             model_header(a.name, graph::printable(fs::path(a.model).filename().string()),
                          graph::with_printable_names(g), a.threads));
  std::vector<graph::KernelSpec> generated, generated_gpu;
  for (const graph::KernelSpec& k : probe.kernels())
    if (graph::is_generated(k)) generated.push_back(k);
  // The GPU runtime aliases no buffers: its kernels are the unaliased plan's (every Concat is
  // one, and no input is read at a larger tensor's strides).
  if (a.targets.cuda)
    for (const graph::KernelSpec& k :
         graph::planned_kernels(g, graph::plan_arena(g, graph::plan_options_for(false))))
      if (graph::is_generated(k)) generated_gpu.push_back(k);
  std::vector<std::string> cpu_targets;
  for (int t : a.targets.cpu) cpu_targets.push_back(runtime::cpu_targets()[t]);
  if (cpu_targets.empty()) cpu_targets = runtime::cpu_targets();
  // The table records which kernels read Winograd-transformed weights: the runtime transforms
  // them once at load (runtime::winograd_conv_weights). GPU kernels never do.
  const std::string source =
             model_source(a.name, a.targets, weights_checksum) + "\n" +
                 codegen::kernel_table_source(generated, a.name, cpu_targets,
                                              a.schedules ? a.schedules->lookup() : nullptr) +
                 (a.targets.cuda ? "\n" + codegen::kernel_table_source(generated_gpu, a.name + "_cuda",
                                                                      {cfg::kCudaTarget})
                                 : "");
  write_file(tmp / (a.name + ".cpp"), source);
  std::vector<std::string> outputs = {a.name + ".weights", a.name + ".h"};
  if (a.emit.count("plan")) {
    write_file(tmp / (a.name + ".plan.txt"), graph::describe(graph::plan_arena(g), g));
    outputs.push_back(a.name + ".plan.txt");
  }
  if (a.emit.count("onnx")) {
    graph::onnx::export_model(g, (tmp / (a.name + ".onnx")).string(), {/*include_weights=*/false});
    outputs.push_back(a.name + ".onnx");
  }
  if (a.emit.count("dot")) {
    write_file(tmp / (a.name + ".dot"), graph_to_dot(g, a.name));
    outputs.push_back(a.name + ".dot");
  }
  for (const char* kind : {"stmt", "assembly"}) {
    if (!a.emit.count(kind)) continue;
    const std::string out = a.name + (std::string(kind) == "stmt" ? ".stmt" : ".assembly");
    emit_kernel_listings(probe.kernels(), a.targets, a.name, kind, tmp / out,
                         a.schedules ? a.schedules->lookup() : nullptr);
    outputs.push_back(out);
  }

  std::cout << "[2/3] compiling " << a.name << ".cpp and " << generated.size()
            << " kernels generated for its shapes (" << codegen::distinct_kernels(generated).kernels.size()
            << " distinct; " << join(cpu_targets, ", ") << ")\n";
  const codegen::Progress progress = [](size_t i, size_t n, const std::string& kernel, bool cached) {
    std::cout << "      kernel " << i + 1 << "/" << n << ": " << graph::printable(kernel)
              << (cached ? " (cached)" : "") << std::endl;
  };
  codegen::ScheduleLookup schedules;
  if (a.schedules) {
    schedules = a.schedules->lookup();
    size_t applied = 0;
    for (const std::string& t : cpu_targets)
      for (const codegen::ScheduleUse& u : codegen::schedule_uses(generated, t, a.schedules.get()))
        applied += u.origin == "tuned (DB)";
    std::cout << "      schedules: " << applied << " (kernel, target) pairs tuned from the database\n";
    for (const std::string& line : codegen::stale_records(*a.schedules, generated, cpu_targets))
      std::cout << "      stale schedule record: " << graph::printable(line) << "\n";
  }
  std::vector<fs::path> kernel_archives =
      codegen::write_kernel_archives(generated, cpu_targets, a.name, tmp, progress, schedules,
                                     false, cache_dir());
  if (a.targets.cuda) {
    std::cout << "      and the same kernels for CUDA (" << cfg::kCudaTarget << ")\n";
    for (fs::path& p : codegen::write_kernel_archives(generated_gpu, {cfg::kCudaTarget},
                                                      a.name + "_cuda", tmp, progress, nullptr,
                                                      false, cache_dir()))
      kernel_archives.push_back(std::move(p));
  }
  std::vector<std::string> cxx = {cfg::kCxxCompiler, "-O2", "-std=c++17", "-fPIC"};
  for (const char* dir : cfg::kIncludeDirs) cxx.push_back(std::string("-I") + dir);
  compile_model_source(cxx, tmp, a.name, source, cache_dir());

  std::cout << "[3/3] archiving " << a.name << ".a\n";
  archive(tmp / (a.name + ".a"), tmp / (a.name + ".o"), kernel_archives, tmp);
  outputs.push_back(a.name + ".a");
  const std::string deps = depfile_for(tmp / "deps.d", tmp, outdir / (a.name + ".a"));
  commit(tmp, outdir, outputs);
  if (!a.depfile.empty()) {
    write_file(a.depfile + ".tmp", deps);
    fs::rename(a.depfile + ".tmp", a.depfile);
  }
  std::cout << "wrote " << (outdir / (a.name + ".a")).string() << " ("
            << mb(static_cast<int64_t>(fs::file_size(outdir / (a.name + ".a")))) << "), " << a.name << ".h, "
            << a.name << ".weights (" << mb(static_cast<int64_t>(fs::file_size(outdir / (a.name + ".weights"))))
            << ")";
  for (size_t i = 2; i + 1 < outputs.size(); ++i) std::cout << ", " << outputs[i];
  std::cout << "\n";
  return 0;
}

}  // namespace

int cmd_compile(int argc, char** argv) {
  // The shared parser knows only --long options: -o is spelled --output for it.
  std::vector<std::string> storage(argv, argv + argc);
  std::vector<char*> args;
  for (std::string& s : storage) {
    if (s == "-o") s = "--output";
    args.push_back(s.data());
  }
  const Args parsed(argc, args.data(), 2, {"--output", "--name", "--targets", "--threads", "--emit", "--depfile",
                       "--schedules", "--input-shape", "--precision", "--max-bf16-error"}, {});
  if (parsed.help()) {
    print_help(kHelp);
    return 0;
  }
  try {
    return run_compile(parse(parsed));
  } catch (const fs::filesystem_error& e) {
    throw graph::Error(e.what());  // a file system problem is the user's, not an internal error
  }
}

}  // namespace kiln::cli
