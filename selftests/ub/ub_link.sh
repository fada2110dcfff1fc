#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The data path of ub.ko through the emulated fabric: with the module
# loaded, every port of the controller reaches DLL_Normal (the kernel logs
# "ubN: port P: link up") through its switch; the port work, its hrtimer
# and the MSI-X handler carry the link without a report from the kernel;
# rmmod with the links up is clean, and after insmod the links come back.
#
# Both guests of the fabric run this at about the same time: a link comes
# up once both ends are enabled, so each wait allows for the peer's boot.
#
# Skips (exit 4) without a UB controller or without the module.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

MODULE=${UB_MODULE:-/lib/modules/ub.ko}
VENDOR=0x19e5
DEVICE=0xd0b1
WAIT=${UB_LINK_WAIT:-60}

ktap_print_header

dev=
for d in /sys/bus/pci/devices/*; do
	[ -r "$d/vendor" ] || continue
	if [ "$(cat "$d/vendor")" = $VENDOR ] && [ "$(cat "$d/device")" = $DEVICE ]; then
		dev=$d
		break
	fi
done
if [ -z "$dev" ]; then
	ktap_skip_all "no UB controller ($VENDOR:$DEVICE) in /sys/bus/pci/devices"
	exit "$KSFT_SKIP"
fi
if [ ! -f "$MODULE" ]; then
	ktap_skip_all "no module at $MODULE"
	exit "$KSFT_SKIP"
fi
if [ -d /sys/module/ub ]; then
	ktap_skip_all "ub is already loaded"
	exit "$KSFT_SKIP"
fi

ktap_set_plan 4

# Link-up lines logged since the last mark.
mark=0
set_mark() { mark=$(dmesg | wc -l); }
ups() { dmesg | tail -n +"$((mark + 1))" | grep -c "ub[0-9]*: port [0-9]*: link up"; }

# Waits until $1 ports logged link up since the mark.
wait_links() {
	i=0
	while [ "$(ups)" -lt "$1" ]; do
		i=$((i + 1))
		[ $i -le $((WAIT * 10)) ] || return 1
		sleep 0.1
	done
	dmesg | tail -n +"$((mark + 1))" | grep "ub[0-9]*: port" | sed 's/^/# /'
}

set_mark
if insmod "$MODULE"; then
	ktap_test_pass "insmod"
else
	ktap_test_fail "insmod"
	ktap_finished
	exit
fi
ports=$(sed -n 's/^ports //p' /sys/kernel/debug/ub/"$(basename "$dev")"/caps)
echo "# $ports ports"

if wait_links "$ports"; then
	ktap_test_pass "every port reaches DLL_Normal"
else
	dmesg | tail -n 30 | sed 's/^/# /'
	ktap_test_fail "every port reaches DLL_Normal (within ${WAIT} s)"
fi

# Let the links carry their idle traffic (credit returns, ACKs) for a
# while: the port work and timers run without a report.
sleep 3
if rmmod ub && [ ! -d /sys/module/ub ]; then
	ktap_test_pass "rmmod with the links up"
else
	ktap_test_fail "rmmod with the links up"
fi

set_mark
insmod "$MODULE"
if wait_links "$ports"; then
	ktap_test_pass "links come back after insmod"
else
	ktap_test_fail "links come back after insmod (within ${WAIT} s)"
fi
rmmod ub

ktap_finished
