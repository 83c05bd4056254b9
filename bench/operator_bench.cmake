# operator_bench: 1,000 NVL72Jobs on 100 simulated racks through the operator pipeline on FakeClient.
# Run: build/op/bench/operator_bench [--racks 100] [--jobs 1000] [--workers 4]
if(TARGET nvl72_operator_lib)
  add_executable(operator_bench ${CMAKE_CURRENT_SOURCE_DIR}/operator_bench.cc)
  target_link_libraries(operator_bench nvl72_operator_lib)
  # A small run as a unit test, so the bench cannot silently stop admitting (it exits 1 unless every
  # job is admitted and every rank pod created; it hung for sessions when its nodes lacked the
  # `pods` allocatable that kube-scheduler's resource fit needs).
  add_test(NAME operator_bench_smoke
           COMMAND operator_bench --racks 4 --jobs 20 --workers 2)
  set_tests_properties(operator_bench_smoke PROPERTIES LABELS unit TIMEOUT 60)
endif()
