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
. "$DIR/ub_lib.sh"

ktap_print_header
ub_require ubctl

# Counter NAME of port 0 (dev-stats or link-stats).
stat() {
	"$UBCTL" -j -s port show 0/0 | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2
}
echoes() {
	ub_links_up && "$UBCTL" ping -c 5 -i 0.05 -W 2 -I 0 "$me" > /tmp/hostile-ping.out 2>&1
	rc=$?
	sed "s/^/# /" /tmp/hostile-ping.out | tail -4
	return $rc
}
# Whether the COUNTERs together grew by at least $min over $before.
grown() {
	left=$before
	sum=0
	for k in "$@"; do
		b=${left%% *}
		left=${left#* }
		a=$(stat "$k")
		[ -n "$a" ] && [ -n "$b" ] && sum=$((sum + a - b))
	done
	[ "$sum" -ge "$min" ]
}
# hostile CASE COUNT MIN COUNTER...: arms COUNT lies of CASE on port 0 and
# pings through it until the COUNTERs together grew by MIN (the host runs
# the hook asynchronously: up to 20 s); echoes work afterwards.
hostile() {
	quiet=0
	_hostile "$@"
}
# storm CASE COUNT MIN COUNTER...: the same without traffic while waiting.
# The local APIC merges MSI messages that arrive while one is pending, so
# the guest takes a fraction of what the fabric sends.
storm() {
	quiet=1
	_hostile "$@"
}
_hostile() {
	c=$1
	count=$2
	min=$3
	shift 3
	before=
	for k in "$@"; do before="$before$(stat "$k") "; done
	fabric hostile "vm$guest.0" "$c" --count "$count"
	i=0
	until grown "$@"; do
		i=$((i + 1))
		[ $i -le 40 ] || break
		# A storm needs no traffic, and traffic would add interrupts of
		# its own.
		if [ "$quiet" = 1 ]; then
			sleep 0.5
		else
			"$UBCTL" ping -c 10 -i 0.02 -W 1 -I 0 "$me" > /dev/null 2>&1
		fi
	done
	left=$before
	for k in "$@"; do
		echo "# $c x$count: $k ${left%% *} -> $(stat "$k") (want +$min in all)"
		left=${left#* }
	done
	grown "$@" && echoes
}

# ktap_test_result runs its command unquoted ($@): each test is one word.
t_config() { ub_configure; }

# The ring resets were logged, once per power of two (a hostile device
# cannot flood the log): 20 or so resets, 5 or 6 lines.
t_logged() {
	n=$(dmesg | grep -c "ub0: port 0: device fault, rings reset")
	echo "# $n log lines about ring resets"
	[ "$n" -ge 1 ] && [ "$n" -le 8 ]
}

ktap_set_plan 19
ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "links up, address and route configured" t_config
ktap_test_result "echoes before any fault" echoes
ktap_test_result "rx-head-out-of-range: counted, rings reset" hostile rx-head-out-of-range 3 3 bad-head
ktap_test_result "tx-head-out-of-range: counted, rings reset" hostile tx-head-out-of-range 3 3 bad-head
ktap_test_result "rx-head-beyond-tail: counted, rings reset" hostile rx-head-beyond-tail 3 3 bad-head
ktap_test_result "tx-head-beyond-tail: counted, rings reset" hostile tx-head-beyond-tail 3 3 bad-head
ktap_test_result "done-len-too-long: counted, buffer dropped" hostile done-len-too-long 3 3 bad-len
ktap_test_result "done-len-not-flits: counted, buffer dropped" hostile done-len-not-flits 3 3 bad-len
ktap_test_result "unknown-status: counted" hostile unknown-status 3 3 bad-status
ktap_test_result "done-clear: counted" hostile done-clear 3 3 bad-status
ktap_test_result "rx-double-completion: counted, rings reset" hostile rx-double-completion 3 3 double-completion
ktap_test_result "tx-double-completion: counted, rings reset" hostile tx-double-completion 3 3 double-completion
ktap_test_result "irq-storm: counted" storm irq-storm 3000 20 irq-storm
ktap_test_result "irq-storm-cause: taken, nothing done" storm irq-storm-cause 3000 20 interrupts
ktap_test_result "garbage-flits: refused by the link layer" hostile garbage-flits 3 1 rx-crc-errors rx-malformed garbage-flits
ktap_test_result "ring-dma: rings reset" hostile ring-dma 3 1 ring-resets
ktap_test_result "ring resets logged, rate-limited" t_logged
ktap_test_result "rmmod ub" rmmod ub
ktap_finished
