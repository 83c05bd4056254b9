# metrics_bench: nvl72-operator's /metrics at 100 and 1,000 domains (serialise, HTTP scrape through
# prometheus-cpp's Exposer, per-pass update). Numbers: docs/benchmarks.md, section "metrics".
if(TARGET nvl72_operator_lib)
  add_executable(metrics_bench ${CMAKE_CURRENT_LIST_DIR}/metrics_bench.cc)
  target_link_libraries(metrics_bench nvl72_operator_lib prometheus-cpp::pull PkgConfig::HTTPLIB
    OpenSSL::SSL OpenSSL::Crypto benchmark::benchmark)
endif()
