// The model's output check of its Winograd layers (winograd_check.h).
#include "winograd_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "codegen/kernel_pipeline.h"
#include "graph/builder.h"
#include "graph/memory_plan.h"
#include "graph/reference.h"
#include "runtime/kernels.h"

namespace kiln::cli {
namespace {

struct Layer {
  size_t node;  // index in the graph's nodes
  int tile;     // the Winograd tile its kernel uses before the check
};

// The convolutions whose kernels use Winograd on `target` with the schedules `db` gives (or the
// defaults), in node order, and their tiles.
std::vector<Layer> winograd_layers(const graph::Graph& g, const std::string& target,
                                   const codegen::ScheduleDb* db) {
  const codegen::ScheduleLookup lookup = db ? db->lookup() : nullptr;
  const Halide::Target t(target);
  std::vector<Layer> out;
  std::map<std::string, size_t> node_index;  // one node per kernel, named alike
  for (size_t i = 0; i < g.nodes().size(); ++i) node_index.emplace(g.nodes()[i].name, i);
  const std::vector<graph::KernelSpec> kernels =
      graph::planned_kernels(g, graph::plan_arena(g, graph::plan_options_for(true)));
  for (const graph::KernelSpec& k : kernels) {
    const auto* conv = std::get_if<graph::ConvKernelSpec>(&k);
    if (!conv || conv->depthwise) continue;
    const std::string schedule = codegen::requested_schedule(k, target, lookup);
    const int tile = codegen::winograd_weight_tile(k, t, schedule);
    if (tile != 0) out.push_back(Layer{node_index.at(conv->name), tile});
  }
  return out;
}

// The outputs' worst error over the tolerance (output_error_over_tolerance of each).
double outputs_error(const Model& m, const std::vector<graph::Tensor>& ref, double rtol,
                     double atol) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const TensorView v = m.output(i);
    const graph::Tensor got = graph::to_layout(v.data, v.shape, v.layout, ref[i].layout);
    worst = std::max(worst, output_error_over_tolerance(got.data, ref[i].data, rtol, atol));
  }
  return worst;
}

// "0.62 of the tolerance"
std::string of_tolerance(double e) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3g of the tolerance", e);
  return text;
}

// check_winograd_tiles, which catches what this throws; `r` gets what it measured.
graph::Graph check_tiles(const graph::Graph& g, const ModelOptions& options,
                         const WinogradCheckOptions& check, WinogradCheck& r) {
  const int best = runtime::best_cpu_target();
  const int target_index = options.cpu_target >= 0 ? options.cpu_target : best;
  if (options.backend != Backend::cpu || options.schedule != Schedule::tuned || target_index < 0)
    return g;
  const std::string target = runtime::cpu_targets()[static_cast<size_t>(target_index)];
  const std::vector<Layer> layers = winograd_layers(g, target, check.db);
  r.winograd_layers = static_cast<int>(layers.size());
  if (layers.empty()) return g;
  const auto say = [&](const std::string& line) {
    if (check.log) check.log(line);
  };

  std::vector<graph::Tensor> inputs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const graph::Value& v = g.value(g.inputs[i]);
    inputs.push_back(
        graph::Tensor{v.shape, v.layout,
                      graph::random_uniform(graph::num_elements(v.shape), -1.0f, 1.0f, 1 + i)});
  }
  const std::vector<graph::Tensor> ref = graph::run_reference(g, inputs);

  // caps[j]: the cap of layers[j] (as the graph has it at first); a measurement runs the model
  // with them.
  std::vector<int> caps;
  for (const Layer& l : layers)
    caps.push_back(std::get<graph::Conv2d>(g.nodes()[l.node].op).max_winograd_tile);
  const auto capped = [&](const std::vector<int>& c) {
    graph::Graph out = g;
    for (size_t j = 0; j < layers.size(); ++j)
      std::get<graph::Conv2d>(out.node(graph::NodeId{static_cast<uint32_t>(layers[j].node)}).op)
          .max_winograd_tile = c[j];
    return out;
  };
  const auto measure = [&](const std::vector<int>& c) {
    Model m(capped(c), options);
    const Status s = m.run(inputs);
    if (!s) throw graph::Error("the Winograd output check could not run the model: " + s.message());
    ++r.runs;
    return outputs_error(m, ref, check.rtol, check.atol);
  };

  std::vector<size_t> f4;  // the F(4x4) layers, in node order
  for (size_t j = 0; j < layers.size(); ++j)
    if (layers[j].tile == 4) f4.push_back(j);
  r.error = r.final_error = measure(caps);
  say(std::to_string(layers.size()) + " Winograd layers, " + std::to_string(f4.size()) +
      " of them F(4x4): outputs at " + of_tolerance(r.error));
  if (r.error <= 1.0) return g;
  r.direct_error = measure(std::vector<int>(layers.size(), 0));
  const double bound = std::max(1.0, 2 * r.direct_error);
  say("direct convolution in their place: " + of_tolerance(r.direct_error) +
      (bound > 1.0 ? "; the bound is twice that" : ""));
  if (r.error <= bound) return g;
  // The first p layers of `order` capped at `cap`, for the smallest p of 1..most that brings
  // the error within the bound (by bisection: more layers capped, less error), or none if p =
  // most does not. `from` names the order in the log ("first", "last").
  struct Choice {
    std::vector<int> caps;
    double error = 0;
    size_t count = 0;
    bool within = false;
  };
  const auto fewest = [&](const std::vector<size_t>& order, int cap, const std::string& what,
                          const char* from, size_t most) {
    const auto with_first = [&](size_t p) {
      std::vector<int> c = caps;
      for (size_t i = 0; i < p; ++i) c[order[i]] = std::min(c[order[i]], cap);
      return c;
    };
    const auto try_first = [&](size_t p) {
      const double e = measure(with_first(p));
      say(what + (p == order.size() ? " on all " : std::string(" on the ") + from + " ") +
          std::to_string(p) + ": " + of_tolerance(e));
      return e;
    };
    Choice best{with_first(most), try_first(most), most, false};
    best.within = best.error <= bound;
    if (!best.within) return best;
    for (size_t lo = 1, hi = most; lo < hi;) {
      const size_t mid = (lo + hi) / 2;
      const double e = try_first(mid);
      if (e <= bound)
        hi = mid, best = Choice{with_first(mid), e, mid, true};
      else
        lo = mid + 1;
    }
    return best;
  };
  // The fewest layers of `order` (node order) whose cap brings the error within the bound: the
  // earliest first (an early layer's rounding passes through more of the network), then, where
  // that takes more than one, the latest first in case fewer do (a network that attenuates
  // rounding); all of them, and false, if even that is not enough.
  const auto cap_fewest = [&](const std::vector<size_t>& order, int cap, const std::string& what) {
    Choice c = fewest(order, cap, what, "first", order.size());
    if (c.within && c.count > 1) {
      const std::vector<size_t> latest(order.rbegin(), order.rend());
      Choice d = fewest(latest, cap, what, "last", c.count - 1);
      if (d.within) c = d;
    }
    caps = c.caps;
    r.final_error = c.error;
    return c.within;
  };
  if (f4.empty() || !cap_fewest(f4, 2, "F(2x2)")) {
    std::vector<size_t> all(layers.size());
    for (size_t j = 0; j < all.size(); ++j) all[j] = j;
    cap_fewest(all, 0, "direct");
  }
  for (size_t j = 0; j < layers.size(); ++j) {
    r.capped_to_2 += layers[j].tile == 4 && caps[j] == 2;
    r.capped_to_direct += caps[j] == 0;
  }
  say("layers capped: " + std::to_string(r.capped_to_2) + " at F(2x2), " +
      std::to_string(r.capped_to_direct) + " at direct convolution; outputs at " +
      of_tolerance(r.final_error));
  return capped(caps);
}

}  // namespace

double output_error_over_tolerance(const std::vector<float>& got, const std::vector<float>& ref,
                                   double rtol, double atol) {
  double largest = 0;
  for (float x : ref)
    if (std::isfinite(x)) largest = std::max<double>(largest, std::fabs(x));
  return graph::worst_error_ratio(got, ref, rtol, atol * std::max(1.0, largest));
}

graph::Graph check_winograd_tiles(graph::Graph g, const ModelOptions& options,
                                  const WinogradCheckOptions& check, WinogradCheck* report) {
  WinogradCheck r;
  try {
    graph::Graph out = check_tiles(g, options, check, r);
    if (report) *report = r;
    return out;
  } catch (const std::exception& e) {
    // A model that cannot run here (inputs that are indices, an arena larger than this
    // machine's memory for a model compiled for a larger one) keeps its tiles.
    if (check.log) check.log(std::string("output check skipped: ") + e.what());
    if (report) *report = WinogradCheck{};
    return g;
  }
}

}  // namespace kiln::cli
