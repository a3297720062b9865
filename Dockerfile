# confine in a container image: the static binary on PATH and its manual
# page, on a base image that holds what the confined commands need.
#
#   docker build -t confine .
#   docker run --rm confine confine run --json -- true
#   docker build --build-arg BASE_IMAGE=golang:1.26-bookworm -t confine-go .
#
# confine needs no privilege in the container: under Docker's default
# seccomp profile (and Kubernetes' RuntimeDefault) user namespaces are
# refused, so runs get the landlock+seccomp backend, which enforces every
# guarantee on its own. Build with no registry by pointing both images at
# ones imported from a local root filesystem (.ci/image.sh does).
ARG GO_IMAGE=golang:1.26-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${GO_IMAGE} AS build
# Where modules come from: empty keeps Go's default; .ci/image.sh builds
# with no network from a file:// module proxy it puts in the context.
ARG GOPROXY=
ENV CGO_ENABLED=0 GOPROXY=${GOPROXY} GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
WORKDIR /src
COPY . .
# Static (CGO_ENABLED=0): no loader, no libc, so any base runs it.
RUN go build -trimpath -ldflags=-s -o /out/usr/local/bin/confine ./cmd/confine \
 && go build -trimpath -ldflags=-s -o /out/usr/local/bin/confine-mcp ./cmd/confine-mcp \
 && mkdir -p /out/usr/local/share/man/man1 /out/work \
 && chmod 1777 /out/work \
 && /out/usr/local/bin/confine man > /out/usr/local/share/man/man1/confine.1 \
 && /out/usr/local/bin/confine version

FROM ${BASE_IMAGE}
COPY --from=build /out/ /
WORKDIR /work
# Non-root by default (root works too: the command then runs as uid 0
# with every capability dropped). A uid without a home directory gets no
# event log and each result says so (event_log_skipped); set
# CONFINE_EVENT_LOG to a file on a volume to keep one.
USER 1000:1000
CMD ["confine", "check"]
