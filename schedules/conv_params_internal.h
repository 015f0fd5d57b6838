// What conv_params.cpp and conv_candidates.cpp share: small facts about a target and a
// schedule's task count. Internal to schedules/.
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

// Parallel tasks of a schedule (as the schedule files split the loops).
int64_t task_count(const ConvParams& p, const ConvShape& s, const Halide::Target& t);

}  // namespace kiln::schedules::internal
