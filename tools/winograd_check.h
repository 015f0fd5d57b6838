// The model's output check of its Winograd layers. Winograd F(4x4, 3x3) rounds more than direct
// convolution (its transforms multiply by up to 8 and 1/24), and a network amplifies a layer's
// rounding on the way to its outputs: torchvision's Inception-v3, with F(4x4) on its 32-channel
// stem, left the logits 1.3e-3 from the reference, where F(2x2) left 3.1e-4. Whether a layer
// may take F(4x4) is therefore a property of the model, measured here on its outputs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/schedule_db.h"
#include "graph/ir.h"
#include "kiln/runtime.h"

namespace kiln::cli {

// The tolerance of every check against the reference interpreter (kiln run --check, the
// tuner's candidates, this one): |got - ref| <= kRtol |ref| + kAtol max(1, max |ref|).
inline constexpr double kRtol = 1e-3, kAtol = 1e-4;

// A model output's worst error over that tolerance (1 = at it), the atol scaled by the
// reference's largest finite magnitude where that exceeds 1; infinite where `got` is NaN and
// `ref` is not (graph::worst_error_ratio).
double output_error_over_tolerance(const std::vector<float>& got, const std::vector<float>& ref,
                                   double rtol = kRtol, double atol = kAtol);

// What the check measured, for reports and tests.
struct WinogradCheck {
  int winograd_layers = 0;   // convolutions whose kernels use Winograd before the check
  int capped_to_2 = 0;       // of those, capped at F(2x2) (max_winograd_tile 2)
  int capped_to_direct = 0;  // capped at direct convolution (max_winograd_tile 0)
  double error = 0;          // the outputs' worst error over the tolerance before the check
  double direct_error = -1;  // the same with every Winograd layer direct (-1: not measured)
  double final_error = 0;    // the same with the caps
  int runs = 0;              // model runs it took
};

struct WinogradCheckOptions {
  const codegen::ScheduleDb* db = nullptr;      // the schedules the model will run with
  std::function<void(const std::string&)> log;  // a line per measurement, if set
  double rtol = kRtol, atol = kAtol;            // the tolerance
};

// Caps the Winograd tile of `optimized`'s convolutions (Conv2d::max_winograd_tile) so that its
// outputs stay within the tolerance of the reference interpreter. The model runs on seeded
// random inputs in [-1, 1) with the kernels `options` generates on this CPU (with the
// database's schedules: the check measures the schedules that will run); its outputs' worst
// error is taken over the tolerance (|got - ref| / (rtol |ref| + atol max(1, max |ref|)), 1 =
// at the tolerance). Within it: nothing changes. Otherwise the F(4x4) layers are capped at
// F(2x2), as few as bring the error within: the earliest first (an early layer's rounding
// passes through more of the network), by bisection, and where that caps more than one, the
// latest first in case fewer do; if all of them do not, the Winograd layers are capped at
// direct convolution the same way. The bound is the tolerance, or twice the
// error with every Winograd layer direct where that is larger (a network that amplifies any
// float32 rounding, or outputs with a discontinuity such as an ArgMax). A model without
// Winograd kernels, on a GPU backend or with Schedule::naive is returned as it is, and nothing
// runs. So is one the check cannot run here (the model or the reference interpreter throws:
// inputs that are indices, an arena beyond this machine's memory limit), with a log line why.
graph::Graph check_winograd_tiles(graph::Graph optimized, const ModelOptions& options,
                                  const WinogradCheckOptions& check = {},
                                  WinogradCheck* report = nullptr);

}  // namespace kiln::cli
