-- wrk script for bench/extender_wrk.sh: POSTs kube-scheduler extender requests to nvl72-extender.
--
--   wrk ... -s bench/extender_wrk.lua URL -- BODY_FILE [MIX]
--
-- BODY_FILE holds one ExtenderArgs body (a 1-GPU pod + NodeNames, nodeCacheCapable, as the
-- scheduler sends it). MIX: "mix" (default) alternates filter and prioritize on every connection,
-- as the scheduler does for one pod; "filter" or "prioritize" sends only that verb.
-- done() prints machine-readable "WRK key=value" lines that the shell script parses.

local body
local mix = "mix"

function init(args)
  local f = assert(io.open(args[1], "rb"), "cannot open body file " .. tostring(args[1]))
  body = f:read("*a")
  f:close()
  if args[2] ~= nil then mix = args[2] end
  local prefix = wrk.path
  if prefix == "/" then prefix = "" end
  local headers = {["Content-Type"] = "application/json"}
  filter_req = wrk.format("POST", prefix .. "/filter", headers, body)
  prioritize_req = wrk.format("POST", prefix .. "/prioritize", headers, body)
  n = 0
end

function request()
  n = n + 1
  if mix == "filter" then return filter_req end
  if mix == "prioritize" then return prioritize_req end
  if n % 2 == 1 then return filter_req end
  return prioritize_req
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK requests=%d duration_us=%d bytes=%d\n",
                         summary.requests, summary.duration, summary.bytes))
  io.write(string.format("WRK errors_connect=%d errors_read=%d errors_write=%d errors_status=%d errors_timeout=%d\n",
                         e.connect, e.read, e.write, e.status, e.timeout))
  io.write(string.format("WRK p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d mean_us=%.1f\n",
                         latency:percentile(50), latency:percentile(90), latency:percentile(99),
                         latency:percentile(99.9), latency.max, latency.mean))
end
