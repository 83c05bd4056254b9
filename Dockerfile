# nvl72-operator image: nvl72-operator, nvl72-extender, kubectl-nvl72 (and nvl72-sim) on Debian
# bookworm. Built FROM a base made locally without any registry (scripts/build-base-image:
# debootstrap + docker import); use scripts/build-image, which makes the base and then this image.
#
#   docker build --build-arg BASE_IMAGE=nvl72/bookworm-base:12-v1 -t nvl72-operator:0.1.0 .
#
# The build stage installs the same Debian packages as scripts/install-deps and builds Release with
# -Werror; the runtime stage holds only the shared libraries the binaries link and runs as uid 65532.
ARG BASE_IMAGE=nvl72/bookworm-base:12-v1

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      libssl-dev libcpp-httplib-dev nlohmann-json3-dev prometheus-cpp-dev zlib1g-dev libyaml-cpp-dev \
      libgtest-dev libgmock-dev libbenchmark-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Only the shipped binaries: every one whose folder is part of the build (a folder joins the build
# once it has a CMakeLists.txt), no tests, no benchmarks. Release at -O2 (Debian's level, and what the
# RelWithDebInfo dev builds compile warning-free): GCC 12 at -O3 raises false -Wrestrict errors in
# std::string code (GCC bug 105329), and -Werror stays on.
ARG BUILD_JOBS=2
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
      -DNVL72_BUILD_BENCH=OFF \
      -DCMAKE_RUNTIME_OUTPUT_DIRECTORY=/build/bin >/dev/null \
 && targets=$(cmake --build /build --target help | sed -n 's/^\(nvl72-operator\|nvl72-extender\|kubectl-nvl72\|nvl72-sim\): .*/\1/p' | tr '\n' ' ') \
 && echo "building: $targets" \
 && test -n "$targets" \
 && cmake --build /build -j "${BUILD_JOBS}" --target $targets \
 && mkdir -p /out \
 && for t in $targets; do strip -o "/out/$t" "/build/bin/$t"; done \
 && ls -l /out

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# Runtime libraries only: OpenSSL, cpp-httplib, prometheus-cpp, yaml-cpp, zlib, CA roots, libstdc++.
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends \
      ca-certificates libssl3 libcpp-httplib0.11 libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 libyaml-cpp0.7 zlib1g libstdc++6 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
 && echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >>/etc/passwd \
 && echo 'nonroot:x:65532:' >>/etc/group \
 && mkdir -p /home/nonroot && chown 65532:65532 /home/nonroot
COPY --from=build /out/ /usr/local/bin/
LABEL org.opencontainers.image.title="nvl72-operator" \
      org.opencontainers.image.description="NVLink-domain gang placement for GB200 NVL72 racks: operator, scheduler extender, kubectl plugin" \
      org.opencontainers.image.source="nvl72-operator"
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT []
CMD ["/usr/local/bin/nvl72-operator"]
