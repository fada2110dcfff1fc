#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The "ub" generic netlink family of ub.ko, checked with a raw AF_NETLINK
# client (tools/ub-nl-smoke) against the registry stub: family lookup
# through nlctrl, dev-get and port-get dumps, malformed and unprivileged
# requests each refused with the expected extended ACK and changing
# nothing, an address round trip and an echo. The full check with ubctl is
# ub_netlink.sh.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

MODULE=${UB_MODULE:-/lib/modules/ub.ko}
SMOKE=$(command -v ub-nl-smoke)

ktap_print_header
if [ -z "$SMOKE" ] || [ ! -f "$MODULE" ]; then
	ktap_skip_all "no ub-nl-smoke or no $MODULE"
	exit "$KSFT_SKIP"
fi
if [ -d /sys/module/ub ]; then
	ktap_skip_all "ub is already loaded"
	exit "$KSFT_SKIP"
fi
ktap_set_plan 3
ktap_test_result "insmod ub.ko" insmod "$MODULE"
# The client prints its own KTAP; shown as diagnostics, judged by its exit.
run_smoke() {
	"$SMOKE" > /tmp/ub-nl-smoke.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-nl-smoke.out
	return $rc
}
ktap_test_result "ub-nl-smoke: every netlink check passed" run_smoke
ktap_test_result "rmmod ub (family unregistered)" rmmod ub
ktap_finished
