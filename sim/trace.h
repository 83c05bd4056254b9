// ITP job trace: parsing and validation of `job_id,submission_time,duration,num_gpu` CSV files.
//
// A Trace is a plain value: the jobs of one file sorted by (submission time, line). Every error
// names the file and the 1-based line ("cluster04.csv:17: duration: negative value -3"), because
// users feed the simulator their own traces and one clear message beats a crash. Thread-safety:
// pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace nvl72::sim {

struct TraceJob {
  std::string id;           // job_id column, as written
  double submission_s = 0;  // seconds; >= 0
  double duration_s = 0;    // seconds of work at full speed; >= 0
  int gpus = 0;             // > 0
  int line = 0;             // 1-based line in the file (the header is line 1)
  // Nodes per segment of a gang (synthetic mixes); 0: the engine's rule (SegmentSizeFor).
  int segment_nodes = 0;
};

struct Trace {
  std::string file;            // name used in messages
  std::vector<TraceJob> jobs;  // sorted by (submission_s, line): arrival order
};

// Parses CSV text. The header must name the four columns (any order; extra columns are ignored);
// blank lines are skipped; '\r' line endings are accepted. Errors (InvalidArgument) name
// `file_name` and the line: missing column, non-numeric / negative / non-finite value, zero GPUs,
// wrong number of fields, no header, no job.
StatusOr<Trace> ParseTrace(std::string_view text, std::string_view file_name);

// Reads and parses a file; an unreadable file is InvalidArgument naming the path.
StatusOr<Trace> LoadTrace(const std::string& path);

// InvalidArgument naming the file and line of the first job needing more than `cluster_gpus` GPUs.
Status CheckJobsFitCluster(const Trace& trace, int cluster_gpus);

// Arrival-rate scaling: submission times divided by `load` (> 0). Keeps the order.
void ApplyLoad(Trace& trace, double load);

// Keeps the first `max_jobs` jobs in arrival order (no-op when max_jobs <= 0).
void TruncateJobs(Trace& trace, int max_jobs);

}  // namespace nvl72::sim
