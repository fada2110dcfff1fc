#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Acceptance 3 of the data-path issue: tools/ubctl's ub-nlcheck sends the
# "ub" generic netlink family a batch of malformed requests (missing,
# mis-sized, mis-typed, unknown and out-of-range attributes; unknown
# devices and ports) and, as uid 65534, every admin-perm operation; each
# must be refused with an extended ACK naming the problem, and the state
# dumped before and after must be identical. ub-nlcheck prints its own
# KTAP; this script loads ub.ko around it. The requests name a real
# device (the fabric guests' emulated controller): without a UB controller
# the whole test skips (exit 4).

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"
. "$DIR/ub_lib.sh"

NLCHECK=$(command -v ub-nlcheck)

ktap_print_header
ub_require ub-nlcheck
ktap_set_plan 3
ktap_test_result "insmod ub.ko" insmod "$MODULE"
# The batch's own KTAP, shown as diagnostics, judged by its exit status.
run_nlcheck() {
	"$NLCHECK" > /tmp/ub-nlcheck.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-nlcheck.out
	return $rc
}
ktap_test_result "ub-nlcheck: malformed and unprivileged requests refused, state unchanged" run_nlcheck
ktap_test_result "rmmod ub" rmmod ub
ktap_finished
