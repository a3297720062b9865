#!/bin/sh
# The README's test command: every package on this host, then the packages
# that launch runs again as inside a stock Docker container (user
# namespaces refused by seccomp, so runs get the core backend). Both halves
# always run and report; the exit status is non-zero when either failed.
# Arguments go to both `go test` calls (e.g. ./test.sh -count=1 -v).
cd "$(dirname "$0")" || exit 1

go test "$@" ./...
host=$?
CONFINE_TEST_SIMULATE_CONTAINER=1 go test "$@" . ./internal/cli ./escape
container=$?

verdict() { if [ "$1" = 0 ]; then echo ok; else echo "FAIL (exit $1)"; fi; }
echo "test.sh: on this host: $(verdict $host); as in a container: $(verdict $container)"
[ "$host" = 0 ] && [ "$container" = 0 ]
