#!/usr/bin/env bash
# The Landlock ABIs no bootable kernel here has (1, 3, 4, 5; and 2 besides
# the 6.1 guest), simulated on this host by the test-only build tag
# confine_simabi: the escape rows and the functional tests, in the
# simulated container (the core alone, where the old-ABI mechanisms
# matter) and, for ABIs 1 and 2, under landlock+namespaces too. A release
# build cannot lower its ABI (internal/landlock/abi_release.go).
set -euo pipefail
cd "$(dirname "$0")/.."
tests='^(TestSimulatedABIInForce|TestEscape|TestFunctional|TestFunctionalOwnProcesses|TestFunctionalForkUnderSupervisor|TestFileWork|TestBackends|TestRootsNosuid)$'
fail=0
for abi in ${CONFINE_SIM_ABIS:-1 2 3 4 5}; do
  for mode in container host; do
    case "$mode:$abi" in host:[345]) continue ;; esac
    sim=0; [ "$mode" = container ] && sim=1
    start=$(date +%s)
    if CONFINE_SIM_LANDLOCK_ABI=$abi CONFINE_TEST_SIMULATE_CONTAINER=$sim \
        go test -count=1 -tags confine_simabi -run "$tests" ./escape >"/tmp/sim-abi-$abi-$mode.log" 2>&1; then
      r=pass
    else
      r=FAIL; fail=1
      tail -n 60 "/tmp/sim-abi-$abi-$mode.log"
    fi
    printf 'simulated Landlock ABI %s, %-9s: %s (%ss)\n' "$abi" "$mode" "$r" "$(( $(date +%s) - start ))"
  done
done
exit $fail
