#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Acceptance 3 of the data-path issue through ubctl: a batch of malformed
# and unprivileged requests, each refused with a clear extended ACK
# message (ubctl prints it and exits non-zero), and the state dumped
# before and after the batch identical. Then the good path: address and
# route round trips, port set, echo.
#
# Runs against whatever ub.ko serves (the registry stub: device 0 with
# ports 0 and 1). Skips when ubctl is not in the guest. ubctl's syntax is
# that of the issue (OBJECT COMMAND [ARGS], -j JSON); adjust the UBCTL_*
# lines below if its final argument names differ.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

MODULE=${UB_MODULE:-/lib/modules/ub.ko}
UBCTL=$(command -v ubctl)
NOBODY=65534

ktap_print_header
if [ -z "$UBCTL" ] || [ ! -f "$MODULE" ]; then
	ktap_skip_all "no ubctl or no $MODULE"
	exit "$KSFT_SKIP"
fi
if [ -d /sys/module/ub ]; then
	ktap_skip_all "ub is already loaded"
	exit "$KSFT_SKIP"
fi

# Every state a refused request must leave alone.
dump_state() {
	"$UBCTL" -j dev show && "$UBCTL" -j -s port show && "$UBCTL" -j route show
}

# refused NAME EXPECTED-MESSAGE-PART -- UBCTL-ARGS...: ubctl fails and
# shows the kernel's extended ACK message.
refused() {
	want=$1
	shift
	out=$("$UBCTL" "$@" 2>&1)
	rc=$?
	echo "# ubctl $*: rc=$rc: $out"
	[ $rc -ne 0 ] && echo "$out" | grep -qi -- "$want"
}

unprivileged() {
	want=$1
	shift
	out=$(su -s /bin/sh nobody -c "$UBCTL $*" 2>&1 || setuidgid $NOBODY "$UBCTL" "$@" 2>&1)
	rc=$?
	echo "# (uid $NOBODY) ubctl $*: rc=$rc: $out"
	echo "$out" | grep -qi -- "$want"
}

ktap_set_plan 17
ktap_test_result "insmod ub.ko" insmod "$MODULE"
dump_state > /tmp/before.json
ktap_test_result "state dumps before the batch" test -s /tmp/before.json

ktap_test_result "port set of a missing port: error names the port" \
	refused "no port" port set dev 0 port 7 admin down
ktap_test_result "port set of a missing device" \
	refused "no UB device" port set dev 9 port 0 admin down
ktap_test_result "port set without a change" \
	refused "without any setting" port set dev 0 port 0
ktap_test_result "port set with a zero retry threshold (policy min 1)" \
	refused "" port set dev 0 port 0 num-retry-threshold 0
ktap_test_result "addr add of a 16-bit CNA above 0xffff" \
	refused "" addr add dev 0 cna16 0x12345
ktap_test_result "route add with host bits past the prefix" \
	refused "past the prefix" route add dev 0 10.1.2.3/16 ports 0
ktap_test_result "route add with a prefix longer than the address" \
	refused "prefix" route add dev 0 10.0.0.0/33 ports 0
ktap_test_result "npi set with partition ID 0" \
	refused "partition ID 0" npi set dev 0 mode strict npi 0
ktap_test_result "unprivileged port set: permission denied" \
	unprivileged "not permitted" port set dev 0 port 0 admin down

dump_state > /tmp/after.json
ktap_test_result "refused requests changed nothing" cmp /tmp/before.json /tmp/after.json

ktap_test_result "addr add / show / del round trip" sh -c \
	"'$UBCTL' addr add dev 0 10.0.0.1 && '$UBCTL' addr show dev 0 | grep -q 10.0.0.1 && '$UBCTL' addr del dev 0 10.0.0.1"
ktap_test_result "route add / show / del round trip" sh -c \
	"'$UBCTL' route add dev 0 10.1.0.0/16 ports 0,1 && '$UBCTL' route show | grep -q 10.1.0.0/16 && '$UBCTL' route del dev 0 10.1.0.0/16"
ktap_test_result "port set admin down, then up" sh -c \
	"'$UBCTL' port set dev 0 port 1 admin down && '$UBCTL' port set dev 0 port 1 admin up"
ktap_test_result "ping answers (stub echo)" "$UBCTL" ping -c 3 dev 0 10.0.0.2
ktap_test_result "rmmod ub" rmmod ub
ktap_finished
