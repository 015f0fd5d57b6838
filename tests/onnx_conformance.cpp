// ONNX conformance: imports every model under one of ONNX's backend test suites (node by
// default; pytorch-converted and pytorch-operator are the exporter's output), compiles it with
// the default passes and runs it on Kiln's CPU runtime (or, with --reference, the reference
// interpreter), and compares with the expected outputs of test_data_set_0.
//
// Usage: kiln_onnx_conformance [--reference] [--verbose] [--filter SUBSTR] [--write-passing]
//                              [DATA_DIR [SKIP_LIST [PASSING_LIST]]]
// Exit status 1 when any test fails (a test Kiln skips must be in the skip list or use an op or
// dtype Kiln does not take), when the tests that pass are not exactly those of the passing list
// (a test that stopped passing, e.g. because its op was dropped, or one that newly passes and
// must be added), or when the test data is missing; 2 on bad usage; else 0.
// --write-passing rewrites the passing list from this run instead of comparing with it.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/kernel_library.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "onnx/onnx_pb.h"

#ifndef KILN_ONNX_NODE_DATA
#define KILN_ONNX_NODE_DATA "/usr/share/libonnx-testdata/data/node"
#endif
#ifndef KILN_ONNX_SKIP_LIST
#define KILN_ONNX_SKIP_LIST "onnx_conformance_skips.txt"
#endif
#ifndef KILN_ONNX_PASSING_LIST
#define KILN_ONNX_PASSING_LIST "onnx_conformance_passing.txt"
#endif

namespace {

namespace fs = std::filesystem;
using kiln::graph::Layout;
using kiln::graph::Tensor;

constexpr double kRtol = 1e-3, kAtol = 1e-5;

struct Options {
  bool reference = false, verbose = false, write_passing = false;
  std::string filter, data_dir = KILN_ONNX_NODE_DATA, skip_list = KILN_ONNX_SKIP_LIST,
                      passing_list = KILN_ONNX_PASSING_LIST;
};

enum class Result { pass, fail, skip };
struct Outcome {
  Result result;
  std::string reason;
};

// A failure at `stage` ("import", "passes", "model", "run", "compare").
struct StageError : std::runtime_error {
  StageError(const std::string& stage, const std::string& what)
      : std::runtime_error(stage + ": " + what) {}
};

template <typename F>
auto at_stage(const std::string& stage, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const StageError&) {
    throw;
  } catch (const std::exception& e) {
    throw StageError(stage, e.what());
  }
}

// "test_name  # reason" per line; '#' starts a comment, blank lines are ignored.
std::map<std::string, std::string> read_skip_list(const std::string& path) {
  std::map<std::string, std::string> skips;
  std::ifstream in(path);
  if (!in) {
    std::cerr << "warning: no skip list at " << path << "\n";
    return skips;
  }
  std::string line;
  while (std::getline(in, line)) {
    const size_t hash = line.find('#');
    std::string reason = hash == std::string::npos ? "" : line.substr(hash + 1);
    std::istringstream name_part(line.substr(0, hash));
    std::string name;
    if (!(name_part >> name)) continue;
    reason.erase(0, reason.find_first_not_of(" \t"));
    skips[name] = reason.empty() ? "in the skip list" : "skip list: " + reason;
  }
  return skips;
}

bool is_initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return true;
  return false;
}

// Graph inputs that node tests use for what Kiln compiles in, bound from the test data as
// constants. The importer's constant_input_slots lists them: Conv 1-2 (weights, bias),
// BatchNormalization 1-4 (scale, bias, mean, variance), Clip 1-2 (bounds), Reshape 1 (shape),
// Slice 1-4 (starts, ends, axes, steps), Split 1 (sizes), Pad 1-2 (pads, value),
// Squeeze/Unsqueeze 1 (axes), Gather, GatherElements, Scatter and ScatterElements 1 (indices),
// Dropout 1-2 (ratio, training_mode), ConstantOfShape 0 (shape) and Range 0-2.
std::set<std::string> constant_inputs(const onnx::GraphProto& g) {
  std::set<std::string> graph_inputs, out;
  for (const auto& in : g.input()) graph_inputs.insert(in.name());
  for (const auto& n : g.node())
    for (int slot : kiln::graph::onnx::constant_input_slots(n.op_type()))
      if (slot < n.input_size() && graph_inputs.count(n.input(slot))) out.insert(n.input(slot));
  return out;
}

std::string dtype_of(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type()) return "not a tensor";
  const int t = v.type().tensor_type().elem_type();
  return onnx::TensorProto::DataType_IsValid(t) ? onnx::TensorProto::DataType_Name(t) : "?";
}

// Whether graph output `name` is an index output: one an ArgMax or ArgMin node produces, or
// TopK's second. Kiln returns it as float32 holding the exact index where the model declares
// INT64 (docs/onnx.md), and it is compared exactly.
bool is_index_output(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& n : g.node()) {
    if (n.op_type() == "ArgMax" || n.op_type() == "ArgMin")
      for (const auto& o : n.output())
        if (o == name) return true;
    if (n.op_type() == "TopK" && n.output_size() > 1 && n.output(1) == name) return true;
  }
  return false;
}

// Whether a tensor of this dtype crosses Kiln's graph boundary: FLOAT, FLOAT16 and BFLOAT16 as
// float32 (docs/onnx.md, "Half-precision models"), and BOOL exchanged as float32 0.0/1.0
// ("Booleans"; load_tensor_file reads BOOL data as 0/1 and half data as its floats).
bool exchanged(const std::string& dtype) {
  return dtype == "FLOAT" || dtype == "FLOAT16" || dtype == "BFLOAT16" || dtype == "BOOL";
}

// Why Kiln cannot run this model at all, or "": an unsupported op, or a tensor crossing the
// graph boundary that is not float32 (Kiln graph tensors are float32 only; BOOL as 0/1; an
// ArgMax or ArgMin output may be INT64).
std::string unsupported_reason(const onnx::ModelProto& m, const std::set<std::string>& bound) {
  for (const auto& n : m.graph().node()) {
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (!default_domain || !kiln::graph::onnx::is_supported_op(n.op_type()))
      return "op " + (default_domain ? "" : n.domain() + ".") + n.op_type() + " not supported";
  }
  for (const auto& in : m.graph().input())
    if (!bound.count(in.name()) && !is_initializer(m.graph(), in.name()) &&
        !exchanged(dtype_of(in)))
      return "input '" + in.name() + "' is " + dtype_of(in) + " (Kiln tensors are float32)";
  for (const auto& out : m.graph().output())
    if (!exchanged(dtype_of(out)) &&
        !(dtype_of(out) == "INT64" && is_index_output(m.graph(), out.name())))
      return "output '" + out.name() + "' is " + dtype_of(out) + " (Kiln tensors are float32)";
  return "";
}

std::vector<Tensor> run_kiln(const kiln::graph::Graph& g, const std::vector<Tensor>& inputs) {
  const kiln::graph::Graph optimized =
      at_stage("passes", [&] { return kiln::graph::run_passes(g); });
  kiln::ModelOptions options;
  options.generate_kernels = kiln::codegen::kernel_generator({{}, KILN_TEST_CACHE_DIR, nullptr});
  auto model = at_stage("model", [&] { return std::make_unique<kiln::Model>(optimized, options); });
  const kiln::Status st = at_stage("run", [&] { return model->run(inputs); });
  if (!st) throw StageError("run", st.message());
  std::vector<Tensor> outs;
  for (size_t i = 0; i < model->num_outputs(); ++i) {
    const kiln::TensorView v = model->output(i);
    const size_t n = static_cast<size_t>(kiln::graph::num_elements(v.shape));
    outs.push_back({v.shape, v.layout, std::vector<float>(v.data, v.data + n)});
  }
  return outs;
}

void compare(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
             const onnx::GraphProto& g) {
  if (got.size() != want.size())
    throw StageError("compare", std::to_string(got.size()) + " outputs, expected " +
                                    std::to_string(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string name = "output " + std::to_string(i) + " '" + g.output(i).name() + "'";
    // The runtime may leave image outputs NHWC; the test data is in logical (NCHW) order.
    const Tensor t =
        got[i].layout == Layout::nhwc ? kiln::graph::to_layout(got[i], Layout::nchw) : got[i];
    if (t.shape != want[i].shape)
      throw StageError("compare", name + " is " + kiln::graph::to_string(t.shape) + ", expected " +
                                      kiln::graph::to_string(want[i].shape));
    if (is_index_output(g, g.output(i).name())) {
      for (size_t e = 0; e < t.data.size(); ++e)
        if (t.data[e] != want[i].data[e])
          throw StageError("compare", name + ": index " + std::to_string(t.data[e]) +
                                          " at element " + std::to_string(e) + ", expected " +
                                          std::to_string(want[i].data[e]));
      continue;
    }
    const double r = kiln::graph::worst_error_ratio(t.data, want[i].data, kRtol, kAtol);
    if (!(r <= 1.0)) {
      std::ostringstream s;
      s << name << ": worst error " << r << "x the tolerance (max |diff| "
        << kiln::graph::max_abs_diff(t.data, want[i].data) << ")";
      throw StageError("compare", s.str());
    }
  }
}

Outcome run_test(const fs::path& dir, const Options& opt) {
  onnx::ModelProto m;
  {
    std::ifstream in(dir / "model.onnx", std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    if (!in || !m.ParseFromString(bytes.str())) return {Result::fail, "cannot read model.onnx"};
  }
  const std::set<std::string> bound = constant_inputs(m.graph());
  if (std::string why = unsupported_reason(m, bound); !why.empty()) return {Result::skip, why};
  const fs::path data = dir / "test_data_set_0";
  kiln::graph::onnx::ImportOptions options;
  std::vector<Tensor> inputs, expected;
  int k = 0;
  for (const auto& in : m.graph().input()) {
    if (is_initializer(m.graph(), in.name())) continue;
    const std::string file = (data / ("input_" + std::to_string(k++) + ".pb")).string();
    Tensor t = at_stage("data", [&] { return kiln::graph::onnx::load_tensor_file(file); });
    if (bound.count(in.name()))
      options.constant_inputs.push_back({in.name(), std::move(t)});
    else
      inputs.push_back(std::move(t));
  }
  for (int i = 0; i < m.graph().output_size(); ++i) {
    const std::string file = (data / ("output_" + std::to_string(i) + ".pb")).string();
    expected.push_back(at_stage("data", [&] { return kiln::graph::onnx::load_tensor_file(file); }));
  }
  const kiln::graph::Graph g = at_stage("import", [&] {
    return kiln::graph::onnx::import_model((dir / "model.onnx").string(), options);
  });
  const std::vector<Tensor> got =
      opt.reference ? at_stage("reference", [&] { return kiln::graph::run_reference(g, inputs); })
                    : run_kiln(g, inputs);
  compare(got, expected, m.graph());
  return {Result::pass, ""};
}

// The summary's skip categories.
std::string skip_kind(const std::string& reason) {
  if (reason.rfind("op ", 0) == 0) return "with an unsupported op";
  if (reason.rfind("skip list", 0) == 0 || reason == "in the skip list") return "in the skip list";
  return "with non-float32 inputs or outputs";
}

bool parse_args(int argc, char** argv, Options* opt) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reference")
      opt->reference = true;
    else if (a == "--verbose")
      opt->verbose = true;
    else if (a == "--write-passing")
      opt->write_passing = true;
    else if (a == "--filter" && i + 1 < argc)
      opt->filter = argv[++i];
    else if (!a.empty() && a[0] == '-')
      return false;
    else
      positional.push_back(a);
  }
  if (positional.size() > 3) return false;
  if (positional.size() > 0) opt->data_dir = positional[0];
  if (positional.size() > 1) opt->skip_list = positional[1];
  if (positional.size() > 2) opt->passing_list = positional[2];
  return !(opt->write_passing && !opt->filter.empty());  // a filtered run is not the whole list
}

// The tests expected to pass, one name per line ('#' comments).
std::set<std::string> read_passing_list(const std::string& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string name;
    if (words >> name) names.insert(name);
  }
  return names;
}

// Counts and messages over the whole run.
struct Summary {
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> skip_kinds;
  std::vector<std::string> failures;
  std::set<std::string> passing;
  std::map<std::string, std::string> not_passing;  // name -> why (failed or skipped)

  void add(const std::string& name, const Outcome& o, bool verbose) {
    if (o.result == Result::pass) ++passed, passing.insert(name);
    else not_passing[name] = (o.result == Result::fail ? "failed: " : "skipped: ") + o.reason;
    if (o.result == Result::fail) ++failed, failures.push_back(name + ": " + o.reason);
    if (o.result == Result::skip) ++skipped, ++skip_kinds[skip_kind(o.reason)];
    if (verbose)
      std::cout << (o.result == Result::pass   ? "PASS "
                    : o.result == Result::fail ? "FAIL "
                                               : "SKIP ")
                << name << (o.reason.empty() ? "" : ": " + o.reason) << "\n";
  }

  // Prints the summary; returns the exit status.
  int report(const Options& opt) const {
    if (!opt.verbose)
      for (const std::string& f : failures) std::cout << "FAIL " << f << "\n";
    std::cout << "onnx " << fs::path(opt.data_dir).filename().string() << " tests ("
              << (opt.reference ? "reference interpreter" : "CPU runtime")
              << "): " << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
    for (const auto& [kind, count] : skip_kinds)
      std::cout << "  skipped: " << count << " " << kind << "\n";
    if (opt.write_passing) {
      std::ofstream out(opt.passing_list, std::ios::trunc);
      out << "# ONNX " << fs::path(opt.data_dir).filename().string()
          << " tests that pass on Kiln's CPU runtime (onnx_conformance.cpp compares\n"
             "# each run with this list). Regenerate: kiln_onnx_conformance --write-passing "
             "[DATA_DIR SKIP_LIST PASSING_LIST]\n";
      for (const std::string& name : passing) out << name << "\n";
      std::cout << "wrote " << passing.size() << " names to " << opt.passing_list << "\n";
      return failed ? 1 : 0;
    }
    // The pinned set: a test that stopped passing (its op dropped, a new skip) or one that
    // newly passes (add it) both fail the run, so the list always says what Kiln passes.
    const std::set<std::string> expected = read_passing_list(opt.passing_list);
    int mismatches = 0;
    for (const std::string& name : expected)
      if (!passing.count(name) && (opt.filter.empty() || name.find(opt.filter) != std::string::npos)) {
        const auto it = not_passing.find(name);
        std::cout << "NO LONGER PASSES " << name << ": "
                  << (it == not_passing.end() ? "not found in the test data" : it->second) << "\n";
        ++mismatches;
      }
    for (const std::string& name : passing)
      if (!expected.count(name)) {
        std::cout << "NEWLY PASSES " << name << " (add it to " << opt.passing_list << ")\n";
        ++mismatches;
      }
    std::cout << expected.size() << " tests pinned as passing in " << opt.passing_list << "; "
              << mismatches << " differences\n";
    return failed || mismatches ? 1 : 0;
  }
};

Outcome run_guarded(const fs::path& dir, const Options& opt,
                    const std::map<std::string, std::string>& skips) {
  if (const auto s = skips.find(dir.filename().string()); s != skips.end())
    return {Result::skip, s->second};
  try {
    return run_test(dir, opt);
  } catch (const std::exception& e) {
    return {Result::fail, e.what()};
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse_args(argc, argv, &opt)) {
    std::cerr << "usage: " << argv[0]
              << " [--reference] [--verbose] [--filter SUBSTR] [--write-passing]"
                 " [DATA_DIR [SKIP_LIST [PASSING_LIST]]]\n";
    return 2;
  }
  if (!fs::is_directory(opt.data_dir)) {
    std::cout << "onnx tests: no test data at " << opt.data_dir
              << " (Debian's libonnx-testdata; scripts/setup.sh installs it)\n";
    return 1;
  }
  const std::map<std::string, std::string> skips = read_skip_list(opt.skip_list);
  for (const auto& entry : skips)
    if (!fs::is_directory(fs::path(opt.data_dir) / entry.first))
      std::cout << "warning: skip list entry " << entry.first << " matches no test\n";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(opt.data_dir))
    if (e.is_directory() && e.path().filename().string().find(opt.filter) != std::string::npos)
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  Summary summary;
  for (const fs::path& dir : dirs)
    summary.add(dir.filename().string(), run_guarded(dir, opt, skips), opt.verbose);
  return summary.report(opt);
}
