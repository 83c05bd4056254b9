# nvl72-extender benchmarks (bench/extender_bench.sh turns the numbers into docs/benchmarks.md rows).
if(TARGET nvl72_extender_server)
  add_executable(extender_bench ${CMAKE_CURRENT_LIST_DIR}/extender_bench.cc)
  target_link_libraries(extender_bench nvl72_extender_server benchmark::benchmark)
endif()
