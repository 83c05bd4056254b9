# kube client benchmarks (bench/kube_bench.cc): informer sync of a large cluster from the fake API
# server (time + RSS), watch-stream decoding and informer event dispatch rates; the same sync against
# a real kube-apiserver when NVL72_KUBECONFIG is set (bench/cache_memory.sh --kube-bench).
if(TARGET nvl72_kube)
  add_executable(kube_bench ${CMAKE_CURRENT_LIST_DIR}/kube_bench.cc)
  target_link_libraries(kube_bench nvl72_kube benchmark::benchmark)
endif()
