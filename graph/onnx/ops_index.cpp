// ONNX -> IR for GatherElements, ScatterElements and Scatter: graph::GatherElements and
// graph::ScatterElements, whose indices are float32 graph values (constants checked here, or
// indices computed at run time).
#include <map>

#include "graph/onnx/importer.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

// GatherElements' and ScatterElements' input i, the indices along an axis of `extent`, as a graph
// value: constants checked against the axis (an Error names the first outside it) and stored as
// float32 with negative ones counted from the end; a tensor computed at run time as it is (a
// float32 holding the index, as ArgMax's and TopK's outputs are), its kernel clamping one
// outside the axis.
ValueId element_indices(Importer& im, const NodeCtx& c, int i, int64_t extent) {
  const HostTensor* h = im.known_input(c, i);
  if (!h) return im.value_input(c, i);
  if (h->is_float()) node_error(c, "indices must be integers, got " + dtype_name(h->dtype));
  std::vector<float> f;
  f.reserve(h->i.size());
  for (int64_t v : h->i) {
    if (v < -extent || v >= extent)
      node_error(c, "index " + std::to_string(v) + " is outside the axis (of " +
                        std::to_string(extent) + " elements)");
    f.push_back(static_cast<float>(v < 0 ? v + extent : v));
  }
  for (int64_t d : h->dims)
    if (d <= 0)
      node_error(c, "the indices are empty " + to_string(h->dims) + "; Kiln tensors cannot be");
  return im.add_constant(c.name + "/indices", h->dims, std::move(f),
                         logical_layout(h->dims.size()));
}

// The axis attribute of GatherElements and ScatterElements, non-negative.
int element_axis(Importer& im, const NodeCtx& c) {
  const Shape data = im.input_shape(c, 0);
  if (data.empty()) node_error(c, "the data is a scalar; there is no axis to index");
  return normalize_axis(c, attr_int(c, "axis", 0), data.size(), "attribute 'axis'");
}

}  // namespace

// GatherElements (opsets 11-28) as graph::GatherElements; the indices as element_indices takes
// them. Constant data and indices fold later, as every node of constants does.
void convert_gather_elements(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const GatherElements ge{element_axis(im, c)};
  const int64_t extent = im.input_shape(c, 0)[static_cast<size_t>(ge.axis)];
  const ValueId data = im.value_input(c, 0);
  im.define_value(c, 0,
                  im.emit(c, ge, {data, element_indices(im, c, 1, extent)}, im.output_name(c, 0)));
}

// ScatterElements (opsets 11-28: reduction add and mul from 16, max and min from 18) and its
// older name Scatter (9-10, no reduction) as graph::ScatterElements.
void convert_scatter_elements(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 3, 3);
  ScatterElements se{element_axis(im, c)};
  const std::string reduction = attr_string(c, "reduction", "none");
  const std::map<std::string, ScatterReduction> reductions = {{"none", ScatterReduction::none},
                                                              {"add", ScatterReduction::add},
                                                              {"mul", ScatterReduction::mul},
                                                              {"max", ScatterReduction::max},
                                                              {"min", ScatterReduction::min}};
  const auto how = reductions.find(reduction);
  if (how == reductions.end())
    node_error(c, "reduction '" + reduction + "' is not one of none, add, mul, max, min");
  se.reduction = how->second;
  const int64_t extent = im.input_shape(c, 0)[static_cast<size_t>(se.axis)];
  const ValueId data = im.value_input(c, 0);
  const ValueId indices = element_indices(im, c, 1, extent);
  im.define_value(c, 0,
                  im.emit(c, se, {data, indices, im.value_input(c, 2)}, im.output_name(c, 0)));
}

}  // namespace kiln::graph::onnx
