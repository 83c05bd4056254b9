# http_server_trickle: /healthz latency on an HttpServer set up as nvl72-operator's health server
# while N clients trickle request heads (slowloris). Prints numbers; docs/benchmarks.md, "health
# server under slow clients".
if(TARGET nvl72_http)
  add_executable(http_server_trickle ${CMAKE_CURRENT_LIST_DIR}/http_server_trickle.cc)
  target_link_libraries(http_server_trickle nvl72_http)
endif()
