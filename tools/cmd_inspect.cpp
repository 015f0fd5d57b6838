// `kiln inspect`: what the compiler does to a model, without running it: the graph after each
// pass, the fusion groups, every kernel's task description, the arena plan as a table, and
// optionally the graph as DOT and the arena as an SVG timeline.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli.h"
#include "codegen/kernel_library.h"
#include "commands.h"
#include "compile_codegen.h"
#include "graph/file_io.h"
#include "graph/kernel_spec.h"
#include "graph/memory_plan.h"
#include "graph/passes/pipeline.h"
#include "runtime/conv_weights.h"
#include "runtime/kernels.h"

namespace kiln::cli {
namespace {

constexpr const char* kHelp = R"(usage: kiln inspect MODEL [options]

MODEL is an .onnx file, or `example` for the built-in reference model. Prints the graph after
every pass (or only after --after PASS), the fusion groups (which original ops each kernel
computes, and whether it is a kernel generated for the model's shapes or is stored in place
with no kernel), each kernel's task description, and the arena plan with the bytes Winograd
kernels' transformed weights add to the weights file when a model loads (`--schedule` shows
which kernels those are: schedule family winograd). The Winograd output check's caps (see
`kiln run --help`) come from the compile cache: inspect runs nothing, and says when the
cache does not hold the check for this model yet.

options:
  {input-shape:17}
  --after PASS   print the graph only after PASS (input, or a pass name)
  --dot FILE     write the optimized graph as Graphviz DOT
  --svg FILE     write the arena plan as an SVG timeline (x: node, y: arena offset)
  --schedule     also print the schedule each kernel gets on the CPU target: its parameters
                 and where they come from (default, tuned record of --schedules, or the
                 spec's own), then Halide's loop nest of it (kernels without knobs too)
  --schedules FILE
                 the schedule database to take tuned records from (kiln tune writes one)
  --target T     the CPU target of --schedule: avx512, avx2, baseline or one of the build's
                 Halide target strings (default: the best this CPU runs)
  --precision P  f32 (default) or bf16: optimize as `kiln compile --precision` does (bf16
                 runs gemm_as_conv first, a classifier's Gemm as a 1x1 convolution, and
                 use_bf16 last; --after takes either), and each bf16 convolution's task
                 description says so
  -h, --help     this text
)";

// Text for SVG (XML) content.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// The Winograd output check (winograd_check.h) runs the model, which inspect does not: its caps
// come from the compile cache, where `kiln run`, `bench`, `compile` and `tune` leave them, and
// are set on `optimized`'s convolutions; without a cached check, inspect says so.
void print_winograd_check(const Args& args, const InputShapes& shapes, graph::Graph* optimized) {
  const graph::Precision precision = parse_precision(args);
  if (precision != graph::Precision::f32) return;  // bf16 models are not checked
  const OutputCheck check{ModelOptions{}, schedule_db(args)};
  const std::optional<graph::Graph> checked =
      cached_graph(args.positionals()[0], shapes, "cpu", precision, &check);
  std::map<std::string, int> caps;  // node name (printable) -> cap
  if (checked)
    for (const graph::Node& n : checked->nodes())
      if (const auto* c = std::get_if<graph::Conv2d>(&n.op))
        caps[graph::printable(n.name)] = c->max_winograd_tile;
  std::cout << "== Winograd output check ==\n";
  if (!checked) {
    std::cout
        << "  not run yet for this model (kiln run, bench, compile and tune run it once and "
           "cache it; they may cap layers' Winograd tiles): the tiles below are before it\n\n";
    return;
  }
  int capped = 0;
  for (uint32_t i = 0; i < optimized->num_nodes(); ++i) {
    graph::Node& n = optimized->node(graph::NodeId{i});
    auto* c = std::get_if<graph::Conv2d>(&n.op);
    const auto it = caps.find(n.name);
    if (!c || it == caps.end() || it->second == 4) continue;
    c->max_winograd_tile = it->second;
    ++capped;
    std::cout << "  " << n.name << ": "
              << (it->second ? "Winograd F(2x2) at most" : "direct convolution only") << "\n";
  }
  if (!capped)
    std::cout << "  no layer capped: the outputs were within the check's bound\n";
  std::cout << "\n";
}

// The weights the runtime transforms for Winograd kernels when it loads the model (for a library
// of every CPU target, as `kiln compile` makes by default, with --schedules' records): what they
// add to the weights file once the originals they replace are dropped.
void print_winograd_weights(const std::vector<graph::KernelSpec>& kernels, const Args& args) {
  const std::shared_ptr<const codegen::ScheduleDb> db = schedule_db(args);
  int64_t transformed = 0, replaced = 0;
  size_t count = 0;
  for (const graph::KernelSpec& k : kernels) {
    const auto* c = std::get_if<graph::ConvKernelSpec>(&k);
    if (!c || !graph::is_generated(k)) continue;
    const int tile =
        codegen::library_weight_tile(k, runtime::cpu_targets(), db ? db->lookup() : nullptr);
    if (tile == 0) continue;
    const int64_t channels = c->weights.shape[2] * c->weights.shape[3];
    const int64_t alpha = runtime::winograd_alpha(tile, c->stride_w);
    transformed += alpha * alpha * channels * 4;
    replaced += 9 * channels * 4;
    ++count;
  }
  std::cout << "  winograd weights at load: " << transformed - replaced << " bytes beyond the "
            << "weights file (" << count << " kernels read " << transformed
            << " bytes of transformed weights in place of " << replaced << ")\n";
}

// Buffers as rectangles: x spans the live interval (node indices), y the arena bytes.
std::string to_svg(const graph::ArenaPlan& plan, const graph::Graph& g) {
  const double width = 960, height = 560, left = 70, top = 30, bottom = 40;
  const int steps = static_cast<int>(g.num_nodes()) + 1;
  const double arena = std::max<double>(plan.arena_bytes, 1);
  const double xs = (width - left - 20) / steps, ys = (height - top - bottom) / arena;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"monospace\" font-size=\"10\">\n";
  s << "<text x=\"" << left << "\" y=\"18\" font-size=\"13\">arena " << plan.arena_bytes
    << " bytes (" << plan.unshared_bytes << " without reuse); x: node index, y: offset</text>\n";
  s << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << xs * steps << "\" height=\""
    << arena * ys << "\" fill=\"none\" stroke=\"#888\"/>\n";
  static const char* colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const graph::ArenaBuffer& b = plan.buffers[i];
    const double x = left + b.first * xs, w = std::max(1.0, (b.last - b.first + 1) * xs);
    const double y = top + b.offset * ys, h = std::max(1.0, b.bytes * ys);
    s << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << h
      << "\" fill=\"" << colors[i % 10] << "\" fill-opacity=\"0.75\" stroke=\"#222\">"
      << "<title>" << escape(g.value(b.value).name) << ": " << b.bytes << " bytes at offset "
      << b.offset << ", nodes " << b.first << ".." << b.last << "</title></rect>\n";
    if (h > 11 && w > 40)
      s << "<text x=\"" << x + 2 << "\" y=\"" << y + 10 << "\">" << escape(g.value(b.value).name)
        << "</text>\n";
  }
  s << "<text x=\"" << left << "\" y=\"" << height - 12 << "\">0</text><text x=\""
    << left + xs * steps - 30 << "\" y=\"" << height - 12 << "\">" << steps - 1 << "</text>\n";
  s << "</svg>\n";
  return s.str();
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  const Args args(argc, argv, 2,
                  {"--after", "--dot", "--svg", "--schedules", "--target", "--input-shape", "--precision"},
                  {"--schedule"});
  if (args.help()) {
    print_help(kHelp);
    return 0;
  }
  if (args.positionals().size() != 1) throw UsageError("expected one MODEL argument");
  const std::string after = args.get("--after");
  if (!after.empty() && after != "input") {
    bool known = false;
    for (const graph::Pass& p : graph::default_passes()) known |= after == p.name;
    known |= (after == "use_bf16" || after == "gemm_as_conv") &&
             parse_precision(args) == graph::Precision::bf16;
    if (!known) throw UsageError("--after: unknown pass '" + after + "'");
  }
  // Everything below prints names from the model: escaped once here.
  const InputShapes shapes = parse_input_shapes(args, args.positionals()[0]);
  const graph::Graph input = graph::with_printable_names(load_model(args.positionals()[0], shapes));
  graph::PipelineOptions popts = pass_options(parse_precision(args));
  popts.verify_each = true;
  popts.on_stage = [&](const std::string& stage, const graph::Graph& g) {
    if (!after.empty() && after != stage) return;
    std::cout << "== after " << stage << " (" << g.num_nodes() << " nodes) ==\n" << graph::dump(g) << "\n";
  };
  graph::Graph optimized = graph::run_passes(input, popts);
  print_winograd_check(args, shapes, &optimized);
  // The CPU runtime's plan: Concats written in place and Reshapes stored as views run nothing.
  const graph::ArenaPlan plan = graph::plan_arena(optimized);
  const std::vector<graph::KernelSpec> kernels = graph::planned_kernels(optimized, plan);

  std::cout << "== fusion groups (" << kernels.size() << " kernels from " << input.num_nodes()
            << " nodes) ==\n";
  // One kernel per node, in node order (lower_to_kernels): how each one is implemented.
  for (size_t i = 0; i < optimized.num_nodes(); ++i) {
    const graph::Node& n = optimized.node(graph::NodeId{static_cast<uint32_t>(i)});
    std::string computes;
    for (size_t k = 0; k < n.computes.size(); ++k) computes += (k ? " + " : "") + n.computes[k];
    const char* how = plan.elides(graph::NodeId{static_cast<uint32_t>(i)}) ? "no kernel: stored in place" : "generated";
    std::cout << "  " << n.name << ": " << computes << "  [" << how << "]\n";
  }
  std::cout << "\n== kernels ==\n";
  for (const graph::KernelSpec& k : kernels) std::cout << graph::describe(k) << "\n";

  std::cout << "== arena plan ==\n" << graph::describe(plan, optimized);
  std::cout << "  sum of the input graph's intermediate and output tensors: "
            << graph::naive_activation_bytes(input) << " bytes\n";
  print_winograd_weights(kernels, args);
  if (args.has("--schedule")) {
    const int best = runtime::best_cpu_target();
    const int index = args.has("--target") ? parse_cpu_target("--target", args.get("--target")) : best;
    if (index < 0) throw graph::Error("this CPU supports none of Kiln's CPU targets");
    const std::string target = runtime::cpu_targets()[static_cast<size_t>(index)];
    const std::shared_ptr<const codegen::ScheduleDb> db = schedule_db(args);
    std::vector<graph::KernelSpec> generated;
    for (const graph::KernelSpec& k : kernels)
      if (graph::is_generated(k)) generated.push_back(k);
    std::cout << "\n== schedules (" << target << ") ==\n";
    if (db)
      for (const std::string& line : codegen::stale_records(*db, generated, {target}))
        std::cout << "stale record: " << line << "\n";
    const codegen::ScheduleLookup lookup = db ? db->lookup() : nullptr;
    for (const codegen::ScheduleUse& u : codegen::schedule_uses(generated, target, db.get())) {
      std::cout << u.kernel << ": " << (u.schedule.empty() ? "(one schedule, no knobs)" : u.schedule)
                << "  [" << u.origin << "]\n";
      if (!u.half_width.empty())
        std::cout << "  half-width kernel, run on CPUs that split 512-bit multiply-adds ("
                  << (runtime::splits_512bit_fma() ? "this one does" : "not this one")
                  << "): " << u.half_width << "\n";
      for (const graph::KernelSpec& k : generated)
        if (graph::kernel_name(k) == u.kernel) {
          std::istringstream nest(codegen::schedule_loop_nest(
              k, target, codegen::requested_schedule(k, target, lookup)));
          for (std::string line; std::getline(nest, line);) std::cout << "    " << line << "\n";
          break;
        }
    }
  }
  if (args.has("--dot")) {
    graph::write_file_atomically(args.get("--dot"), graph_to_dot(optimized, "kiln"));
    std::cout << "wrote " << args.get("--dot") << "\n";
  }
  if (args.has("--svg")) {
    graph::write_file_atomically(args.get("--svg"), to_svg(plan, optimized));
    std::cout << "wrote " << args.get("--svg") << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
