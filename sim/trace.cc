#include "sim/trace.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace nvl72::sim {
namespace {

constexpr std::array<std::string_view, 4> kColumns = {"job_id", "submission_time", "duration",
                                                      "num_gpu"};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(Trim(line.substr(start)));
      return fields;
    }
    fields.push_back(Trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

Status LineError(std::string_view file, int line, const std::string& message) {
  return InvalidArgumentError(std::string(file) + ":" + std::to_string(line) + ": " + message);
}

// A finite, non-negative decimal number.
bool ParseNonNegative(std::string_view text, double& out) {
  if (text.empty()) {
    return false;
  }
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && std::isfinite(out) && out >= 0;
}

}  // namespace

namespace {

// Field number of each of kColumns, as the header names them.
using ColumnIndex = std::array<int, 4>;

// The header: every column of kColumns must be there (in any order; others are ignored).
Status ParseHeader(const std::vector<std::string_view>& fields, std::string_view file_name,
                   int line_number, ColumnIndex& column_index) {
  for (size_t f = 0; f < fields.size(); ++f) {
    for (size_t c = 0; c < kColumns.size(); ++c) {
      if (fields[f] == kColumns[c]) {
        column_index[c] = static_cast<int>(f);
      }
    }
  }
  for (size_t c = 0; c < kColumns.size(); ++c) {
    if (column_index[c] < 0) {
      return LineError(file_name, line_number,
                       "header lacks column '" + std::string(kColumns[c]) +
                           "' (expected job_id,submission_time,duration,num_gpu)");
    }
  }
  return Status::Ok();
}

// A job row: as many fields as the header, a non-empty id, non-negative times, positive GPUs.
StatusOr<TraceJob> ParseJob(const std::vector<std::string_view>& fields, size_t header_fields,
                            const ColumnIndex& column_index, std::string_view file_name,
                            int line_number) {
  if (fields.size() != header_fields) {
    return LineError(file_name, line_number,
                     "expected " + std::to_string(header_fields) + " fields, found " +
                         std::to_string(fields.size()));
  }
  TraceJob job;
  job.line = line_number;
  job.id = std::string(fields[column_index[0]]);
  if (job.id.empty()) {
    return LineError(file_name, line_number, "job_id: empty");
  }
  const std::array<std::pair<int, double*>, 2> times = {std::pair{1, &job.submission_s},
                                                        std::pair{2, &job.duration_s}};
  for (const auto& [column, target] : times) {
    std::string_view value = fields[column_index[column]];
    if (!ParseNonNegative(value, *target)) {
      return LineError(file_name, line_number,
                       std::string(kColumns[column]) +
                           ": expected a non-negative number of seconds, got '" +
                           std::string(value) + "'");
    }
  }
  std::string_view gpus = fields[column_index[3]];
  int gpu_count = 0;
  auto [ptr, ec] = std::from_chars(gpus.data(), gpus.data() + gpus.size(), gpu_count);
  if (gpus.empty() || ec != std::errc() || ptr != gpus.data() + gpus.size() || gpu_count <= 0) {
    return LineError(file_name, line_number,
                     "num_gpu: expected a positive integer, got '" + std::string(gpus) + "'");
  }
  job.gpus = gpu_count;
  return job;
}

}  // namespace

StatusOr<Trace> ParseTrace(std::string_view text, std::string_view file_name) {
  Trace trace;
  trace.file = std::string(file_name);
  ColumnIndex column_index = {-1, -1, -1, -1};
  size_t header_fields = 0;
  bool have_header = false;
  int line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t newline = text.find('\n', pos);
    std::string_view raw = text.substr(
        pos, newline == std::string_view::npos ? std::string_view::npos : newline - pos);
    pos = newline == std::string_view::npos ? text.size() : newline + 1;
    ++line_number;
    std::string_view line = Trim(raw);
    if (line.empty()) {
      continue;
    }
    std::vector<std::string_view> fields = SplitFields(line);
    if (!have_header) {
      NVL72_RETURN_IF_ERROR(ParseHeader(fields, file_name, line_number, column_index));
      header_fields = fields.size();
      have_header = true;
      continue;
    }
    StatusOr<TraceJob> job = ParseJob(fields, header_fields, column_index, file_name, line_number);
    if (!job.ok()) {
      return job.status();
    }
    trace.jobs.push_back(std::move(*job));
  }
  if (!have_header) {
    return InvalidArgumentError(std::string(file_name) +
                                ":1: empty file (expected header job_id,submission_time,duration,"
                                "num_gpu)");
  }
  if (trace.jobs.empty()) {
    return LineError(file_name, line_number, "no job rows after the header");
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submission_s < b.submission_s;
  });
  return trace;
}

StatusOr<Trace> LoadTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgumentError(path + ": cannot open trace file");
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    return InvalidArgumentError(path + ": cannot read trace file");
  }
  return ParseTrace(content.str(), path);
}

Status CheckJobsFitCluster(const Trace& trace, int cluster_gpus) {
  for (const TraceJob& job : trace.jobs) {
    if (job.gpus > cluster_gpus) {
      return LineError(trace.file, job.line,
                       "job " + job.id + " needs " + std::to_string(job.gpus) +
                           " GPUs, more than the whole cluster (" + std::to_string(cluster_gpus) +
                           " GPUs)");
    }
  }
  return Status::Ok();
}

void ApplyLoad(Trace& trace, double load) {
  for (TraceJob& job : trace.jobs) {
    job.submission_s /= load;
  }
}

void TruncateJobs(Trace& trace, int max_jobs) {
  if (max_jobs > 0 && trace.jobs.size() > static_cast<size_t>(max_jobs)) {
    trace.jobs.resize(static_cast<size_t>(max_jobs));
  }
}

}  // namespace nvl72::sim
