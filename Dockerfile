# syntax=docker/dockerfile:1
#
# The ramjet image: the daemon (/usr/local/bin/ramjet, the entrypoint) and the
# terminal UI (/usr/local/bin/ramjet-top), on a distroless runtime that runs as
# the non-root user 65532 — the uid charts/ramjet runs it as.
#
#   docker build -t registry.example.com/ramjet:0.1.0 .
#   docker run --rm -p 8080:8080 -p 10254:10254 \
#     -v "$PWD/routes.yaml:/etc/ramjet/routes.yaml:ro" \
#     registry.example.com/ramjet:0.1.0 --static-routes /etc/ramjet/routes.yaml
#
# io_uring inside a container needs a seccomp profile that allows it (Docker's
# default profile blocks io_uring_setup: add `--security-opt seccomp=unconfined`
# or run with `--io-driver auto`) and RLIMIT_MEMLOCK of about 128 KiB per
# worker (`--ulimit memlock=-1:-1`). See the comments on controller.ioDriver in
# charts/ramjet/values.yaml.

FROM rust:1.95-bookworm AS builder
WORKDIR /src
COPY . .
# The context has no .git: `--version` names the commit when the build says which
# (--build-arg RAMJET_COMMIT=$(git rev-parse --short=12 HEAD) --build-arg RAMJET_COMMIT_DATE=$(git log -1 --format=%cs)).
ARG RAMJET_COMMIT=""
ARG RAMJET_COMMIT_DATE=""
# The cache mounts keep the crate registry and the build directory between
# builds; the binaries are copied out of the cached target/ before it goes.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin ramjet --bin ramjet-top \
 && install -D -m 0755 -t /out target/release/ramjet target/release/ramjet-top

# glibc and libgcc, CA certificates, no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="ramjet" \
      org.opencontainers.image.description="Kubernetes ingress controller and edge proxy" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/ramjet /out/ramjet-top /usr/local/bin/
# The chart's containerPorts: http, https, the read-only metrics listener
# (/metrics, /healthz, /readyz; the daemon's admin listener by default) and the
# admin API.
EXPOSE 8080 8443 10254 10255
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/ramjet"]
