add_executable(placement_bench ${CMAKE_CURRENT_LIST_DIR}/placement_bench.cc)
target_link_libraries(placement_bench nvl72_placement nvl72_model benchmark::benchmark)
