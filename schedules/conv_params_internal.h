// What conv_params.cpp, conv_params_direct.cpp, conv_candidates.cpp and pool_schedule.cpp
// share: small facts about a target and a schedule's task count. Internal to schedules/.
#pragma once

#include <cstdint>

#include "Halide.h"
#include "schedules/conv_params.h"

namespace kiln::schedules::internal {

int vector_lanes(const Halide::Target& t);

// Vector registers of the target's register file (32 with AVX-512, else 16).
int vector_registers(const Halide::Target& t);

// Vector registers the accumulators of a register tile may take (conv_params.cpp).
int accumulator_registers(const Halide::Target& t);

int64_t ceil_div(int64_t a, int64_t b);

// The height of a band of output rows, `min_rows` to `max_rows` (0: twice `preferred`), whose
// tasks (bands x batch) 2 and 4 threads share most evenly (each thread's whole tasks against an
// equal share of the rows), where each band also computes `halo` rows' worth of work its
// neighbour computes again (a fused pooling's overlapping windows); of equals, the nearest to
// `preferred`, then the taller.
int balanced_band_rows(int height, int batch, int preferred, int min_rows, double halo = 0,
                       int max_rows = 0);

// The most output channels a wide or deep register tile of `s` may cover with vectors of `vec`
// lanes: out_channels, or with whole_channel_blocks the channels up to the next whole vector
// (inside the weights' zero-padded last block).
int64_t tile_channels(const ConvShape& s, int vec);

// `b` within what the epilogue and the L1 cache leave room for (conv_tile_limits.cpp): at most
// 16 accumulators for a costly epilogue after a short reduction (AVX-512), and no more pixels
// than the L1 ways their input lines share. Dense convolutions only; the default direct
// schedules apply it last.
RegisterBlock limited_tile(const ConvShape& s, const Halide::Target& t, RegisterBlock b);

// The family's name in the text form ("wide", "deep", ...; conv_params_text.cpp).
const char* family_name(ConvFamily family);

// Parallel tasks of a schedule (as the schedule files split the loops).
int64_t task_count(const ConvParams& p, const ConvShape& s, const Halide::Target& t);

}  // namespace kiln::schedules::internal
