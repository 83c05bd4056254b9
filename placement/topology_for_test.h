// Test fixture: builds a Snapshot from an ASCII drawing, one domain per line.
//
//   rack-a: . . 2 4 X
//   rack-b: . C T R
//
// Each token is a node of `gpus_per_node` GPUs: '.' empty, a digit = that many GPUs used,
// 'X' not ready, 'C' cordoned, 'T' tainted, 'R' fully reserved by a gang, 'P' fully used by
// preemptible (reclaimable) work. Node names are
// "<domain>-n<i>". For tests and benchmarks only.
#pragma once

#include <string_view>

#include "placement/snapshot.h"

namespace nvl72::placement {

Snapshot ParseTopology(std::string_view drawing, int gpus_per_node = 4);

}  // namespace nvl72::placement
