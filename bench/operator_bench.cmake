# operator_bench: 1,000 NVL72Jobs on 100 simulated racks through the operator pipeline on FakeClient.
# Run: build/op/bench/operator_bench [--racks 100] [--jobs 1000] [--workers 4]
if(TARGET nvl72_operator_lib)
  add_executable(operator_bench ${CMAKE_CURRENT_SOURCE_DIR}/operator_bench.cc)
  target_link_libraries(operator_bench nvl72_operator_lib)
endif()
