// Graph serialization: a versioned little-endian binary format holding a whole graph, weights
// included; what `kiln compile` writes as NAME.weights and compiled models load at run time.
#pragma once

#include <cstdint>
#include <string>

#include "graph/ir.h"

namespace kiln::graph {

// The format, all integers little-endian:
//   "KILNGRF1"  u32 version
//   u32 #values, each: str name, u8 dtype, u8 layout, u32 rank, i64 dims[rank],
//                      u8 storage (0: no data, 1: f32, 2: bf16), [u64 count, f32 data[count]
//                      or u16 bfloat16 data[count], the upper halves of the floats]
//   u32 #nodes,  each: str name, u8 op tag (fixed per op in serialize.cpp), the op's attributes in
//                      declaration order, ids inputs, ids outputs, u32 #computes, str computes
//   ids graph inputs, ids graph outputs
//   u64 checksum of every byte before it
// where str = u32 length + bytes, ids = u32 count + u32 value ids. Value::producer is not
// stored: it follows from the nodes' outputs.
// Version 10: op tag 25 is Where (no attributes), Binary ops 6-14 are pow, equal, less,
// greater, less_equal, greater_equal, and, or, xor, and chain step kinds 25-33 are floor, ceil,
// round, not, greater, less, equal, greater_equal, less_equal (the comparisons with the
// constant a). Version 9 is read as well.
// Version 9: Resize's attributes end with f32 cubic_a, u8 exclude_outside, f32 extrapolation
// and u32 count + f32 roi; Resize mode 2 is cubic, coordinates 5 tf_crop_and_resize, and
// ReduceKind 10-13 are argmax, argmin, argmax_last, argmin_last. Version 8 is read as well.
// Version 8: Softmax's and Reduce's (tag 19, ReduceMean before) attributes end with their kind
// (u8: SoftmaxKind, ReduceKind), Binary ops 4-5 are max and min, chain step kind 24 is mish, and
// op tag 24 is Tile (i64s repeats). Version 7 (Softmax and ReduceMean only) is read as well.
// Version 7: Reshape's attributes end with its layout (u8; any for a logical reshape). Version
// 6 (logical reshapes only) is read as well.
// Version 6: Pad's attributes end with its mode (u8). Version 5 (constant padding only) is read
// as well.
// Version 5: op tag 22 is LayerNorm (i32 axis, f32 epsilon), 23 Resize (u8 mode, u8 coordinates,
// u8 nearest rounding, i64s sizes, u32 count + f32 scales), and chain step kinds 22-23 are the
// gelu steps. Version 4 (the same without them) is read as well.
// Version 11: Conv2d's attributes end with its pre steps (as its post steps) and a flag
// nchw_input. Version 10 (the same without them) is read as well.
// Version 4: Conv2d's attributes end with its post steps (u32 count, each u8 kind, f32 a, f32 b).
// Version 3 (op tags fixed per op, ElementwiseChain is 21; no post steps) and version 1 (no
// ElementwiseChain) are read as well; version 2 (tags by position in graph::Op) is refused.
// Version 12: Conv2d's attributes end with a flag and, when set, its pooling (Pool2d's
// attributes). Version 11 (the same without them) is read as well.
// Version 13: Conv2d's attributes end with its bf16 flag (the precision of its multiply-adds).
// Version 12 (all float32) is read as well.
// Version 14: a constant read only as bf16 convolutions' weights (which round it to bfloat16
// before any use) is stored as bfloat16 (storage 2), half the bytes and the same results.
// Version 13 (storage 0 or 1 only) is read as well.
// Version 15: Conv2d's attributes end with a flag and, when set, its expansion's activation
// (f32 lo, f32 hi). Version 14 (no expansions) is read as well.
// Version 16: the expansion's post steps follow its activation, and a flag input_scale ends
// Conv2d's attributes. Version 15 is read as well.
// Version 17: Conv2d's attributes end with a flag and, when set, its resize (Resize's
// attributes) and the flag nchw_output; then the flag shortcut. Version 16 (no resizes or
// shortcuts) is read as well.
// Version 18: Conv2d's attributes end with its max_winograd_tile (i32). Version 17 (every
// convolution uncapped, 4) is read as well.
// Version 19: Conv2d's attributes end with the flag pool_first. Version 18 (every pooling after
// its convolution) is read as well.
// Version 20: op tag 26 is GroupNorm (i32 groups, f32 epsilon, flag residual, its post steps as
// Conv2d's). Version 19 is read as well.
// Version 21: chain step kinds 34-37 are sign, shrink, is_nan and is_inf. Version 20 is read as
// well.
// Version 22: chain step kinds 38-40 are sin, cos and tan. Version 21 is read as well.
// Version 23: chain step kinds 41-48 are sinh, cosh, asin, acos, atan, asinh, acosh and atanh.
// Version 22 is read as well.
// Version 24: op tag 27 is GridSample (u8 mode, u8 padding, flag align_corners). Version 23 is
// read as well.
// Version 25: op tag 28 is TopK (i32 axis, i64 k, flags largest and indices). Version 24 is read
// as well.
// Version 26: chain step kind 49 is prelu. Version 25 is read as well.
// Version 27: op tags 29 and 30 are GatherElements (i32 axis, flag broadcast) and ScatterElements
// (i32 axis, u8 reduction). Version 26 is read as well.
constexpr uint32_t kGraphFormatVersion = 27;

std::string serialize(const Graph& g);

// Validates everything (magic, version, checksum, every count and size against the bytes left,
// enum values, ids in range) and then runs graph::verify; throws Error naming the first problem.
// Never reads outside `bytes`.
Graph deserialize(const std::string& bytes);

// The checksum stored at the end of the format: changing any one byte before it changes it.
// Public so that tests can corrupt a file, re-seal it, and reach the structural checks.
uint64_t format_checksum(const char* data, size_t size);

// serialize() to `path` through a temporary file renamed into place, so a failed write never
// leaves a file that looks valid. Returns the checksum stored in it, which identifies the graph
// and its weights (compiled models check it at load). Throws Error naming the path.
uint64_t write_graph_file(const Graph& g, const std::string& path);
// deserialize() the file at `path`; Error names the path. With `checksum`, also the checksum
// the file stores.
Graph read_graph_file(const std::string& path, uint64_t* checksum = nullptr);

}  // namespace kiln::graph
