// Argument parsing and model loading for the kiln command.
#include "cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "codegen/kernel_library.h"
#include "graph/example.h"
#include "graph/file_io.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes/pipeline.h"
#include "graph/serialize.h"
#include "runtime/kernels.h"
#include "winograd_check.h"

namespace kiln::cli {

Args::Args(int argc, char** argv, int first, std::vector<std::string> value_flags,
           std::vector<std::string> bool_flags) {
  auto known = [](const std::vector<std::string>& v, const std::string& f) {
    return std::find(v.begin(), v.end(), f) != v.end();
  };
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positionals_.push_back(arg);
      continue;
    }
    std::string value;
    const size_t eq = arg.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (known(bool_flags, arg)) {
      if (inline_value) throw UsageError(arg + " takes no value");
      values_.emplace(arg, "1");
    } else if (known(value_flags, arg)) {
      if (!inline_value) {
        if (i + 1 >= argc) throw UsageError(arg + " needs a value");
        value = argv[++i];
      }
      values_.emplace(arg, value);
    } else {
      throw UsageError("unknown option '" + arg + "'");
    }
  }
}

bool Args::has(const std::string& flag) const { return values_.count(flag) > 0; }

std::string Args::get(const std::string& flag, const std::string& fallback) const {
  auto range = values_.equal_range(flag);
  if (range.first == range.second) return fallback;
  return std::prev(range.second)->second;  // the last one wins
}

std::vector<std::string> Args::get_all(const std::string& flag) const {
  std::vector<std::string> out;
  auto range = values_.equal_range(flag);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

int Args::get_int(const std::string& flag, int fallback, int lo, int hi) const {
  return has(flag) ? parse_int(flag, get(flag), lo, hi) : fallback;
}

int parse_int(const std::string& what, const std::string& s, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi)
    throw UsageError(what + " expects an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got '" + s + "'");
  return static_cast<int>(v);
}

int64_t parse_byte_size(const std::string& what, const std::string& s) {
  static const std::string kSuffixes = "KMGT";
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  const std::string suffix = s.substr(digits);
  const size_t unit = suffix.empty() ? 0 : kSuffixes.find(suffix) + 1;
  int64_t bytes = 0;
  bool ok = digits > 0 && digits <= 18 && (suffix.empty() || (suffix.size() == 1 && unit > 0));
  if (ok)
    ok = !__builtin_mul_overflow(std::stoll(s.substr(0, digits)), int64_t{1} << (10 * unit),
                                 &bytes) &&
         bytes > 0;
  if (!ok)
    throw UsageError(what + " expects a size in bytes, optionally with K, M, G or T (e.g. 512M, "
                     "4G), got '" + s + "'");
  return bytes;
}

std::string single_model(const Args& args) {
  if (args.positionals().empty()) throw UsageError("missing MODEL (an .onnx file or 'example')");
  if (args.positionals().size() > 1)
    throw UsageError("unexpected argument '" + args.positionals()[1] + "'");
  return args.positionals()[0];
}

Backend parse_backend_name(const std::string& flag, const std::string& name) {
  for (Backend b : {Backend::cpu, Backend::cuda, Backend::opencl})
    if (name == to_string(b)) return b;
  throw UsageError("unknown " + flag + " '" + name + "' (expected cpu, cuda or opencl)");
}

std::shared_ptr<const codegen::ScheduleDb> parse_backend(const Args& args, ModelOptions* options) {
  options->backend = parse_backend_name("--target", args.get("--target", "cpu"));
  options->fallback_to_cpu = args.has("--fallback");
  options->threads = args.get_int("--threads", 0, 1, 1024);
  std::shared_ptr<const codegen::ScheduleDb> db = schedule_db(args);
  options->generate_kernels = kernel_generator(db);
  if (args.has("--max-memory"))
    options->max_memory_bytes = parse_byte_size("--max-memory", args.get("--max-memory"));
  const std::string half = args.get("--half-width", "auto");
  if (half == "auto")
    options->half_width = HalfWidth::where_faster;
  else if (half == "on")
    options->half_width = HalfWidth::always;
  else if (half == "off")
    options->half_width = HalfWidth::never;
  else
    throw UsageError("--half-width takes auto, on or off, not '" + half + "'");
  return db;
}

void check_inputs_fit(const graph::Graph& g, const ModelOptions& options) {
  int64_t bytes = 0;
  for (graph::ValueId v : g.inputs) bytes += g.value(v).size_bytes();
  graph::check_memory_limit(bytes, options.max_memory_bytes, "the model's inputs");
}

void print_help(const char* help) {
  // Options several commands share, each a marker {NAME:INDENT} in their help: the option's
  // first line, then its description indented by INDENT.
  struct Shared {
    const char* name;
    const char* option;
    std::vector<const char*> lines;
  };
  static const Shared kShared[] = {
      {"input-shape",
       "--input-shape NAME=D0,D1,...",
       {"the shape of graph input NAME, for a model whose inputs have",
        "symbolic dimensions; repeat for several inputs. Fixed dimensions",
        "must be given their declared size; an input that shares a symbolic",
        "dimension with a given one takes its size. A dynamic batch (a free",
        "first dimension, the others fixed) is 1 unless given, with a note"}},
      {"half-width",
       "--half-width auto|on|off",
       {"float32 convolutions whose output channels are an odd multiple of 8",
        "(8, 24, 40, 72) on an AVX-512 target also get a kernel with 8-lane",
        "vectors where 16-lane tiles would compute a tenth more channels: auto",
        "(default) runs it where the CPU does a 512-bit multiply-add at half a",
        "256-bit one's rate (Zen 4), on runs it on any AVX-512 CPU, off never", "compiles it"}}};
  std::string text = help;
  for (const Shared& option : kShared) {
    const std::string marker = std::string("{") + option.name + ":";
    const size_t at = text.find(marker);
    if (at == std::string::npos) continue;
    const size_t end = text.find("}\n", at);
    const std::string indent(std::stoul(text.substr(at + marker.size())), ' ');
    std::string lines = std::string(option.option) + "\n";
    for (const char* line : option.lines) lines += indent + line + "\n";
    text.replace(at, end + 2 - at, lines);
  }
  std::fputs(text.c_str(), stdout);
}

InputShapes parse_input_shapes(const Args& args, const std::string& model,
                               const InputShapes& implied) {
  InputShapes shapes;
  for (const std::string& arg : args.get_all("--input-shape")) {
    const size_t eq = arg.rfind('=');  // names may hold '=', sizes never do
    const std::string what = "--input-shape " + arg;
    if (eq == std::string::npos || eq == 0)
      throw UsageError(what + ": expected NAME=D0,D1,... (e.g. input=1,3,224,224)");
    graph::Shape shape;
    std::stringstream dims(arg.substr(eq + 1));
    for (std::string d; std::getline(dims, d, ',');)
      shape.push_back(parse_int(what + ": a dimension", d, 1, 1 << 30));
    if (shape.empty() || arg.back() == ',')
      throw UsageError(what + ": expected NAME=D0,D1,... (e.g. input=1,3,224,224)");
    shapes.emplace_back(arg.substr(0, eq), std::move(shape));
  }
  std::error_code ec;
  if (model == "example" || !std::filesystem::is_regular_file(model, ec)) return shapes;
  for (const auto& [name, shape] : implied) {
    bool given = false;
    for (const auto& s : shapes) given = given || s.first == name;
    if (given) continue;
    std::fprintf(stderr,
                 "note: input '%s' has free dimensions; compiling for %s, its input file's shape\n",
                 graph::printable(name).c_str(), graph::to_string(shape).c_str());
    shapes.emplace_back(name, shape);
  }
  for (auto& [name, shape] :
       graph::onnx::default_batch_shapes(graph::onnx::read_model_file(model), shapes, 1)) {
    std::fprintf(stderr,
                 "note: input '%s' has a dynamic batch; compiling for batch 1, shape %s "
                 "(--input-shape %s=... for another)\n",
                 graph::printable(name).c_str(), graph::to_string(shape).c_str(),
                 graph::printable(name).c_str());
    shapes.emplace_back(name, std::move(shape));
  }
  return shapes;
}

graph::Graph load_model(const std::string& model, const InputShapes& shapes) {
  if (model == "example") {
    if (!shapes.empty())
      throw UsageError("--input-shape binds symbolic dimensions of an ONNX model; the built-in "
                       "example has none (kiln example --shape sets its size)");
    return graph::reference_example();
  }
  if (!std::filesystem::exists(model)) throw graph::Error("no such file: " + model);
  if (std::filesystem::is_directory(model)) throw graph::Error(model + " is a directory, not an ONNX file");
  graph::onnx::ImportOptions options;
  options.input_shapes = shapes;
  return graph::onnx::import_model(model, options);
}

std::string cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/kiln";  // the spec: absolute paths only
  const char* home = std::getenv("HOME");
  if (home && home[0]) return std::string(home) + "/.cache/kiln";
  return "";
}

std::shared_ptr<const codegen::ScheduleDb> schedule_db(const Args& args) {
  if (!args.has("--schedules")) return nullptr;
  const std::string path = args.get("--schedules");
  if (path.empty()) throw UsageError("--schedules needs a file name");
  if (!std::filesystem::is_regular_file(path))
    throw graph::Error("--schedules " + path + ": no such file (kiln tune writes one)");
  return std::make_shared<const codegen::ScheduleDb>(codegen::ScheduleDb::load(path));
}

int parse_cpu_target(const std::string& flag, const std::string& name) {
  const std::vector<std::string>& targets = runtime::cpu_targets();
  int index = -1;
  for (size_t i = 0; i < targets.size() && index < 0; ++i) {
    const std::string& t = targets[i];
    const bool has512 = t.find("avx512") != std::string::npos;
    const bool has2 = t.find("avx2") != std::string::npos;
    if (name == t || (name == "avx512" && has512) || (name == "avx2" && has2 && !has512) ||
        ((name == "baseline" || name == "sse41") && i + 1 == targets.size()))
      index = static_cast<int>(i);
  }
  if (index < 0) {
    std::string list;
    for (const std::string& t : targets) list += "\n  " + t;
    throw UsageError("unknown " + flag + " '" + name +
                     "' (expected avx512, avx2, baseline or one of this build's targets:" + list + ")");
  }
  if (!runtime::cpu_target_supported(index))
    throw graph::Error(flag + " " + name + ": this CPU lacks features of " +
                       targets[static_cast<size_t>(index)]);
  return index;
}

KernelGenerator kernel_generator(std::shared_ptr<const codegen::ScheduleDb> db) {
  codegen::CodegenOptions o;
  o.cache_dir = cache_dir();
  o.progress = [](size_t i, size_t n, const std::string& kernel, bool cached) {
    std::fprintf(stderr, "[codegen] kernel %zu/%zu: %s%s\n", i + 1, n,
                 graph::printable(kernel).c_str(), cached ? " (cached)" : "");
  };
  if (!db) return codegen::kernel_generator(o);
  o.schedules = db->lookup();
  const KernelGenerator generate = codegen::kernel_generator(o);
  return [generate, db](const std::vector<graph::KernelSpec>& specs, const KernelRequest& request) {
    if (request.backend == Backend::cpu) {
      const int best = runtime::best_cpu_target();
      const std::string target = !request.cpu_target.empty() ? request.cpu_target
                                 : best >= 0 ? runtime::cpu_targets()[static_cast<size_t>(best)]
                                             : "";
      for (const std::string& line : codegen::stale_records(*db, specs, {target}))
        std::fprintf(stderr, "[schedules] stale: %s\n", graph::printable(line).c_str());
    }
    return generate(specs, request);
  };
}


graph::Precision parse_precision_name(const std::string& name, const std::string& accepted) {
  try {
    return graph::parse_precision(name);
  } catch (const graph::Error&) {
    throw UsageError("--precision takes " + accepted + ", not '" + name + "'");
  }
}

graph::Precision parse_precision(const Args& args) {
  return parse_precision_name(args.get("--precision", "f32"), "f32 or bf16");
}

graph::Graph expose_all(graph::Graph g) {
  for (const graph::Node& n : g.nodes())
    if (!g.is_graph_output(n.outputs[0])) g.outputs.push_back(n.outputs[0]);
  return g;
}

bool has_bf16(const graph::Graph& optimized) {
  for (const graph::Node& n : optimized.nodes())
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op); c && c->bf16) return true;
  return false;
}

graph::PipelineOptions pass_options(graph::Precision precision) {
  graph::PipelineOptions o;
  o.precision = precision;
  o.bf16_amx = precision == graph::Precision::bf16 && runtime::amx_usable();
  return o;
}

bool runs_bf16_dot_products(int cpu_target) {
  const int t = cpu_target >= 0 ? cpu_target : runtime::best_cpu_target();
  return t >= 0 && runtime::bf16_dot_products_supported(t);
}

std::string precision_note(const graph::Graph& optimized, int cpu_target) {
  int bf16 = 0, convs = 0;
  for (const graph::Node& n : optimized.nodes())
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op)) ++convs, bf16 += c->bf16;
  if (bf16 == 0) return "precision: f32";
  const bool native = runs_bf16_dot_products(cpu_target);
  const std::string how =
      native && runtime::amx_usable()
          ? "AMX tiles (tdpbf16ps) where the layer takes the amx schedule, else AVX512_BF16 "
            "dot products (vdpbf16ps)"
      : native ? "dot products on AVX512_BF16 (vdpbf16ps)"
               : "this CPU target has no AVX512_BF16: the same bf16 products as float32 "
                 "multiply-adds (correct, but slower than --precision f32)";
  return "precision: bf16 in " + std::to_string(bf16) + " of " + std::to_string(convs) +
         " convolutions (the others, and every other op, f32); " + how;
}

namespace {

// compile_cached's entry for these arguments: its path, "" without a cache directory.
std::string compile_cache_path(const std::string& model, const InputShapes& shapes,
                               const std::string& target, graph::Precision precision,
                               const OutputCheck* check) {
  std::string bytes = "builtin:" + model;
  if (model != "example") {
    if (!std::filesystem::exists(model)) throw graph::Error("no such file: " + model);
    bytes = graph::onnx::read_model_file(model);
  }
  uint64_t model_hash = graph::fnv1a(bytes);
  // Weights kept beside the model are part of it: a changed data file is another model.
  for (const std::string& f : graph::onnx::external_data_files(model, bytes)) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(f, ec))
      model_hash = graph::fnv1a(graph::read_whole_file(f, "external data file"), model_hash);
  }
  std::string shape_key;  // the same file at another batch is another graph
  for (const auto& [name, shape] : shapes) shape_key += name + "=" + graph::to_string(shape) + ";";
  std::ostringstream key;
  key << std::hex << model_hash << "-"
      << graph::fnv1a(target + "|" KILN_VERSION "|" + std::to_string(graph::kGraphFormatVersion) +
                      "|" + codegen::generator_identity() + "|" + shape_key + "|" +
                      graph::to_string(precision) +
                      (pass_options(precision).bf16_amx ? "|amx" : "") + "|" +
                      (check ? "checked:" + (check->db ? check->db->text() : "") : "unchecked"));
  const std::string dir = cache_dir();
  return dir.empty() ? "" : dir + "/compiled/" + key.str() + ".kiln";
}

// The graph at `path` in the compile cache, if there is one (a damaged entry: none; the next
// compile overwrites it).
std::optional<graph::Graph> read_cached(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    return graph::read_graph_file(path);
  } catch (const graph::Error&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<graph::Graph> cached_graph(const std::string& model, const InputShapes& shapes,
                                         const std::string& target, graph::Precision precision,
                                         const OutputCheck* check) {
  return read_cached(compile_cache_path(model, shapes, target, precision, check));
}

graph::Graph compile_cached(const std::string& model, const InputShapes& shapes,
                            const std::string& target, graph::Precision precision, bool* from_cache,
                            const OutputCheck* check, const graph::Graph* imported) {
  const std::string path = compile_cache_path(model, shapes, target, precision, check);
  *from_cache = false;
  if (std::optional<graph::Graph> g = read_cached(path)) {
    *from_cache = true;
    return std::move(*g);
  }
  const std::string dir = cache_dir();
  std::error_code ec;
  graph::Graph optimized =
      graph::run_passes(imported ? *imported : load_model(model, shapes), pass_options(precision));
  if (check)
    optimized = check_winograd_tiles(std::move(optimized), check->options,
                                     {check->db.get(), [](const std::string& line) {
                                        std::fprintf(stderr, "[winograd] %s\n", line.c_str());
                                      }});
  if (!path.empty()) {
    std::filesystem::create_directories(dir + "/compiled", ec);
    try {
      graph::write_graph_file(optimized, path);
    } catch (const graph::Error&) {
      // A read-only or full cache directory only costs the next run a recompile.
    }
  }
  return optimized;
}

}  // namespace kiln::cli
