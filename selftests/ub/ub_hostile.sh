#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The device is untrusted: ub-fabric's hostile mode (Documentation/ub/
# fabric.rst, "Hostile mode") makes this guest's controller lie on port 0,
# one case at a time, on request of this test (through the host hook of
# scripts/fabric-guest-test). For each case the driver counts what it
# refused (ubctl port show -s: dev-stats) or repairs it (link-stats), keeps
# the port (or recovers it), and echoes through the fabric work again; the
# harness fails the run on any kernel report (the debug flavour adds KASAN,
# UBSAN, lockdep and kmemleak).
#
# Skips (exit 4) without a UB controller or without ubctl.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

MODULE=${UB_MODULE:-/lib/modules/ub.ko}
UBCTL=$(command -v ubctl)

ktap_print_header
if [ -z "$UBCTL" ] || [ ! -f "$MODULE" ]; then
	ktap_skip_all "no ubctl or no $MODULE"
	exit "$KSFT_SKIP"
fi
if [ -d /sys/module/ub ]; then
	ktap_skip_all "ub is already loaded"
	exit "$KSFT_SKIP"
fi
if ! grep -qs 0xd0b1 /sys/bus/pci/devices/*/device; then
	ktap_skip_all "no UB controller"
	exit "$KSFT_SKIP"
fi
guest=$(sed -n 's/.*ubtest.guest=vm\([0-9]*\).*/\1/p' /proc/cmdline)
guest=${guest:-0}
me=10.0.$((guest + 1)).100

fabric() {
	echo "# ub-host-hook: $*" > /dev/ttyS1
	echo "# asked the host: ub-fabric $*"
	sleep 1
}
# Counter NAME of port 0 (dev-stats or link-stats).
stat() {
	"$UBCTL" -j -s port show 0/0 | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2
}
links_up() {
	i=0
	until [ "$("$UBCTL" -j port show 0 | grep -o '"dll-state":"normal"' | wc -l)" -ge 2 ]; do
		i=$((i + 1))
		[ $i -le 600 ] || return 1
		sleep 0.1
	done
}
echoes() {
	links_up && "$UBCTL" ping -c 5 -i 0.05 -W 2 -I 0 "$me" > /tmp/hostile-ping.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/hostile-ping.out | tail -2
	return $rc
}
# case CASE COUNTER...: inject CASE 3 times on port 0 while echoes run;
# at least one COUNTER grows, and echoes work afterwards.
hostile() {
	c=$1
	shift
	before=
	for k in "$@"; do before="$before $(stat "$k")"; done
	fabric hostile "vm$guest.0" "$c" --count 3
	"$UBCTL" ping -c 20 -i 0.02 -W 1 -I 0 "$me" > /dev/null 2>&1
	grew=0
	set -- "$@"
	for k in "$@"; do
		b=$(echo $before | cut -d' ' -f1)
		before=$(echo $before | cut -s -d' ' -f2-)
		a=$(stat "$k")
		echo "# $c: $k ${b:-?} -> ${a:-?}"
		[ -n "$a" ] && [ -n "$b" ] && [ "$a" -gt "$b" ] && grew=1
	done
	[ $grew -eq 1 ] && echoes
}

ktap_set_plan 15
ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "links up, address and route configured" sh -c "
	i=0; until [ \"\$($UBCTL -j port show 0 | grep -o '\"dll-state\":\"normal\"' | wc -l)\" -ge 2 ]; do
		i=\$((i + 1)); [ \$i -le 600 ] || exit 1; sleep 0.1; done
	$UBCTL addr add 0 $me && $UBCTL route add 0 10.0.0.0/16 ports 0,1 per-packet"
ktap_test_result "echoes before any fault" echoes
ktap_test_result "rx-head-out-of-range: counted, rings reset" hostile rx-head-out-of-range bad-head
ktap_test_result "tx-head-out-of-range: counted, rings reset" hostile tx-head-out-of-range bad-head
ktap_test_result "tx-head-beyond-tail: counted" hostile tx-head-beyond-tail bad-head
ktap_test_result "done-len-too-long: counted" hostile done-len-too-long bad-len
ktap_test_result "done-len-not-flits: counted" hostile done-len-not-flits bad-len
ktap_test_result "unknown-status: counted" hostile unknown-status bad-status
ktap_test_result "done-clear: counted" hostile done-clear bad-status
ktap_test_result "rx-double-completion: counted" hostile rx-double-completion double-completion
ktap_test_result "irq-storm: counted" hostile irq-storm irq-storm
ktap_test_result "garbage-flits: refused by the link layer" hostile garbage-flits rx-crc-errors rx-malformed garbage-flits
ktap_test_result "ring-dma: rings reset" hostile ring-dma ring-resets
ktap_test_result "rmmod ub" rmmod ub
ktap_finished
