// `kiln run`: runs a model on .npy (or seeded random) inputs, writes each output as .npy, and
// with --check compares every kernel's result with the unfused reference interpreter.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "cli.h"
#include "commands.h"
#include "graph/builder.h"
#include "graph/kernel_spec.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "graph/shape_inference.h"
#include "kiln/runtime.h"
#include "npy.h"
#include "winograd_check.h"

namespace kiln::cli {
namespace {

constexpr const char* kHelp = R"(usage: kiln run MODEL [options]

Imports MODEL (an .onnx file, or "example" for the built-in Conv + BatchNorm + ReLU model),
optimizes it and checks its Winograd layers on its outputs (float32; a [winograd] line on
stderr per measurement, and layers that take the outputs out of tolerance capped at F(2x2) or
direct convolution: docs/tuning.md), or takes that graph from the compile cache,
$XDG_CACHE_HOME/kiln or ~/.cache/kiln, keyed by the model's bytes, the target, the schedule
database and Kiln's build; compiles the kernels
generated for its shapes (or loads them from the kernel cache in the same directory; one
[codegen] line on stderr per kernel compiled), runs it once plus 5 timed runs, and writes each
output as DIR/<name>.npy in the model's declared layout (NCHW for images). Characters of the output name other than
[A-Za-z0-9._-] become '_'. Prints each output's name, shape and file, and the time of the first
run and the median of the timed runs. Nothing is written when the command fails.

options:
  --input NAME=FILE.npy   the input NAME (repeat for several inputs); a little-endian float32
                          ('<f4'), C-order .npy file (version 1.0 or 2.0) of exactly the
                          input's declared shape (float16 '<f2' and float64 '<f8' files are
                          read as float32: widened exactly, rounded to nearest); an input
                          with symbolic dimensions that --input-shape does not give is
                          compiled for the file's shape. Names, shapes and headers are
                          checked before the model is compiled
  --input FILE.npy        the same, for a model with a single input
                          (inputs not given: seeded random values in [-1, 1))
  {input-shape:26}
  --output-dir DIR        where the outputs go (default: the current directory; created)
  --target cpu|cuda|opencl
                          where the kernels run (default cpu); opencl runs the GPU schedules
                          through OpenCL (e.g. pocl on the CPU), to check them without a GPU
  --fallback              with a GPU target: use the CPU if no GPU or driver is usable
  --threads N             worker threads (default: one per core)
  --schedules FILE        a schedule database from `kiln tune`: kernels with a record for
                          their signature and this CPU's target get the tuned schedule
  --max-memory SIZE       refuse a model whose arena (intermediate tensors and outputs) or
                          inputs need more than SIZE bytes (e.g. 512M, 4G; default: this
                          machine's physical memory), before allocating them
  {half-width:26}
  --seed N                seed of the random inputs (default 1)
  --precision f32|bf16    the convolutions' multiply-adds: f32 (default), or bf16 where a
                          convolution can (dense, one group): input and weights
                          rounded to bfloat16, float32 sums and epilogues. Prints
                          whether this CPU runs them on AVX512_BF16 or converts them
  --check                 also run every kernel against the unfused reference interpreter and
                          print, per kernel, the max abs error, max rel error
                          (|got - ref| / max(|ref|, 1e-4)) and normwise error (max abs err /
                          max |ref|) of its output, accumulated from the model's input on; a
                          model output beyond rtol 1e-3 / atol 1e-4 (times its largest
                          magnitude where that exceeds 1), or another kernel's output beyond
                          a normwise 1e-3 (it carries the rounding of every kernel before
                          it), is flagged OUT OF TOLERANCE, and then the command exits 1
                          without writing the outputs. With bf16 the
                          reference stays float32: each kernel's error relative to its
                          output's largest magnitude (normwise, accumulated from the model's
                          input on) is printed, and the model's outputs must be within 2e-2;
                          each bf16 convolution also shows the bound of its own rounding,
                          (2u + u^2) max_co sum|w| max|x| over max|out| with u = 2^-8
                          (before its epilogue)
  -h, --help              this text
)";

constexpr int kTimedRuns = 5;
// bf16 models: the largest error of a kernel's output relative to its largest magnitude.
constexpr double kBf16Tolerance = 2e-2;

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;  // raw --input values
  InputShapes input_shapes;
  std::string output_dir = ".";
  ModelOptions options;
  std::shared_ptr<const codegen::ScheduleDb> schedules;  // --schedules, or nullptr
  uint64_t seed = 1;
  bool check = false;
  graph::Precision precision = graph::Precision::f32;
};

// The shapes of the --input files of the model's inputs with free dimensions (a dynamic batch,
// an image of any size), by input name: what those inputs are compiled for unless --input-shape
// names them. Arguments that name no input, and files that are not readable .npy files, are
// left to load_inputs, which reports them.
InputShapes input_file_shapes(const std::string& model, const std::vector<std::string>& raw) {
  std::error_code ec;
  if (raw.empty() || model == "example" || !std::filesystem::is_regular_file(model, ec)) return {};
  const auto inputs = graph::onnx::graph_inputs_with_free_dims(graph::onnx::read_model_file(model));
  InputShapes shapes;
  for (const std::string& arg : raw) {
    const size_t eq = arg.find('=');
    std::string name, file = arg;
    for (const auto& [input, free] : inputs)
      if (eq != std::string::npos && input == arg.substr(0, eq))
        name = input, file = arg.substr(eq + 1);
    if (name.empty() && inputs.size() == 1) name = inputs[0].first;
    bool free = false, seen = false;
    for (const auto& [input, f] : inputs) free = free || (input == name && f);
    for (const auto& [input, shape] : shapes) seen = seen || input == name;
    if (!free || seen) continue;  // an input given twice: load_inputs says so
    try {
      shapes.emplace_back(name, open_npy(file).shape);
    } catch (const graph::Error&) {
      // not a readable .npy file: load_inputs reports it, naming the file
    }
  }
  return shapes;
}

RunArgs parse(const Args& args) {
  RunArgs a;
  a.model = single_model(args);
  a.inputs = args.get_all("--input");
  a.input_shapes = parse_input_shapes(args, a.model, input_file_shapes(a.model, a.inputs));
  a.output_dir = args.get("--output-dir", ".");
  if (a.output_dir.empty()) throw UsageError("--output-dir needs a directory");
  a.schedules = parse_backend(args, &a.options);
  a.seed = static_cast<uint64_t>(args.get_int("--seed", 1, 0, 1 << 30));
  a.check = args.has("--check");
  a.precision = parse_precision(args);
  if (a.precision == graph::Precision::bf16 && a.options.backend != Backend::cpu)
    throw UsageError("--precision bf16 is for the cpu target only");
  return a;
}

std::string input_names(const graph::Graph& g) {
  std::string s;
  for (graph::ValueId v : g.inputs) s += (s.empty() ? "'" : ", '") + g.value(v).name + "'";
  return s;
}

// Maps each --input to a graph input index and file. NAME=FILE when NAME is an input of the
// model; a bare FILE (or a path that merely contains '=') only for a single-input model.
std::map<size_t, std::string> bind_input_files(const graph::Graph& g,
                                               const std::vector<std::string>& raw) {
  std::map<size_t, std::string> files;
  for (const std::string& arg : raw) {
    size_t index = g.inputs.size();
    std::string file = arg;
    const size_t eq = arg.find('=');
    for (size_t i = 0; eq != std::string::npos && i < g.inputs.size(); ++i)
      if (g.value(g.inputs[i]).name == arg.substr(0, eq)) index = i, file = arg.substr(eq + 1);
    if (index == g.inputs.size()) {
      if (eq != std::string::npos && !std::filesystem::exists(arg))
        throw UsageError("--input " + arg + ": the model has no input '" + arg.substr(0, eq) +
                         "' (its inputs: " + input_names(g) + ")");
      if (g.inputs.size() != 1)
        throw UsageError("--input " + arg +
                         ": name the input (NAME=FILE); the model's inputs are " + input_names(g));
      index = 0;
    }
    if (!files.emplace(index, file).second)
      throw UsageError("input '" + g.value(g.inputs[index]).name + "' is given twice");
  }
  return files;
}

// The --input file of graph input `v`, its header read and its shape checked.
NpyFile open_input_file(const graph::Value& v, const std::string& path) {
  NpyFile file = open_npy(path);
  if (file.shape != v.shape)
    throw graph::Error("input '" + v.name + "' must have shape " + graph::to_string(v.shape) +
                       ", got " + graph::to_string(file.shape) + " from " + path);
  return file;
}

// What load_inputs checks before it reads any data (names, headers, shapes), for the imported
// model: a bad --input then fails before the compile, which may take minutes.
void check_input_files(const graph::Graph& g, const RunArgs& a) {
  for (const auto& [index, path] : bind_input_files(g, a.inputs))
    open_input_file(g.value(g.inputs[index]), path);
}

// How a file's values became the float32 the model computes in.
const char* conversion(const std::string& dtype) {
  return dtype == "<f2"   ? " (float16, widened to float32)"
         : dtype == "<f8" ? " (float64, rounded to float32)"
                          : "";
}

std::vector<graph::Tensor> load_inputs(const graph::Graph& g, const RunArgs& a) {
  const std::map<size_t, std::string> files = bind_input_files(g, a.inputs);
  check_inputs_fit(g, a.options);
  std::vector<graph::Tensor> inputs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const graph::Value& v = g.value(g.inputs[i]);
    auto it = files.find(i);
    if (it == files.end()) {
      inputs.push_back(
          {v.shape, v.layout,
           graph::random_uniform(graph::num_elements(v.shape), -1.0f, 1.0f, a.seed + i)});
      std::printf("input  %s %s: random in [-1, 1), seed %llu\n", graph::printable(v.name).c_str(),
                  graph::to_string(v.shape).c_str(), static_cast<unsigned long long>(a.seed + i));
      continue;
    }
    const NpyFile file = open_input_file(v, it->second);
    inputs.push_back({v.shape, v.layout, read_npy_data(file)});
    std::printf("input  %s %s: %s%s\n", graph::printable(v.name).c_str(),
                graph::to_string(v.shape).c_str(), graph::printable(it->second).c_str(),
                conversion(file.dtype));
  }
  return inputs;
}

std::string sanitize(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  if (s.empty() || s == "." || s == "..") s = "_" + s;  // never the directory itself
  return s;
}

bool is_image(graph::Layout l) { return l == graph::Layout::nchw || l == graph::Layout::nhwc; }

// An output re-laid-out to `want` where both are image layouts, else as it is: one copy.
graph::Tensor fetch(const TensorView& v, graph::Layout want) {
  return graph::to_layout(v.data, v.shape, v.layout,
                          is_image(v.layout) && is_image(want) ? want : v.layout);
}

struct CheckRow {
  std::string kernel;
  bool output = false;  // a model output (judged elementwise in float32)
  double max_abs = 0, max_rel = 0;
  double normwise = 0;  // max |got - ref| / max |ref|
  double bf16_bound = -1;  // a bf16 convolution's own rounding bound (normwise), else < 0
  bool compared = false, ok = true;
};

// The reference value a kernel's output is compared with: the original tensor of the same
// name (fusion keeps the last fused op's output name). A layout transform the passes inserted
// has a new name; its value is its input's, re-laid-out.
std::string reference_name(const graph::KernelSpec& k) {
  if (const auto* t = std::get_if<graph::LayoutKernelSpec>(&k)) return t->input.name;
  const auto* o = std::get_if<graph::OpKernelSpec>(&k);
  if (o && std::holds_alternative<graph::LayoutTransform>(o->op)) return o->inputs[0].name;
  return "";
}

CheckRow compare(const std::string& kernel, const graph::Tensor& ref, const TensorView& view,
                 bool bf16, bool output) {
  CheckRow r{graph::printable(kernel), output};
  const graph::Tensor got = fetch(view, ref.layout);
  r.compared = true;
  if (got.shape != ref.shape) {
    r.ok = false, r.max_abs = r.max_rel = INFINITY;
    return r;
  }
  r.max_abs = graph::max_abs_diff(got.data, ref.data);
  double largest = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {  // NaN where the reference has NaN is no error
    r.max_rel = std::max(r.max_rel, graph::element_error(got.data[i], ref.data[i]) /
                                        std::max<double>(std::fabs(ref.data[i]), kAtol));
    if (std::isfinite(ref.data[i])) largest = std::max<double>(largest, std::fabs(ref.data[i]));
  }
  r.normwise = r.max_abs / std::max(largest, kAtol);
  // float32 resolves a tensor of magnitude M to about M * 6e-8, so a fixed atol would flag any
  // correct kernel on large values (pixels in 0..255, say) wherever an element cancels to near
  // zero: the atol scales with the output's largest magnitude where that exceeds 1.
  // A tensor inside the model carries the rounding of every kernel before it, which a deep
  // network amplifies (torchvision's Inception-v3, direct convolutions only: 25 of its later
  // tensors 1e-3 off somewhere while its logits were within the tolerance): it is judged
  // normwise, and the model's outputs elementwise.
  if (bf16)
    r.ok = r.normwise <= kBf16Tolerance;
  else if (output)
    r.ok = output_error_over_tolerance(got.data, ref.data) <= 1.0;
  else
    r.ok = r.normwise <= kRtol;
  return r;
}

// The bound of a bf16 convolution's own rounding of its input x and weights w (exact inputs
// assumed): |error| <= (2u + u^2) sum |w| |x| <= (2u + u^2) max_co sum |w| max |x|, u = 2^-8,
// relative to the largest magnitude of its output `out` (the epilogue after the sums, ReLU or a
// pooling, does not enlarge it; a SiLU step by at most 1.1x).
double bf16_rounding_bound(const graph::Graph& g, const graph::ConvKernelSpec& k,
                           const std::vector<float>& x, const graph::Tensor& out) {
  const graph::Value& w = g.value(k.weights.value);  // HWIO [Kh, Kw, Ci, Co]
  if (!w.data) return -1;
  const int64_t co = w.shape[3];
  std::vector<double> row(static_cast<size_t>(co), 0.0);
  for (size_t i = 0; i < w.data->size(); ++i) row[i % static_cast<size_t>(co)] += std::fabs((*w.data)[i]);
  double max_x = 0, max_out = 0;
  for (float v : x) max_x = std::max<double>(max_x, std::fabs(v));
  for (float v : out.data) max_out = std::max<double>(max_out, std::fabs(v));
  const double u = std::ldexp(1.0, -8);
  return (2 * u + u * u) * *std::max_element(row.begin(), row.end()) * max_x / std::max(max_out, kAtol);
}

std::vector<CheckRow> check_kernels(const graph::Graph& original, const graph::Graph& optimized,
                                    const std::vector<graph::Tensor>& inputs,
                                    const ModelOptions& options) {
  const graph::Graph ref_graph = expose_all(original);
  const std::vector<graph::Tensor> ref_values = graph::run_reference(ref_graph, inputs);
  std::map<std::string, const graph::Tensor*> ref;
  for (size_t i = 0; i < inputs.size(); ++i)
    ref[original.value(original.inputs[i]).name] = &inputs[i];
  for (size_t i = 0; i < ref_values.size(); ++i)
    ref[ref_graph.value(ref_graph.outputs[i]).name] = &ref_values[i];
  // Tensors the logical rewrites made (a MatMul's 1x1 convolution, an op moved above a
  // Transpose) have no namesake in the original: those are compared with the reference run of
  // the graph as those rewrites left it, which the final outputs tie back to the original.
  graph::PipelineOptions logical_stage;
  logical_stage.stop_after = "sink_transposes";
  const graph::Graph logical = expose_all(graph::run_passes(original, logical_stage));
  const std::vector<graph::Tensor> logical_values = graph::run_reference(logical, inputs);
  for (size_t i = 0; i < logical_values.size(); ++i)
    ref.emplace(logical.value(logical.outputs[i]).name, &logical_values[i]);

  const graph::Graph probe_graph = expose_all(optimized);
  Model probe(probe_graph, options);
  const Status s = probe.run(inputs);
  if (!s) throw graph::Error(s.message());
  const bool bf16 = has_bf16(optimized);  // errors are judged normwise, at the outputs
  std::set<std::string> outputs;
  for (graph::ValueId v : original.outputs) outputs.insert(original.value(v).name);
  std::map<uint32_t, size_t> out_index;  // value id -> output index
  for (size_t i = 0; i < probe_graph.outputs.size(); ++i)
    out_index[probe_graph.outputs[i].index] = i;

  std::vector<CheckRow> rows;
  for (const graph::KernelSpec& k : probe.kernels()) {
    const std::string& name = graph::kernel_name(k);
    const graph::TensorDesc out = std::visit([](const auto& s) { return s.output; }, k);
    std::string want = reference_name(k);
    if (want.empty()) want = out.name;
    auto it = ref.find(want);
    if (it == ref.end()) {
      rows.push_back(CheckRow{graph::printable(name)});
      continue;
    }
    rows.push_back(compare(name, *it->second, probe.output(out_index.at(out.value.index)), bf16,
                           outputs.count(want) > 0));
    // A bf16 model is judged by its outputs: an intermediate tensor's error, relative to its
    // own largest magnitude, is reported, not judged (a small tensor after many bf16 layers can
    // exceed the threshold while the outputs are well within it).
    if (bf16 && !outputs.count(want)) rows.back().ok = true;
    // The bound takes the input as this run computed it (its name may be new: an NHWC copy).
    const auto* conv = std::get_if<graph::ConvKernelSpec>(&k);
    if (conv && conv->bf16 && conv->pre.empty()) {
      const auto in = out_index.find(conv->input.value.index);
      const auto graph_in = std::find(optimized.inputs.begin(), optimized.inputs.end(), conv->input.value);
      std::vector<float> x;
      if (in != out_index.end()) {
        const TensorView v = probe.output(in->second);
        x.assign(v.data, v.data + graph::num_elements(v.shape));
      } else if (graph_in != optimized.inputs.end()) {
        x = inputs[static_cast<size_t>(graph_in - optimized.inputs.begin())].data;
      }
      if (!x.empty()) rows.back().bf16_bound = bf16_rounding_bound(optimized, *conv, x, *it->second);
    }
  }
  return rows;
}

int print_check(const std::vector<CheckRow>& rows, bool bf16) {
  size_t w = 6;
  for (const CheckRow& r : rows) w = std::max(w, r.kernel.size());
  if (bf16) {
    std::printf("\ncheck of the bf16 model against the float32 unfused reference (errors from the "
                "input on; normwise = max abs err / max |ref|, at most %g at the model's "
                "outputs):\n", kBf16Tolerance);
    std::printf("  %-*s  %13s  %13s  %13s  %13s\n", static_cast<int>(w), "kernel", "max abs err",
                "max rel err", "normwise", "bf16 bound");
  } else {
    std::printf(
        "\ncheck against the unfused reference (errors from the input on; the model's "
        "outputs within rtol %g, atol %g x max(1, max |ref|); the other kernels' within "
        "a normwise %g, max abs err / max |ref|):\n",
        kRtol, kAtol, kRtol);
    std::printf("  %-*s  %13s  %13s  %13s\n", static_cast<int>(w), "kernel", "max abs err",
                "max rel err", "normwise");
  }
  int bad = 0;
  for (const CheckRow& r : rows) {
    if (!r.compared) {
      std::printf(
          "  %-*s  %13s  %13s  %13s  not compared (no tensor of that name in the imported graph)\n",
          static_cast<int>(w), r.kernel.c_str(), "-", "-", "-");
      continue;
    }
    bad += !r.ok;
    std::printf("  %-*s  %13.3e  %13.3e  %13.3e", static_cast<int>(w), r.kernel.c_str(), r.max_abs,
                r.max_rel, r.normwise);
    if (bf16) {
      if (r.bf16_bound >= 0)
        std::printf("  %13.3e", r.bf16_bound);
      else
        std::printf("  %13s", "-");
    }
    std::printf("%s\n", !r.ok ? "  OUT OF TOLERANCE" : r.output ? "  (model output: within)" : "");
  }
  return bad;
}

// Writes every output to a temp name first and renames only when all are written, so a
// failure leaves no file that looks like a result. Outputs are written from the model's arena
// in their declared layout: no copy of an output unless it has to be re-laid-out, and then
// one at a time.
void write_outputs(const Model& model, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw graph::Error("cannot create the output directory '" + dir + "'" +
                       (ec ? ": " + ec.message() : ""));
  std::vector<std::pair<std::string, std::string>> done;  // temp, final
  std::vector<graph::Shape> shapes;                        // as written
  std::set<std::string> used;
  try {
    for (size_t i = 0; i < model.num_outputs(); ++i) {
      const TensorView v = model.output(i);
      std::string base = sanitize(v.name);
      for (int n = 2; !used.insert(base).second; ++n)
        base = sanitize(v.name) + "_" + std::to_string(n);
      const std::string final_path = (std::filesystem::path(dir) / (base + ".npy")).string();
      done.emplace_back(final_path + ".tmp" + std::to_string(::getpid()), final_path);
      const graph::Layout want = graph::logical_layout(v.shape.size());
      if (v.layout == want || !is_image(v.layout) || !is_image(want)) {
        write_npy(done.back().first, v.shape, v.data);
        shapes.push_back(v.shape);
      } else {
        const graph::Tensor t = graph::to_layout(v.data, v.shape, v.layout, want);
        write_npy(done.back().first, t.shape, t.data.data());
        shapes.push_back(t.shape);
      }
    }
  } catch (...) {
    for (const auto& p : done) std::filesystem::remove(p.first, ec);
    throw;
  }
  for (size_t i = 0; i < done.size(); ++i) {
    std::filesystem::rename(done[i].first, done[i].second, ec);
    if (ec) throw graph::Error("cannot write '" + done[i].second + "': " + ec.message());
    std::printf("output %s %s -> %s\n", graph::printable(model.output(i).name).c_str(),
                graph::to_string(shapes[i]).c_str(), graph::printable(done[i].second).c_str());
  }
}

double run_ms(Model& model, const std::vector<graph::Tensor>& inputs) {
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = model.run(inputs);
  const auto t1 = std::chrono::steady_clock::now();
  if (!s) throw graph::Error(s.message());
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

int run(const RunArgs& a) {
  std::error_code ec;  // checked before the run, which may be slow, not only after it
  if (std::filesystem::exists(a.output_dir, ec) && !std::filesystem::is_directory(a.output_dir, ec))
    throw graph::Error("output directory '" + a.output_dir + "' exists and is not a directory");
  bool cached = false;
  const auto t0 = std::chrono::steady_clock::now();
  const OutputCheck check{a.options, a.schedules};  // float32: bf16 has a tolerance of its own
  const OutputCheck* checked = a.precision == graph::Precision::f32 ? &check : nullptr;
  const std::string target = to_string(a.options.backend);
  const graph::Graph optimized = [&] {
    if (std::optional<graph::Graph> g =
            cached_graph(a.model, a.input_shapes, target, a.precision, checked)) {
      cached = true;
      return std::move(*g);
    }
    // --input files are checked against the imported model before the compile (whose Winograd
    // output check compiles kernels), so a wrong name, shape or file fails in a moment.
    const graph::Graph imported = load_model(a.model, a.input_shapes);
    check_input_files(imported, a);
    return compile_cached(a.model, a.input_shapes, target, a.precision, &cached, checked,
                          &imported);
  }();
  const double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Graph inputs and output names survive the passes; outputs are written in logical order.
  const std::vector<graph::Tensor> inputs = load_inputs(optimized, a);
  const auto t1 = std::chrono::steady_clock::now();
  Model model(optimized, a.options);  // generates the kernels the model needs, or loads them
  const double kernels_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  std::printf("model  %s: %zu kernels on %s%s (%s in %.0f ms, kernels ready in %.0f ms)\n",
              graph::printable(a.model).c_str(), model.kernels().size(), to_string(model.backend()),
              model.fallback_reason().empty() ? "" : " (fell back to the CPU)",
              cached ? "compiled graph from the cache" : "compiled", compile_ms, kernels_ms);
  if (a.precision == graph::Precision::bf16)
    std::printf("%s\n", precision_note(optimized, a.options.cpu_target).c_str());

  const double first = run_ms(model, inputs);
  std::vector<double> ms;
  for (int i = 0; i < kTimedRuns; ++i) ms.push_back(run_ms(model, inputs));
  std::sort(ms.begin(), ms.end());
  std::printf("time   first run %.3f ms, median %.3f ms over %d runs\n", first, ms[ms.size() / 2],
              kTimedRuns);

  if (a.check) {
    const std::vector<CheckRow> rows = check_kernels(load_model(a.model, a.input_shapes), optimized, inputs, a.options);
    if (const int bad = print_check(rows, has_bf16(optimized))) {
      std::fprintf(stderr, "kiln run: %d of %zu kernels out of tolerance; outputs not written\n",
                   bad, rows.size());
      return 1;
    }
  }
  write_outputs(model, a.output_dir);  // the last run's outputs: every run computes the same
  return 0;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  const Args args(argc, argv, 2,
                  {"--input", "--output-dir", "--target", "--threads", "--seed", "--max-memory",
                   "--schedules", "--half-width", "--input-shape", "--precision"},
                  {"--fallback", "--check"});
  if (args.help()) {
    print_help(kHelp);
    return 0;
  }
  return run(parse(args));
}

}  // namespace kiln::cli
